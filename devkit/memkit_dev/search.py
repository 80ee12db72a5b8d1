"""`memkit search "text"`: long-term memory (records and indexed messages) through the SDK; a
table on a terminal, one JSON object a line when piped or with --json."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from typing import Any, TextIO

from memkit.client import MemkitClientError
from memkit.models.memory import MemoryHit
from memkit_dev import connect
from memkit_dev.progress import on_terminal

COLUMNS = ("score", "type", "id", "user", "session", "text")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    search = commands.add_parser(
        "search",
        help="search long-term memory",
        description="Search long-term memory (records, and session messages where they are "
        "indexed), best first: a table on a terminal, JSON lines when piped or with --json.",
    )
    search.add_argument("text", help="what to look for (empty: the newest, by the filters)")
    search.add_argument("--user", help="only this user's memory")
    search.add_argument("--namespace", help="only this namespace's")
    search.add_argument("--session", help="only this session's")
    search.add_argument("--limit", type=int, default=10, help="hits to show (1 to 100; default 10)")
    search.add_argument(
        "--mode", choices=["hybrid", "semantic", "keyword"], default="hybrid", help="default hybrid"
    )
    search.add_argument("--json", action="store_true", help="JSON lines even on a terminal")
    connect.add_arguments(search)
    search.set_defaults(run=search_command)


def search_command(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 100:
        return connect.fail("--limit takes 1 to 100")
    filters: dict[str, Any] = {"limit": args.limit, "search_mode": args.mode}
    for field, value in (
        ("user_id", args.user),
        ("namespace", args.namespace),
        ("session_id", args.session),
    ):
        if value is not None:
            filters[field] = {"eq": value}
    try:
        with connect.client_of(args) as client:
            hits = client.search_memories(args.text, **filters).memories
    except MemkitClientError as error:
        return connect.fail(f"search failed: {connect.describe(error)}")
    if args.json or not on_terminal(sys.stdout):
        for hit in hits:
            sys.stdout.write(json.dumps(hit.model_dump(mode="json"), ensure_ascii=False) + "\n")
    else:
        table(hits, sys.stdout)
    return 0


def table(hits: list[MemoryHit], out: TextIO) -> None:
    """The hits as a table as wide as the terminal; the text is cut to what fits."""
    if not hits:
        out.write("no memory found\n")
        return
    rows = [
        (
            f"{hit.score:.3f}",
            hit.memory_type.value,
            hit.id,
            hit.user_id or "-",
            hit.session_id or "-",
            " ".join(hit.text.split()),
        )
        for hit in hits
    ]
    widths = [max(len(COLUMNS[i]), *(len(r[i]) for r in rows)) for i in range(len(COLUMNS) - 1)]
    width = shutil.get_terminal_size().columns
    room = max(20, width - sum(widths) - 2 * len(widths))
    for row in [COLUMNS, *rows]:
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=False)]
        text = row[-1] if len(row[-1]) <= room else row[-1][: room - 1] + "…"
        out.write("  ".join([*cells, text]).rstrip() + "\n")
