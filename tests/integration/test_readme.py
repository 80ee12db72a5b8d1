"""The README's tour runs as written against the local stack: every `curl` in it answers 2xx.

The tour is the README's first ```sh block that sets `B=`; it runs in bash with `B` pointing
at a fresh local stack, and `curl` made to fail on any HTTP error (the README's own calls use
`-s`, which would hide one)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from memkit_dev.local.auth import mint
from memkit_dev.local.stack import LocalStack
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


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_every_call_of_the_readme_tour_succeeds(jwt_stack: LocalStack, dev_keys: Path) -> None:
    # Given the tour, with B at the local stack, H's token minted as `memkit token` mints it
    # (with the stack's key), and curl failing on an HTTP error
    script = re.sub(r"^B=.*$", f"B={jwt_stack.url}", tour(), count=1, flags=re.MULTILINE)
    assert re.search(r"^H=.*memkit token --sub ada --admin", script, re.MULTILINE)
    token = mint(dev_keys, "ada", "default", ["memory:read", "memory:write", "memory:admin"])
    script = re.sub(
        r"^H=.*$", f'H="authorization: Bearer {token}"', script, count=1, flags=re.MULTILINE
    )
    prelude = (
        'set -euo pipefail\ncurl() { command curl --fail-with-body --max-time 30 "$@"; echo; }\n'
    )

    # When it runs as written
    done = subprocess.run(
        ["bash", "-c", prelude + script], capture_output=True, text=True, timeout=300
    )

    # Then every call answered 2xx, and the calls did what the comments say
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert script.count('curl -s -H "$H"') == len(re.findall(r"^curl ", script, re.MULTILINE))
    assert '"likes":["tea","chess"]' in done.stdout.replace(" ", "")
    assert '"created":["tea","oslo"]' in done.stdout.replace(" ", "")
