"""Rebuild the vector index from the table (`memkit reindex`, functions/reindex), e.g. after
a change of embedding model or dimensions, without downtime for searches.

1. A new generation of the index is created (memkit.vectors: `<alias>-gen<N>` on
   OpenSearch, a fresh instance in process); the live one keeps answering searches and
   taking the indexer's writes.
2. Copy: a parallel Scan reads every indexable live item (memkit.store.reindex); each page
   goes through the stream indexer's own code as INSERT records (memkit.indexing.Indexer),
   so docs are built, embedded in batches and bulk-written exactly as the indexer does,
   into the new generation only.
3. Switch: one atomic step makes the new generation the one searches and writes use.
4. Catch-up: items written since the rebuild started (less a margin for clock skew) are
   indexed again into the new generation. The copy may have read them before the writes
   that the indexer then sent to the old generation; versions (the item's write time) make
   the replay harmless. Writes after the switch reach the new generation by the stream.
   An item deleted during the copy may have been copied after its removal reached the old
   generation: the orphan sweep (memkit.lifecycle.orphans) removes such vectors.
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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memkit.embeddings.protocol import Embedder
from memkit.errors import MemkitError
from memkit.indexing import Indexer, IndexerStore
from memkit.lifecycle.phases import Deadline
from memkit.observability import logger
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


class ReindexStore(IndexerStore, Protocol):
    """What a rebuild reads (DynamoStore's ReindexTable) besides what the indexer writes."""

    def indexable_page(
        self,
        segment: int,
        segments: int,
        cursor: str | None = None,
        *,
        since_us: int | None = None,
        limit: int = SCAN_PAGE,
    ) -> tuple[list[dict[str, Any]], int, str | None]: ...

    def approximate_item_count(self) -> int: ...


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


def as_inserts(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table items as the stream records the indexer reads (an INSERT of each)."""
    return [
        {"eventName": "INSERT", "dynamodb": {"NewImage": item, "SequenceNumber": str(number)}}
        for number, item in enumerate(items)
    ]


class Reindexer:
    """Rebuilds `index` from `table` with `embedder` (see the module docstring)."""

    def __init__(
        self,
        table: ReindexStore,
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
        self._table = table
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
        indexer = Indexer(self._table, target, self._embedder) if target is not None else None
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
            items, scanned, cursor = self._table.indexable_page(
                segment, segments, cursor, since_us=since_us, limit=self._page_size
            )
            indexed = failed = 0
            if indexer is not None and items:
                outcome = indexer.index_batch(as_inserts(items))
                indexed, failed = outcome.indexed, len(outcome.failures)
            report.add(scanned, len(items), indexed, failed)
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


# --- the command line --------------------------------------------------------------------


BAR_WIDTH = 24


class ProgressLine:
    """One line on a terminal, rewritten in place (\\r): a bar and the items read of the
    table's approximate size, docs indexed, failures, rate and time left. At most every
    `interval` seconds, and a final line by `finish`."""

    def __init__(
        self,
        stream: Any,
        clock: Callable[[], float] = time.monotonic,
        interval: float = 0.2,
    ) -> None:
        self._stream = stream
        self._clock = clock
        self._interval = interval
        self._started = clock()
        self._shown = float("-inf")
        self._counts: ReindexCounts | None = None
        self._total = 0

    def __call__(self, counts: ReindexCounts, total: int) -> None:
        self._counts, self._total = counts, total
        now = self._clock()
        if now - self._shown >= self._interval:
            self._shown = now
            self._render(now)

    def _render(self, now: float) -> None:
        counts, total = self._counts, self._total
        if counts is None:
            return
        elapsed = max(now - self._started, 1e-9)
        rate = counts.scanned / elapsed
        if total > 0:
            done = min(counts.scanned, total)
            left = (total - done) / rate if rate > 0 else 0.0
            filled = round(BAR_WIDTH * done / total)
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            where = f"[{bar}] {done}/~{total} items ({100 * done / total:.0f}%)"
            eta = f", ETA {int(left // 60)}:{int(left % 60):02d}"
        else:
            where, eta = f"{counts.scanned} items", ""
        line = (
            f"reindex: {where}, indexed {counts.indexed}, failed {counts.failed}, "
            f"{rate:.0f} items/s{eta}"
        )
        self._stream.write(f"\r{line}")
        self._stream.flush()

    def finish(self) -> None:
        """The last counts, then a new line (once)."""
        if self._counts is not None:
            self._render(self._clock())
            self._stream.write("\n")
            self._stream.flush()
            self._counts = None


def reindex_command(args: Any) -> int:
    """`memkit reindex`: settings from MEMKIT_* variables, overridden by the options; a
    progress line on stderr, the summary (JSON) on stdout. Exit 1 when items failed."""
    import json
    import os
    import sys

    from memkit.config import ENV_PREFIX, ReindexSettings
    from memkit.embeddings.factory import embedder_for
    from memkit.observability import metrics
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.factory import vector_index_for

    overrides = {
        "table_name": args.table,
        "region": args.region,
        "dynamodb_endpoint": args.dynamodb_endpoint,
        "opensearch_endpoint": args.opensearch_endpoint,
        "opensearch_flavour": args.opensearch_flavour,
        "opensearch_index": args.index,
        "opensearch_auth": args.opensearch_auth,
        "embedder": args.embedder,
        "embedding_model": args.embedding_model,
        "embedding_dimensions": args.embedding_dimensions,
        "reindex_segments": args.segments,
        "reindex_page_size": args.page_size,
    }
    # An option wins over its MEMKIT_* variable.
    given = {f"{ENV_PREFIX}{k.upper()}": str(v) for k, v in overrides.items() if v is not None}
    try:
        settings = ReindexSettings.from_env({**os.environ, **given})
    except ValidationError as exc:
        names = sorted({str(error["loc"][0]) for error in exc.errors() if error["loc"]})
        sys.stderr.write(f"memkit reindex: invalid or missing settings: {', '.join(names)}\n")
        return 2
    if settings.opensearch_endpoint is None and not args.dry_run:
        sys.stderr.write(
            "memkit reindex: set --opensearch-endpoint (or MEMKIT_OPENSEARCH_ENDPOINT): the "
            "in-process index lives in the process that serves it\n"
        )
        return 2
    embedder = embedder_for(settings, settings.region)
    index = rebuildable(vector_index_for(settings, settings.region, embedder.dimensions))
    line = ProgressLine(sys.stderr)

    def progress(counts: ReindexCounts, total: int) -> None:
        metrics.clear_metrics()  # nothing publishes them outside Lambda
        line(counts, total)

    reindexer = Reindexer(
        DynamoStore(settings),
        index,
        embedder,
        segments=settings.reindex_segments,
        page_size=settings.reindex_page_size,
    )
    previous = logger.log_level
    logger.setLevel("WARNING")  # the progress line speaks; batches' logs would drown it
    try:
        report = reindexer.run(dry_run=args.dry_run, progress=progress)
    except MemkitError as exc:  # the table or the index refused or is unreachable
        line.finish()
        sys.stderr.write(f"memkit reindex: {exc}\n")
        return 1
    finally:
        line.finish()
        logger.setLevel(previous)
    sys.stdout.write(json.dumps(report.summary()) + "\n")
    return 1 if report.failed else 0


def rebuildable(index: VectorIndex) -> RebuildableIndex:
    """`index` as the rebuildable index it is (memkit's own indexes all are)."""
    from memkit.vectors.local import LocalVectorIndex
    from memkit.vectors.opensearch import OpenSearchIndex

    if not isinstance(index, OpenSearchIndex | LocalVectorIndex):
        raise TypeError(f"{type(index).__name__} cannot be rebuilt")
    return index


# --- the Lambda entry (functions/reindex) ------------------------------------------------


class ReindexEvent(BaseModel):
    """What `aws lambda invoke --payload` may say; settings fill what it leaves out."""

    model_config = ConfigDict(extra="forbid")

    segments: int | None = Field(default=None, ge=1, le=64)
    page_size: int | None = Field(default=None, ge=1, le=1000)
    dry_run: bool = False
    # The `continuation` a paused invocation returned: go on with that rebuild.
    resume: ReindexState | None = None


def copy_deadline(remaining_ms: int, clock: Callable[[], float] = time.monotonic) -> Deadline:
    """When an invocation's copy must stop: the switch, the catch-up (a second Scan) and
    the report need the rest (a minute, or 40 % of the time left if more)."""
    remaining = max(0.0, remaining_ms / 1000)
    return Deadline.after(max(0.0, remaining - max(60.0, 0.4 * remaining)), clock)


ReindexerFactory = Callable[[ReindexEvent], Reindexer]


def production_reindexer(event: ReindexEvent) -> Reindexer:
    """The rebuild the function's environment describes (MEMKIT_* variables)."""
    from memkit.config import ReindexSettings
    from memkit.embeddings.factory import embedder_for
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.factory import vector_index_for

    settings = ReindexSettings.from_env()
    embedder = embedder_for(settings, settings.region)
    index = rebuildable(vector_index_for(settings, settings.region, embedder.dimensions))
    return Reindexer(
        DynamoStore(settings),
        index,
        embedder,
        segments=event.segments or settings.reindex_segments,
        page_size=event.page_size or settings.reindex_page_size,
    )


def make_lambda_handler(
    reindexer: ReindexerFactory = production_reindexer,
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda handler: one rebuild per invocation, its summary as the result."""
    from memkit.observability import drop_disabled_metrics, metrics

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        request = ReindexEvent.model_validate(event or {})
        deadline = copy_deadline(context.get_remaining_time_in_millis())
        report = reindexer(request).run(
            dry_run=request.dry_run, deadline=deadline, pause=True, resume=request.resume
        )
        metrics.add_metric(name="ReindexedDocs", unit="Count", value=report.indexed)
        metrics.add_metric(name="ReindexFailures", unit="Count", value=report.failed)
        return report.summary()

    return lambda_handler


lambda_handler = make_lambda_handler()
