"""Rebuild the vector index from the table (`memkit reindex`, functions/reindex), e.g. after
a change of embedding model or dimensions, without downtime for searches.

1. A new generation of the index is created (memkit.vectors: `<alias>-gen<N>` on
   OpenSearch, a fresh instance in process); the live one keeps answering searches and
   taking the indexer's writes.
2. Copy: a parallel Scan reads every indexable live item (memkit.store.reindex); each page
   goes through the stream indexer's own code as typed INSERT changes (store.changes ->
   memkit.jobs.indexing.Indexer.index_changes),
   so docs are built, embedded in batches and bulk-written exactly as the indexer does,
   into the new generation only.
3. Switch: one atomic step makes the new generation the one searches and writes use.
4. Catch-up: items written since the rebuild started (less a margin for clock skew) are
   indexed again into the new generation. The copy may have read them before the writes
   that the indexer then sent to the old generation; versions (the item's write time) make
   the replay harmless. Writes after the switch reach the new generation by the stream.
   An item deleted during the copy may have been copied after its removal reached the old
   generation: the orphan sweep (memkit.jobs.orphans) removes such vectors.
5. The old generation is deleted.

A failure before the switch deletes the new generation; searches never saw it. Running out
of time pauses instead: the Lambda entry (functions/reindex) gives the copy a deadline before
its timeout, and an invocation that reaches it returns a `continuation` (the new generation
and each Scan segment's cursor); invoked again with {"resume": <continuation>}, it goes on
from there, so a table of any size is rebuilt in as many invocations as it takes (the
catch-up, one more Scan, must fit in the last one's remaining time). A failure after the
switch (in the catch-up) leaves the new generation live and the old one in place (except
on the first rebuild, whose switch itself removes the plain index it replaces): run the
rebuild again, and delete the old generation by hand. One rebuild at a time: a second one
started meanwhile replaces the first one's unfinished generation.

A new embedding model: the rebuild embeds with the settings it is given (the command's
options, or the function's environment), the functions search and index with theirs. Give
the rebuild the new model, and deploy the functions with it right after the switch: until
they have it, their queries meet vectors of another model (of other dimensions: OpenSearch
refuses them), and the indexer's failed writes wait for the stream's retries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memkit.embeddings.protocol import Embedder
from memkit.jobs.indexing import Indexer
from memkit.observability import logger
from memkit.store.dynamodb import DynamoStore
from memkit.times import Deadline
from memkit.vectors.protocol import Rebuild, RebuildableIndex, VectorIndex

# Writes during the copy are caught up from this long before the rebuild started (writers'
# clocks stamp written_us, and they may run behind this one's).
CATCH_UP_MARGIN_SECONDS = 300.0
SCAN_PAGE = 500


class OutOfTime(Exception):
    """The rebuild's deadline passed before its switch (unless paused: the new generation
    was deleted)."""


class ReindexState(BaseModel):
    """Where a paused rebuild stands: its new generation (filled in part, not live), the
    generation it will replace, the catch-up's lower bound, and the cursor of each segment
    not yet finished (None: not started). Opaque to the operator who passes it back."""

    model_config = ConfigDict(extra="forbid")

    generation: str = Field(min_length=1, max_length=255)
    replaced: str | None = Field(default=None, max_length=255)
    since_us: int = Field(ge=0)
    segments: int = Field(ge=1, le=1000)
    pending: dict[int, str | None]


@dataclass
class ReindexCounts:
    """Running totals: items the Scan read, docs written to the new generation, items
    that failed (embedding or write; they keep their old vectors until the next write)."""

    scanned: int = 0
    indexable: int = 0
    indexed: int = 0
    failed: int = 0


@dataclass(frozen=True)
class ReindexReport:
    """What a rebuild did (counts and names only)."""

    generation: str | None
    switched: bool
    scanned: int
    indexable: int
    indexed: int
    failed: int
    caught_up: int
    seconds: float
    dry_run: bool
    # A paused rebuild: what to pass back to resume it (None: finished, or a dry run).
    continuation: ReindexState | None = None

    @property
    def rate(self) -> float:
        """Docs indexed per second (the copy and the catch-up)."""
        return (self.indexed + self.caught_up) / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "switched": self.switched,
            "scanned": self.scanned,
            "indexable": self.indexable,
            "indexed": self.indexed,
            "failed": self.failed,
            "caught_up": self.caught_up,
            "seconds": round(self.seconds, 3),
            "docs_per_second": round(self.rate, 1),
            "dry_run": self.dry_run,
            "continuation": self.continuation.model_dump() if self.continuation else None,
        }


Progress = Callable[[ReindexCounts, int], None]  # totals so far, the table's approximate size


class Reindexer:
    """Rebuilds `index` from `store` with `embedder` (see the module docstring): it reads the
    table whole (`store.reindex`) and writes through the indexer (its records and sessions)."""

    def __init__(
        self,
        store: DynamoStore,
        index: RebuildableIndex,
        embedder: Embedder,
        *,
        segments: int = 4,
        page_size: int = SCAN_PAGE,
        clock: Callable[[], float] = time.time,
        catch_up_margin: float = CATCH_UP_MARGIN_SECONDS,
    ) -> None:
        if not 1 <= segments <= 1000:
            raise ValueError("segments must be from 1 to 1000")
        self._store = store
        self._table = store.reindex
        self._index = index
        self._embedder = embedder
        self._segments = segments
        self._page_size = page_size
        self._clock = clock
        self._margin = catch_up_margin
        self._lock = threading.Lock()
        self._deadline: Deadline | None = None

    def run(
        self,
        *,
        dry_run: bool = False,
        progress: Progress | None = None,
        before_switch: Callable[[], None] | None = None,
        deadline: Deadline | None = None,
        pause: bool = False,
        resume: ReindexState | None = None,
    ) -> ReindexReport:
        """Rebuild, switch, catch up, retire the old generation. `dry_run`: only count
        what a rebuild would index. `before_switch` runs between the copy and the switch
        (the copy is complete, the old generation still serves). Past `deadline`, a copy
        stops: with `pause`, it returns the report with its continuation (pass it back as
        `resume` to go on); else it deletes the new generation and raises OutOfTime."""
        self._deadline = deadline
        started = self._clock()
        total = self._table.approximate_item_count()
        counts = ReindexCounts()
        report = _Reporter(counts, total, progress, self._lock)
        if dry_run:
            self._scan_all(None, report, None, self._fresh(self._segments))
            return self._report(None, False, counts, 0, started, True)
        dimensions = self._embedder.dimensions
        if resume is None:
            since_us = int((started - self._margin) * 1_000_000)
            segments, pending = self._segments, self._fresh(self._segments)
            rebuild = self._index.rebuild(dimensions)
        else:
            since_us, segments, pending = resume.since_us, resume.segments, dict(resume.pending)
            rebuild = self._index.resume_rebuild(resume.generation, resume.replaced, dimensions)
        logger.info("reindex copying", extra={"generation": rebuild.generation})
        try:
            self._scan_all(rebuild.target, report, None, pending, segments)
            if before_switch is not None:
                before_switch()
            rebuild.switch()
        except OutOfTime:
            if not pause:
                self._abandon(rebuild)
                raise
            state = ReindexState(
                generation=rebuild.generation,
                replaced=rebuild.replaced,
                since_us=since_us,
                segments=segments,
                pending=pending,
            )
            logger.info("reindex paused", extra={"generation": rebuild.generation})
            return self._report(
                rebuild.generation, False, counts, 0, started, False, continuation=state
            )
        except BaseException:
            self._abandon(rebuild)
            raise
        logger.info("reindex switched", extra={"generation": rebuild.generation})
        self._deadline = None  # the new generation is live: the catch-up must finish
        catch_up = ReindexCounts()
        catch_up_report = _Reporter(catch_up, 0, None, self._lock)
        self._scan_all(rebuild.target, catch_up_report, since_us, self._fresh(segments), segments)
        rebuild.retire()
        counts.failed += catch_up.failed
        result = self._report(rebuild.generation, True, counts, catch_up.indexed, started, False)
        logger.info("reindex finished", extra={"reindex": result.summary()})
        return result

    @staticmethod
    def _fresh(segments: int) -> dict[int, str | None]:
        return dict.fromkeys(range(segments))

    @staticmethod
    def _abandon(rebuild: Rebuild) -> None:
        logger.warning("reindex abandoned", extra={"generation": rebuild.generation})
        try:
            rebuild.abandon()
        except Exception as exc:  # the copy's error is the one to raise
            logger.warning(
                "abandoned generation not deleted",
                extra={"generation": rebuild.generation, "error": type(exc).__name__},
            )

    def _report(
        self,
        generation: str | None,
        switched: bool,
        counts: ReindexCounts,
        caught_up: int,
        started: float,
        dry_run: bool,
        continuation: ReindexState | None = None,
    ) -> ReindexReport:
        return ReindexReport(
            generation=generation,
            switched=switched,
            scanned=counts.scanned,
            indexable=counts.indexable,
            indexed=counts.indexed,
            failed=counts.failed,
            caught_up=caught_up,
            seconds=max(0.0, self._clock() - started),
            dry_run=dry_run,
            continuation=continuation,
        )

    def _scan_all(
        self,
        target: VectorIndex | None,
        report: _Reporter,
        since_us: int | None,
        pending: dict[int, str | None],
        segments: int | None = None,
    ) -> None:
        """Each pending segment of `segments` in its own thread, from its cursor; `pending`
        keeps each one's next cursor and loses it once done. The first failure is raised
        once all stop."""
        total = segments or self._segments
        indexer = (
            Indexer(self._store.records, self._store.sessions, target, self._embedder)
            if target is not None
            else None
        )
        with ThreadPoolExecutor(max_workers=max(1, len(pending))) as pool:
            futures = [
                pool.submit(self._scan_segment, segment, total, indexer, report, since_us, pending)
                for segment in sorted(pending)
            ]
            for future in futures:
                future.result()

    def _scan_segment(
        self,
        segment: int,
        segments: int,
        indexer: Indexer | None,
        report: _Reporter,
        since_us: int | None,
        pending: dict[int, str | None],
    ) -> None:
        cursor = pending[segment]
        while True:
            if self._deadline is not None and self._deadline.passed():
                raise OutOfTime("the rebuild ran out of time before its switch")
            changes, scanned, cursor, unreadable = self._table.indexable_page(
                segment, segments, cursor, since_us=since_us, limit=self._page_size
            )
            indexed, failed = 0, unreadable
            if indexer is not None and changes:
                outcome = indexer.index_changes(changes)
                indexed, failed = outcome.indexed, failed + len(outcome.failures)
            report.add(scanned, len(changes) + unreadable, indexed, failed)
            with self._lock:
                if cursor is None:
                    del pending[segment]
                    return
                pending[segment] = cursor


class _Reporter:
    """Adds each page to the totals and tells `progress` (under one lock: pages of every
    segment arrive from their own threads)."""

    def __init__(
        self,
        counts: ReindexCounts,
        total: int,
        progress: Progress | None,
        lock: threading.Lock,
    ) -> None:
        self._counts = counts
        self._total = total
        self._progress = progress
        self._lock = lock

    def add(self, scanned: int, indexable: int, indexed: int, failed: int) -> None:
        with self._lock:
            self._counts.scanned += scanned
            self._counts.indexable += indexable
            self._counts.indexed += indexed
            self._counts.failed += failed
            if self._progress is not None:
                self._progress(self._counts, self._total)
