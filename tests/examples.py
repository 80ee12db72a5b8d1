"""The examples of examples/ run as a user runs them: a command of its own, from the checkout,
against a running local stack that its environment points it at."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"


def run_example(
    python: str | Path,
    example: str,
    args: Iterable[str],
    environment: Mapping[str, str],
    *,
    without: Iterable[str] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`python examples/<example> args...` in the checkout, with this process's environment
    less the variables `without` and plus `environment` (what switches it to the stack): its
    exit status and its output as text, whatever it returned."""
    left_out = set(without)
    kept = {name: value for name, value in os.environ.items() if name not in left_out}
    return subprocess.run(
        [str(python), str(EXAMPLES / example), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**kept, **environment},
        cwd=ROOT,
    )
