"""Expiry: delete the sessions past their `expires_at` that DynamoDB has not deleted yet.

DynamoDB's TTL deletes expired items up to days late (reads hide them meanwhile). This phase
reads the due entries of the lifecycle index (GSI3, EXP#<shard>, sorted by expiry time) shard
by shard, never the table, and deletes each session with its items of that life
(memkit.store.expiry). The deletes reach the table stream as REMOVE records, which the
indexer turns into vector deletions, as it does for DynamoDB's own TTL deletes.

The cursor is the shard and the last index entry handled in it, so a run stopped by its
deadline resumes mid-shard.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from memkit.jobs.phases import PhaseOutcome
from memkit.store.expiry import DueSession, ExpiryTable
from memkit.store.protocol import EXPIRY_SHARDS
from memkit.times import Deadline

# Metric names (PhaseOutcome.counts).
SESSIONS_DELETED = "ExpiredSessionsDeleted"
SESSIONS_SKIPPED = "ExpiredSessionsSkipped"
ITEMS_EXAMINED = "ExpiryItemsExamined"
ITEMS_DELETED = "ExpiryItemsDeleted"
ITEMS_KEPT = "ExpiryItemsKept"
COUNTS = (SESSIONS_DELETED, SESSIONS_SKIPPED, ITEMS_EXAMINED, ITEMS_DELETED, ITEMS_KEPT)


@dataclass(frozen=True)
class ExpiryCursor:
    """Where the phase stopped: a shard, and the last index entry handled in it."""

    shard: int = 0
    after: str | None = None

    def encode(self) -> str:
        return json.dumps({"shard": self.shard, "after": self.after}, separators=(",", ":"))

    @classmethod
    def decode(cls, raw: str | None) -> ExpiryCursor:
        """The cursor `raw` stands for; the start for none, or for one this phase cannot
        read (a cursor from another version: starting over only costs a re-read)."""
        if not raw:
            return cls()
        try:
            value = json.loads(raw)
            shard, after = int(value["shard"]), value.get("after")
        except (ValueError, TypeError, KeyError):
            return cls()
        if not 0 <= shard < EXPIRY_SHARDS or not isinstance(after, str | None):
            return cls()
        return cls(shard, after)


class ExpiryPhase:
    """Deletes expired sessions found through the lifecycle index, within the deadline."""

    name = "expiry"

    def __init__(
        self,
        expiry: ExpiryTable,
        page_size: int = 100,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._expiry = expiry
        self._page_size = page_size
        self._clock = clock

    def run(self, cursor: str | None, deadline: Deadline) -> PhaseOutcome:
        now = int(self._clock())
        at = ExpiryCursor.decode(cursor)
        counts: Counter[str] = Counter(dict.fromkeys(COUNTS, 0))
        for shard in range(at.shard, EXPIRY_SHARDS):
            after = at.after if shard == at.shard else None
            while True:
                if deadline.passed():
                    return PhaseOutcome(False, ExpiryCursor(shard, after).encode(), dict(counts))
                page = self._expiry.due_sessions(shard, now, after, self._page_size)
                for due in page:
                    if deadline.passed():
                        cursor_now = ExpiryCursor(shard, after).encode()
                        return PhaseOutcome(False, cursor_now, dict(counts))
                    self._purge(due, now, counts)
                    after = due.sort_key
                if len(page) < self._page_size:
                    break
        return PhaseOutcome(True, None, dict(counts))

    def _purge(self, due: DueSession, now: int, counts: Counter[str]) -> None:
        purge = self._expiry.purge_expired_session(due, now)
        counts[ITEMS_EXAMINED] += 1 + purge.examined  # the index entry, then the partition
        counts[ITEMS_DELETED] += purge.deleted
        counts[ITEMS_KEPT] += purge.kept
        counts[SESSIONS_DELETED if purge.purged else SESSIONS_SKIPPED] += 1
