"""Warm overhead: what the handler, resolver and service add to a GET, storage excluded.

The real Lambda handler (Powertools resolver with validation, logger and metrics decorators)
over the in-memory store, on a scratchpad holding a realistic ~300-token markdown block. With
the `mcp` extra installed, also the same read through the MCP function's handler (the
get_scratchpad tool, in each protocol era): its transport is made per invocation.

    python -m bench.warm_overhead            the figures
    python -m bench.warm_overhead --profile  where the time goes (cProfile, top 25)
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from typing import Any

from bench import environment
from bench.figures import median, percentile, report
from memkit.handlers.wiring import api_services
from memkit.tokens import content_tokens

CALLS = 5_000
WARM_UP = 300
TARGET_MS = 0.3
PAD_PATH = "/v1/working-memory/demo/scratchpad"
NOTES = """# User
- name: Ada Lovelace
- role: engineering manager at a logistics company in Lisbon
- timezone: Europe/Lisbon; prefers answers in English, metric units, 24-hour clock
- tone: short, direct answers; bullet points over prose; no emojis

# Current goal
Plan a five-day trip to Kyoto in April for two adults, mid-range budget (about EUR 2,500
without flights). Interested in gardens, temples early in the morning, vegetarian food and
one day trip (Nara or Osaka). Avoid overnight buses.

# Decisions so far
- flights: Lisbon -> Osaka KIX via Helsinki, arriving 3 April 14:05
- hotel: shortlist of two ryokan near Gion; waiting for prices
- rail: no JR Pass (not worth it for this route)

# Open questions
- Which day for Nara? Weather forecast pending.
- Tea ceremony booking: morning or afternoon slot?
- Does the partner have dietary restrictions besides vegetarian?
"""


def _get_request() -> Callable[[], dict[str, Any]]:
    """One GET of a seeded scratchpad through the real handler, as a no-argument call."""
    from memkit.handlers.api import make_lambda_handler
    from tests.events import http_event

    assert 250 <= content_tokens(NOTES) <= 350, "the pad should hold about 300 tokens"
    services = _seeded()
    handler = make_lambda_handler(lambda: services)
    event = http_event("GET", PAD_PATH)
    context: Any = environment.LambdaContext()

    def call() -> dict[str, Any]:
        return handler(event, context)

    response = call()
    if response["statusCode"] != 200:
        raise SystemExit(f"warm_overhead: the GET failed: {response}")
    return call


def _seeded() -> Any:
    from memkit.config import ApiSettings
    from memkit.models.domain import Owner, PadRef
    from tests.fakes.memory_store import InMemoryStore

    store = InMemoryStore()
    ref = PadRef(owner=Owner(tenant="default"), session_id="demo")
    store.pads.write_pad(store.pads.read_pad(ref), NOTES, content_tokens(NOTES))
    return api_services(store, ApiSettings(table_name="memkit-bench"))


def _mcp_request(version: str) -> Callable[[], dict[str, Any]]:
    """The same scratchpad read as the MCP tool get_scratchpad, through the MCP handler."""
    from memkit.config import McpSettings
    from memkit.handlers.mcp import make_lambda_handler
    from tests.mcp_requests import mcp_event, tool_call

    services = _seeded()
    handler = make_lambda_handler(lambda: services, lambda: McpSettings())
    event = mcp_event(tool_call("get_scratchpad", {"session_id": "demo"}, version), None, version)
    context: Any = environment.LambdaContext()

    def call() -> dict[str, Any]:
        return handler(event, context)

    response = call()
    if response["statusCode"] != 200 or '"isError":false' not in response["body"]:
        raise SystemExit(f"warm_overhead: the MCP call failed: {response}")
    return call


def _timed(call: Callable[[], dict[str, Any]], calls: int) -> list[float]:
    for _ in range(WARM_UP):
        call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def main() -> None:
    environment.apply()
    samples = _timed(_get_request(), CALLS)
    target = f"target <= {TARGET_MS}"
    report("warm_overhead.get_scratchpad_ms", median(samples), "ms median", target)
    report("warm_overhead.get_scratchpad_p90_ms", percentile(samples, 0.9), "ms p90")
    if importlib.util.find_spec("mcp") is None:
        print("warm_overhead: the mcp SDK is not installed (the mcp extra): no MCP figures")
        return
    for era, version in (("handshake", "2025-11-25"), ("2026", "2026-07-28")):
        timed = _timed(_mcp_request(version), CALLS // 5)
        report(f"warm_overhead.mcp_get_scratchpad_{era}_ms", median(timed), "ms median")
        report(f"warm_overhead.mcp_get_scratchpad_{era}_p90_ms", percentile(timed, 0.9), "ms p90")


def profile(top: int = 25) -> None:
    import cProfile
    import pstats

    environment.apply()
    call = _get_request()
    for _ in range(WARM_UP):
        call()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(CALLS // 5):
        call()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    if "--profile" in sys.argv:
        profile()
    else:
        main()
