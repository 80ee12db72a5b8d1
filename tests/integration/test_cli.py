"""`memkit serve`, the console script, as a newcomer runs it."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_memkit_serve_prints_its_url_and_answers_on_it() -> None:
    command = shutil.which("memkit", path=str(Path(sys.executable).parent)) or "memkit"
    process = subprocess.Popen(
        [command, "serve", "--port", "0", "--concurrency", "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        deadline, url = time.monotonic() + 60, None
        while url is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            found = re.search(r"local stack on (http://\S+)", line)
            url = found.group(1) if found else None
        assert url, "memkit serve printed no URL"

        with urllib.request.urlopen(f"{url}/v1/health", timeout=30) as response:
            assert response.status == 200
            assert "now" in json.loads(response.read())
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
