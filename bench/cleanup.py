"""The scheduled cleanup run's expiry phase on moto: what it reads for what it deletes.

A table holds live sessions (half with a TTL that has not run out, half without one) and
expired sessions of MESSAGES messages each. One cleanup run, "an hour later", deletes the
expired ones. Printed:

    - items examined per item deleted: the lifecycle index entries plus the partitions read,
      over the items deleted (target close to 1: live sessions are never read);
    - DynamoDB requests per expired session, by operation;
    - time per deleted item (median of RUNS runs, each over fresh expired sessions).

Sessions are written with the store's own item builders, so the items are the store's. Time
on moto is mostly moto's: it answers a Query by going through every item of the table, which
DynamoDB does not, so the time grows with the table here and not on AWS.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bench import environment
from bench.dynamodb_requests import TABLE, RequestCounter, api_on_moto
from bench.figures import median, report

LIVE = 200  # half with a TTL not yet run out, half without one
EXPIRED = 40  # per run
MESSAGES = 8
RUNS = 3
HOUR = 3600


def _seed(store: Any, prefix: str, count: int, ttl: int | None) -> None:
    """`count` sessions of MESSAGES messages as the store writes them (its own item
    builders), put with BatchWriteItem: moto copies the whole table for every transaction,
    so seeding through the API would take minutes."""
    from memkit.models.domain import Owner, StoredMessage
    from memkit.store import keys

    owner = Owner(tenant="default")
    now = time.time()
    sessions = store.sessions
    client = store.table.items.connection.client
    items = []
    for i in range(count):
        meta = sessions.new_session_meta(owner, f"{prefix}{i}", None)
        meta = replace(
            meta,
            ttl_seconds=ttl,
            expires_at=int(now) + ttl if ttl else None,
            children_expire_at=int(now) + 2 * ttl if ttl else None,
            message_count=MESSAGES,
            version=1,
        )
        items.append(sessions.session_item(owner.tenant, meta))
        for j in range(MESSAGES):
            created_us = int(now * 1_000_000) + j
            message = StoredMessage(
                id=f"m{j}",
                role="user",
                content=f"message {j} of {prefix}{i}",
                created_at=datetime.fromtimestamp(created_us / 1e6, UTC).isoformat(),
                order=keys.message_order(created_us, f"m{j}"),
                tokens=5,
            )
            expires = meta.children_expire_at
            items.append(sessions._message_item(owner.tenant, meta, message, expires))
    for start in range(0, len(items), 25):
        requests = [
            {"PutRequest": {"Item": item.serialize()}} for item in items[start : start + 25]
        ]
        client.batch_write_item(RequestItems={TABLE: requests})


def main() -> None:
    environment.apply()
    counter = RequestCounter().install()  # before any botocore session exists

    from memkit.config import CleanupSettings
    from memkit.jobs.cleanup import CleanupRun, TableCursors
    from memkit.jobs.expiry import ExpiryPhase
    from memkit.store.dynamodb import DynamoStore

    with api_on_moto():
        store = DynamoStore(CleanupSettings(table_name=TABLE, region="us-east-1"))
        _seed(store, "live-ttl-", LIVE // 2, 7 * 24 * HOUR)
        _seed(store, "live-", LIVE - LIVE // 2, None)
        later = time.time() + HOUR
        ratios, per_item, requests = [], [], Counter[str]()
        for run in range(RUNS):
            _seed(store, f"expired-{run}-", EXPIRED, 60)
            cleanup = CleanupRun(
                [ExpiryPhase(store.expiry, clock=lambda: later)], TableCursors(store.expiry)
            )
            counter.operations.clear()
            started = time.perf_counter()
            result = cleanup.run(remaining_ms=300_000)
            seconds = time.perf_counter() - started
            requests.update(counter.operations)
            counts = result.phases[0].counts
            if counts.get("ExpiredSessionsDeleted") != EXPIRED or not result.done:
                raise SystemExit(f"the run did not delete the {EXPIRED} expired sessions: {counts}")
            ratios.append(counts["ExpiryItemsExamined"] / counts["ExpiryItemsDeleted"])
            per_item.append(seconds / counts["ExpiryItemsDeleted"])

    sessions = RUNS * EXPIRED
    detail = ", ".join(f"{op} {n / sessions:.2f}" for op, n in sorted(requests.items()))
    report(
        "cleanup.items_examined_per_item_deleted",
        median(ratios),
        target=f"close to 1; {LIVE} live sessions, {EXPIRED} expired of {MESSAGES} messages",
    )
    report(
        "cleanup.dynamodb_requests_per_expired_session",
        sum(requests.values()) / sessions,
        target=detail,
    )
    report(
        "cleanup.time_per_deleted_item",
        median(per_item) * 1000,
        "ms",
        target=f"median of {RUNS} runs, moto in process",
    )


if __name__ == "__main__":
    main()
