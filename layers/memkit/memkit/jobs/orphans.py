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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from memkit.jobs.phases import PhaseOutcome
from memkit.models.domain import ItemRef
from memkit.times import Deadline
from memkit.vectors.protocol import Removal, Sampled, VectorIndex, source_of

# Metric names (PhaseOutcome.counts).
EXAMINED = "OrphanVectorsExamined"
FOUND = "OrphanVectorsFound"
REMOVED = "OrphanVectorsRemoved"
COUNTS = (EXAMINED, FOUND, REMOVED)
# Docs read per index page (one BatchGet of 100 keys checks a page).
PAGE_SIZE = 100


class SourceTable(Protocol):
    """What the sweep asks of the table (DynamoStore's ReindexTable)."""

    def indexed_sources(self, wanted: Sequence[ItemRef]) -> set[ItemRef]: ...


class OrphanPhase:
    """Samples the index and removes the vectors whose source item is gone (a Phase)."""

    name = "orphans"

    def __init__(
        self,
        table: SourceTable,
        index: VectorIndex,
        sample_size: int = 1000,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._table = table
        self._index = index
        self._sample_size = sample_size
        self._page_size = page_size

    def run(self, cursor: str | None, deadline: Deadline) -> PhaseOutcome:
        """Up to `sample_size` docs after `cursor`; done when the sweep reached the end of
        the index (the next run starts over from the first doc)."""
        counts: Counter[str] = Counter(dict.fromkeys(COUNTS, 0))
        after = cursor
        while counts[EXAMINED] < self._sample_size and not deadline.passed():
            wanted = min(self._page_size, self._sample_size - counts[EXAMINED])
            page, after_page = self._index.sample(wanted, after)
            self._check(page, counts)
            if after_page is None:
                return PhaseOutcome(True, None, dict(counts))
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
