"""The orphan sweep: vectors whose source item is gone from the table, removed.

The stream removes a vector when its item is deleted, but a stream record can be lost to
the indexer (it aged out of the 24-hour stream after repeated failures, it went to the
dead-letter queue, an item was deleted while its indexer mapping was disabled, a rebuild
copied an item that was deleted during the copy). Each cleanup run reads up to
`sample_size` docs of the index in doc-id order from where the last run stopped, so the
sweep is a systematic sample that covers the whole index over successive runs, and asks the
table whether each doc's item (named by its fields, `source_of`) is still there: a record
must exist and be live; a message must be live and still stamped for indexing. One
BatchGet per 100 docs; docs whose item is gone are removed at a version just above the
doc's, so a newer write of the same item (its write time is later) still wins.

A pass that reached the end of the index rests `interval_seconds` before the next one starts
(its cursor says until when): the runs in between send the index nothing, so a Serverless
collection that scaled to zero stays asleep through them (a request wakes it, and it bills
for 10 minutes after). An orphan costs nothing meanwhile but its place in the index: a
search drops a hit whose item is gone.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from memkit.errors import StoreUnavailable
from memkit.jobs.phases import PhaseOutcome
from memkit.store.reindex import ReindexTable
from memkit.times import Deadline
from memkit.vectors.protocol import Removal, Sampled, VectorIndex, source_of

# Metric names (PhaseOutcome.counts).
EXAMINED = "OrphanVectorsExamined"
FOUND = "OrphanVectorsFound"
REMOVED = "OrphanVectorsRemoved"
COUNTS = (EXAMINED, FOUND, REMOVED)
# Docs read per index page (one BatchGet of 100 keys checks a page).
PAGE_SIZE = 100
# The cursor of a sweep resting between passes: this prefix, then the epoch second the next
# pass may start (a doc id is hex, a DynamoDB page key JSON: neither starts so).
RESTING = "next-pass-at:"


class OrphanPhase:
    """Samples the index and removes the vectors whose source item is gone (a Phase)."""

    name = "orphans"

    def __init__(
        self,
        table: ReindexTable,
        index: VectorIndex,
        sample_size: int = 1000,
        page_size: int = PAGE_SIZE,
        interval_seconds: float = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._table = table
        self._index = index
        self._sample_size = sample_size
        self._page_size = page_size
        self._interval = interval_seconds
        self._clock = clock

    def run(self, cursor: str | None, deadline: Deadline) -> PhaseOutcome:
        """Up to `sample_size` docs after `cursor`; done when the sweep reached the end of
        the index (the next pass starts over from the first doc, once `interval_seconds`
        have passed: until then a run is done at once, without asking the index; with an
        interval of 0 at once, whatever rest the cursor saved)."""
        counts: Counter[str] = Counter(dict.fromkeys(COUNTS, 0))
        resting_until = _resting_until(cursor)
        if resting_until is not None:
            # Interval 0 asks for no rest: one saved under a longer interval ends too.
            if self._interval and self._clock() < resting_until:
                return PhaseOutcome(True, cursor, dict(counts))
            cursor = None
        after = cursor
        while counts[EXAMINED] < self._sample_size and not deadline.passed():
            wanted = min(self._page_size, self._sample_size - counts[EXAMINED])
            try:
                page, after_page = self._index.sample(wanted, after)
            except StoreUnavailable:
                if deadline.passed():
                    break  # it outlasted the run (a collection waking): the next one resumes
                raise
            self._check(page, counts)
            if after_page is None:
                rest = f"{RESTING}{int(self._clock() + self._interval)}" if self._interval else None
                return PhaseOutcome(True, rest, dict(counts))
            after = after_page
        return PhaseOutcome(False, after, dict(counts))

    def _check(self, page: list[Sampled], counts: Counter[str]) -> None:
        counts[EXAMINED] += len(page)
        # A doc whose fields name no item cannot be checked, so it stays.
        sourced = [
            (doc, ref) for doc in page if (ref := source_of(doc.tenant, doc.fields)) is not None
        ]
        if not sourced:
            return
        present = self._table.indexed_sources([key for _, key in sourced])
        orphans = [doc for doc, key in sourced if key not in present]
        if not orphans:
            return
        counts[FOUND] += len(orphans)
        failures = self._index.remove(
            [Removal(doc.id, doc.tenant, doc.version + 1) for doc in orphans]
        )
        counts[REMOVED] += len(orphans) - len(failures)


def _resting_until(cursor: str | None) -> float | None:
    """When a resting sweep's next pass may start, or None (a pass's cursor, or none: a
    resting cursor that does not read is as good as a pass that ended long ago)."""
    if cursor is None or not cursor.startswith(RESTING):
        return None
    try:
        return float(cursor.removeprefix(RESTING))
    except ValueError:
        return 0.0
