"""Ingestion through the local stack's HTTP API, as an agent backfilling its history would.

    1. Concurrent appends: 4 clients x 50 appends of one message each to one new session.
       Statuses by kind, messages stored, and the resident memory of whatever serves
       DynamoDB (this process for moto, DynamoDB Local's process group) before/after.
    2. Backfill: 10 conversations of 700 messages, 100 a request, back to back, message
       indexing, curation and cleanup on. Messages/s through the API, 5xx answers, and the
       time until every message is searchable.

    python -m bench.ingest [--engine auto|dynamodb-local|moto] [--conversations N]
        [--messages N]

The engine defaults to DynamoDB Local where Java 17+ is here (as `make serve`), else moto.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import environment
from bench.figures import median, report

ROOT = Path(__file__).resolve().parents[1]
CLIENTS, APPENDS = 4, 50
PER_REQUEST = 100
SEARCHABLE_TIMEOUT = 1800.0


def _rss_mb(group: int | None) -> float:
    """Resident memory in MB of a process group (DynamoDB Local: its watchdog shell and
    Java), from /proc; None: this process (moto), its peak where /proc is missing."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").is_file():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    pids = [str(os.getpid())] if group is None else []
    if group is not None:
        for stat in proc.glob("[0-9]*/stat"):
            try:
                # pid (comm) state ppid pgrp ...: the fields after the command's parenthesis
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            if int(fields[2]) == group:
                pids.append(stat.parent.name)
    total = 0.0
    for pid in pids:
        try:
            lines = (proc / pid / "status").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(line.split()[1]) / 1024 for line in lines if line.startswith("VmRSS:"))
    return total


def _store_group(stack: Any) -> int | None:
    """The process group serving DynamoDB (None: moto, in this process)."""
    local = getattr(stack, "_dynamodb_local", None)
    process = getattr(local, "_process", None)
    return int(process.pid) if process is not None else None


def concurrent_appends(client: Any, url: str, stack: Any) -> None:
    group = _store_group(stack)
    before = _rss_mb(group)

    def append(slot: tuple[int, int]) -> int:
        worker, n = slot
        body = {"messages": [{"id": f"c{worker}-{n}", "role": "user", "content": f"turn {n}"}]}
        return int(client.post(f"{url}/v1/working-memory/race/messages", json=body).status_code)

    slots = [(w, n) for n in range(APPENDS) for w in range(CLIENTS)]
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        statuses = Counter(pool.map(append, slots))
    stored = client.get(f"{url}/v1/working-memory/race").json().get("message_count")
    failures = sum(n for status, n in statuses.items() if status >= 400)
    report("ingest.concurrent_appends_stored", int(stored or 0), f"of {len(slots)}")
    report("ingest.concurrent_appends_failures", failures, "client-visible", "target 0")
    for status, n in sorted(statuses.items()):
        report(f"ingest.concurrent_appends_status_{status}", n)
    report("ingest.store_rss_before_mb", before, "MB")
    report("ingest.store_rss_after_mb", _rss_mb(group), "MB")


def backfill(client: Any, url: str, stack: Any, conversations: int, messages: int) -> None:
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    started = time.monotonic()
    for c in range(conversations):
        for start in range(0, messages, PER_REQUEST):
            batch = [
                {
                    "id": f"m{n}",
                    "role": "user" if n % 2 == 0 else "assistant",
                    "content": f"conversation {c} turn {n}: notes on trip plans and tea",
                }
                for n in range(start, min(messages, start + PER_REQUEST))
            ]
            sent = time.monotonic()
            response = client.post(
                f"{url}/v1/working-memory/conv-{c}/messages",
                params={"namespace": "backfill"},
                json={"messages": batch},
            )
            latencies.append(time.monotonic() - sent)
            statuses[response.status_code] += 1
    elapsed = time.monotonic() - started
    total = conversations * messages
    report("ingest.backfill_messages", total)
    report("ingest.backfill_messages_per_second", total / elapsed, "msg/s")
    report("ingest.backfill_request_ms", median(latencies) * 1000, "ms median")
    report("ingest.backfill_5xx", sum(n for s, n in statuses.items() if s >= 500), "", "target 0")
    searchable = until_indexed(stack, total)
    if searchable is None:
        report("ingest.backfill_all_searchable_s", SEARCHABLE_TIMEOUT, "s: NOT all indexed by then")
    else:
        report("ingest.backfill_all_searchable_s", searchable, "s after the last request")


def until_indexed(stack: Any, total: int, namespace: str = "backfill") -> float | None:
    """Seconds until the index holds `total` docs of `namespace` (the stack's loopback
    index); None if it did not within SEARCHABLE_TIMEOUT."""
    from memkit.config import IndexSettings

    index = IndexSettings().opensearch_index
    started = time.monotonic()
    while time.monotonic() - started < SEARCHABLE_TIMEOUT:
        docs = stack.opensearch.documents(index)
        held = sum(
            1
            for _, source in docs
            if source.get("namespace") == namespace and not source.get("deleted")
        )
        if held >= total:
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", choices=["auto", "dynamodb-local", "moto"])
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--messages", type=int, default=700)
    args = parser.parse_args()
    environment.apply()
    import httpx

    from bench.dynamodb_requests import local_stack

    with local_stack("ingest", args.engine) as stack, httpx.Client(timeout=120) as client:
        concurrent_appends(client, stack.url, stack)
        backfill(client, stack.url, stack, args.conversations, args.messages)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
