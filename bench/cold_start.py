"""Cold start: a fresh process that imports the API function and answers one request.

Measured against the floor every Python function on DynamoDB pays: a fresh process that
imports boto3 and builds a DynamoDB client. Runs are interleaved (A, B, health, A, B, ...) so
a noisy neighbour slows all three alike; medians and their ratio are what to read.

Two ratios: whole-process wall time, and process start until the answer is ready. The second
leaves out interpreter teardown (what freeing a large heap costs: docs/benchmarks.md), which
Lambda never pays during a cold start.

Where the `mcp` SDK is installed (the `mcp` extra), also the MCP function (functions/mcp):
its cold start to the answer of a first tools/list (a bearer JWT verified in the function,
as AuthMode jwt deploys it), and what the API's cold start would pay
with the MCP server in the same function (the same GET scratchpad, the server's module
imported as well): the reason it is a function of its own.

    python -m bench.cold_start               the figures
    python -m bench.cold_start --importtime  the costliest imports of the API child
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

from bench import environment
from bench.figures import median, report

ROOT = Path(__file__).resolve().parents[1]
RUNS = 15
TABLE = "memkit-bench"
TARGET_RATIO = 1.3
PAD_PATH = "/v1/working-memory/demo/scratchpad"


def _child(function: str, module: str, also: str = "") -> str:
    """A child that imports a function as Lambda does (its directory on sys.path), then
    `also`, and answers one event."""
    return f"""
import json, os, sys, time
sys.path.insert(0, {str(ROOT / "functions" / function)!r})
import {module}
{also}

class Context:
    function_name = "memkit-bench-{function}"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:memkit-bench"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self):
        return 10_000

response = {module}.lambda_handler(json.loads(os.environ["BENCH_EVENT"]), Context())
print(response["statusCode"], time.time())
"""


API_CHILD = _child("api", "memory_api")
# The API function as it would be with the MCP server in it, and the MCP function itself.
API_WITH_MCP_CHILD = _child("api", "memory_api", "import memkit.mcp_server.tools")
MCP_CHILD = _child("mcp", "mcp_server")
BOTO3_CHILD = """
import time, boto3
boto3.client("dynamodb", region_name="us-east-1")
print(200, time.time())
"""


def _run(code: str, env: dict[str, str]) -> tuple[float, float]:
    """(whole-process wall time, time until the child had its answer), in seconds."""
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
    )
    elapsed = time.time() - started
    status, _, answered_at = done.stdout.strip().partition(" ")
    if done.returncode != 0 or status != "200":
        # A figure for a failing request would mean nothing: say why and stop.
        raise SystemExit(f"cold_start child failed ({done.stdout!r}):\n{done.stderr[-2000:]}")
    return elapsed, float(answered_at) - started


def _child_environments(endpoint: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The GET scratchpad's, the health check's and the MCP tools/list's environments."""
    from tests.events import http_event
    from tests.mcp_requests import mcp_event, request

    base = environment.apply()
    base.update({"MEMKIT_TABLE_NAME": TABLE, "MEMKIT_DYNAMODB_ENDPOINT": endpoint})
    pad = {**base, "BENCH_EVENT": json.dumps(http_event("GET", PAD_PATH))}
    health = {**base, "BENCH_EVENT": json.dumps(http_event("GET", "/v1/health"))}
    # The MCP function as deployed with AuthMode jwt: it verifies the bearer token itself (an
    # RS256 signature, the key set given inline: on AWS it is fetched once a container).
    from tests.events import jwt_authorizer
    from tests.tokens import AUDIENCE, ISSUER, bearer_for, key_set

    signed = {"authorization": bearer_for(jwt_authorizer("default", "dev", "memory:read"))}
    tools = {
        **base,
        "MEMKIT_AUTH_MODE": "jwt",
        "MEMKIT_OAUTH_ISSUER": ISSUER,
        "MEMKIT_JWT_AUDIENCE": AUDIENCE,
        "MEMKIT_JWT_JWKS": json.dumps(key_set()),
        "BENCH_EVENT": json.dumps(mcp_event(request("tools/list"), headers=signed)),
    }
    return pad, health, tools


def _seed(endpoint: str) -> None:
    """The table from template.yaml, with a written scratchpad for session `demo`."""
    import boto3

    from memkit.config import ApiSettings
    from memkit.models.domain import Owner, PadRef
    from memkit.store.dynamodb import DynamoStore
    from memkit.tokens import content_tokens
    from memkit_dev.local.template import create_table, load_template

    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    create_table(client, load_template(ROOT / "template.yaml"), TABLE)
    store = DynamoStore(ApiSettings(table_name=TABLE, dynamodb_endpoint=endpoint))
    ref = PadRef(owner=Owner(tenant="default"), session_id="demo")
    notes = "# Notes\n- user: Ada\n- goal: plan a trip to Lisbon"
    store.pads.write_pad(store.pads.read_pad(ref), notes, content_tokens(notes))


def importtime(top: int = 10, runs: int = 5) -> None:
    """The API child's costliest imports, cumulative and self, medians of `runs` runs."""
    from memkit_dev.local.dynamodb import MotoDynamoDB

    environment.apply()
    moto = MotoDynamoDB().start()
    timings: dict[str, list[tuple[int, int]]] = {}
    try:
        _seed(moto.endpoint)
        pad_env, _, _ = _child_environments(moto.endpoint)
        for _ in range(runs):
            done = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", API_CHILD],
                env=pad_env,
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            for line in done.stderr.splitlines():
                if line.startswith("import time:") and "cumulative" not in line:
                    own, cumulative, name = line.removeprefix("import time:").split("|", 2)
                    timings.setdefault(name.strip(), []).append((int(own), int(cumulative)))
    finally:
        moto.stop()
    rows = [
        (median([c for _, c in t]) / 1000, median([o for o, _ in t]) / 1000, module)
        for module, t in timings.items()
    ]
    print("cumulative ms  self ms  module")
    for total_ms, own_ms, module in sorted(rows, reverse=True)[:top]:
        print(f"{total_ms:13.1f}  {own_ms:7.1f}  {module}")
    print("by self time:")
    for total_ms, own_ms, module in sorted(rows, key=lambda row: -row[1])[:top]:
        print(f"{total_ms:13.1f}  {own_ms:7.1f}  {module}")


def main() -> None:
    environment.apply()
    from memkit_dev.local.dynamodb import MotoDynamoDB

    moto = MotoDynamoDB().start()
    with_mcp = importlib.util.find_spec("mcp") is not None
    try:
        _seed(moto.endpoint)
        pad_env, health_env, tools_env = _child_environments(moto.endpoint)
        boto3_env = environment.apply()
        children = [
            ("pad", API_CHILD, pad_env),
            ("floor", BOTO3_CHILD, boto3_env),
            ("health", API_CHILD, health_env),
        ]
        if with_mcp:
            children += [("pad_with_mcp", API_WITH_MCP_CHILD, pad_env)]
            children += [("mcp_tools", MCP_CHILD, tools_env)]
        # One untimed round: byte-code caches and the page cache warm for every child alike.
        for _, code, env in children:
            _run(code, env)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in children}
        for _ in range(RUNS):
            for name, code, env in children:
                runs[name].append(_run(code, env))
    finally:
        moto.stop()
    pad, health, floor = runs["pad"], runs["health"], runs["floor"]

    target = f"target <= {TARGET_RATIO}"
    for label, which in (("", 0), ("_to_answer", 1)):
        pad_s, floor_s = median([r[which] for r in pad]), median([r[which] for r in floor])
        health_s = median([r[which] for r in health])
        report(f"cold_start.ratio{label}", pad_s / floor_s, target=target)
        report(f"cold_start.get_scratchpad{label}_ms", pad_s * 1000, "ms median")
        report(f"cold_start.health{label}_ms", health_s * 1000, "ms median")
        report(f"cold_start.boto3_client{label}_ms", floor_s * 1000, "ms median")
        if with_mcp:
            merged_s = median([r[which] for r in runs["pad_with_mcp"]])
            mcp_s = median([r[which] for r in runs["mcp_tools"]])
            report(f"cold_start.get_scratchpad_with_mcp{label}_ms", merged_s * 1000, "ms median")
            report(f"cold_start.mcp_server_import{label}_ms", (merged_s - pad_s) * 1000, "ms")
            report(f"cold_start.mcp_tools_list{label}_ms", mcp_s * 1000, "ms median")
    if not with_mcp:
        print("cold_start: the mcp SDK is not installed (the mcp extra): no MCP figures")


if __name__ == "__main__":
    if "--importtime" in sys.argv:
        importtime()
    else:
        main()
