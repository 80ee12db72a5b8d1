"""The README has a tour of real calls (the README's first ```sh block that sets `B=`). It runs
as written, with every other example of the README and docs/, in
tests/integration/test_doc_examples.py."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)


def tour() -> str:
    """The README's curl tour, as written."""
    blocks = BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    return next(block for block in blocks if re.search(r"^B=", block, re.MULTILINE))


def test_the_readme_has_a_tour_of_real_calls() -> None:
    script = tour()

    calls = re.findall(r"^curl ", script, re.MULTILINE)
    assert len(calls) >= 8
    assert "/v1/long-term-memory/search" in script
