"""What the API function imports on a cold start (measured by bench/cold_start.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAZY = [
    # Building a Tracer loads the X-Ray SDK (Powertools' package __init__ only loads the class).
    "aws_xray_sdk",
    "httpx",  # the SDK's (memkit.client); no function imports it
    "jsonschema",  # imported when a schema is first checked
    "mcp",  # the MCP function's own (functions/mcp): never the API's
    "memkit.client",
    "moto",  # the local stack only
    "re2",  # imported when a schema pattern is first compiled
    "werkzeug",
]


def test_importing_the_handler_leaves_the_lazy_modules_unloaded() -> None:
    probe = (
        "import json, sys; sys.path.insert(0, 'functions/api'); import memory_api; "
        f"print(json.dumps([m for m in {LAZY!r} if m in sys.modules]))"
    )

    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout

    assert json.loads(loaded) == []


@pytest.mark.parametrize(
    ("function", "module", "path"),
    [("api", "memory_api", "/v1/health"), ("mcp", "mcp_server", "/mcp")],
)
def test_garbage_collection_resumes_after_the_first_invocation(
    function: str, module: str, path: str
) -> None:
    probe = f"""
import gc, json, sys
sys.path.insert(0, 'functions/{function}')
sys.path.insert(0, '.')
import {module}
paused = not gc.isenabled()
from tests.events import http_event
from tests.conftest import LambdaContextStub
{module}.lambda_handler(http_event('GET', '{path}'), LambdaContextStub())
print(json.dumps([paused, gc.isenabled(), gc.get_freeze_count() > 0]))
"""

    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout

    # The last line: the function's log lines come first (the health check finds no table).
    assert json.loads(result.splitlines()[-1]) == [True, True, True]
