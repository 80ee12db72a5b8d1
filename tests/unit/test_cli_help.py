"""`memkit --help`, and each command's, says what every option does."""

from __future__ import annotations

import argparse

from memkit_dev.cli import build_parser


def _options(parser: argparse.ArgumentParser, name: str) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                found += _options(sub, f"{name} {command}")
        elif not isinstance(action, argparse._HelpAction):
            found.append((name, action))
    return found


def test_every_option_of_every_command_has_help_text() -> None:
    options = _options(build_parser(), "memkit")
    silent = [
        f"{command} {'/'.join(action.option_strings) or action.dest}"
        for command, action in options
        if not (action.help or "").strip()
    ]

    assert len(options) > 60  # serve, token, reindex, keys, export, import, search, doctor...
    assert silent == []
