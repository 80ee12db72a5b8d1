"""The local stack's functions run as Lambda runs them: stopped at their Timeout."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.test import Client

from memkit_dev.local.functions import FunctionSpec, FunctionTimedOut, LocalFunction
from memkit_dev.local.gateway import HttpApiGateway, Route

pytestmark = pytest.mark.integration

# Far below any template's Timeout, so a test never waits long for one.
TIMEOUT_SECONDS = 0.5
HANDLER = """
import json
import os
import time
from pathlib import Path


def handler(event, context):
    request = json.loads(event["body"]) if "body" in event else event  # through the gateway
    if "sleep" in request:
        time.sleep(request["sleep"])
        Path(request["written"]).write_text("done")  # what a timed-out run must never reach
    return {"pid": os.getpid(), "remaining_ms": context.get_remaining_time_in_millis()}
"""


@pytest.fixture
def function(tmp_path: Path) -> Iterator[LocalFunction]:
    code = tmp_path / "code"
    code.mkdir()
    (code / "slow.py").write_text(textwrap.dedent(HANDLER))
    spec = FunctionSpec("Slow", code, "slow.handler", timeout_seconds=TIMEOUT_SECONDS)
    running = LocalFunction(spec, {}, 1)
    running.warm()
    yield running
    running.stop()


def test_an_invocation_gets_the_function_timeout_as_its_remaining_time(
    function: LocalFunction,
) -> None:
    answer = function.invoke({}).result()

    assert 0 < answer["remaining_ms"] <= TIMEOUT_SECONDS * 1000


def test_an_invocation_past_the_timeout_is_stopped_and_its_environment_replaced(
    function: LocalFunction, tmp_path: Path
) -> None:
    # Given a warm environment
    first = function.invoke({}).result()["pid"]

    # When an invocation runs far past the function's Timeout
    written = tmp_path / "written"
    late = function.invoke({"sleep": 120, "written": str(written)})

    # Then it fails as timed out, its process is gone (it never gets to write), and the
    # next invocation runs in a fresh environment
    with pytest.raises(FunctionTimedOut):
        late.result()
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)
    assert function.invoke({}).result()["pid"] != first
    assert not written.exists()


def test_the_gateway_answers_a_timed_out_function_as_api_gateway_does(
    function: LocalFunction, tmp_path: Path
) -> None:
    # Given the function behind an HTTP API route
    gateway = HttpApiGateway([(function, [Route.of("POST", "/slow")])])
    body = json.dumps({"sleep": 120, "written": str(tmp_path / "written")})

    # When a request runs it past its Timeout
    response = Client(gateway).post("/slow", data=body, content_type="application/json")

    # Then the gateway answers what an HTTP API answers a function error with (a Lambda
    # timeout is one): 500 Internal Server Error
    assert response.status_code == 500
    assert response.get_json() == {"message": "Internal Server Error"}
