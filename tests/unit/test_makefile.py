"""`make help` (and `make` alone) lists every target of the Makefile with what it does."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_alone_lists_every_target_with_what_it_does() -> None:
    phony = re.search(r"^\.PHONY: (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert phony is not None
    targets = phony.group(1).split()

    shown = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout

    listed = dict(re.findall(r"^  make (\S+)\s+(.+)$", shown, re.MULTILINE))
    assert sorted(listed) == sorted(targets)
    assert all(len(text) > 10 for text in listed.values()), listed
