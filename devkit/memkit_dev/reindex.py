"""`memkit reindex`: the index rebuild (memkit.jobs.reindex) from a terminal, with a
progress line."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

from memkit.errors import MemkitError
from memkit.jobs.reindex import ReindexCounts, Reindexer, ReindexReport
from memkit.observability import logger, metrics

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


def run_quietly(
    rebuild: Reindexer, stream: TextIO, *, dry_run: bool = False, show_after: float = 0.0
) -> ReindexReport:
    """Run `rebuild` with a progress line on `stream` once it has taken `show_after` seconds,
    its batches' logs and metrics kept out of the way (nothing publishes metrics outside
    Lambda). Raises what the rebuild raises, with the line finished."""
    started = time.monotonic()
    line = ProgressLine(stream)

    def progress(counts: ReindexCounts, total: int) -> None:
        metrics.clear_metrics()
        if time.monotonic() - started >= show_after:
            line(counts, total)

    previous = logger.log_level
    logger.setLevel("WARNING")  # the progress line speaks; batches' logs would drown it
    try:
        return rebuild.run(dry_run=dry_run, progress=progress)
    finally:
        line.finish()
        logger.setLevel(previous)
        metrics.clear_metrics()


class NoLocalStack(Exception):
    """`--local` found no local stack to rebuild, or one whose index is in its process."""


def local_options(url: str) -> dict[str, Any]:
    """The settings of the local stack at `url` (its GET /v1/health says where its table,
    DynamoDB and vector index are)."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/v1/health", timeout=10) as response:  # noqa: S310
            health = json.loads(response.read())
    except (OSError, ValueError) as exc:
        raise NoLocalStack(f"no local stack answers at {url} ({exc})") from exc
    found = (health.get("local") or {}).get("endpoints") if isinstance(health, dict) else None
    if not isinstance(found, dict):
        raise NoLocalStack(f"{url} is not a local stack (its health names no endpoints)")
    if found.get("vectors"):  # VectorStore dynamodb: the vector table, through its stand-in
        return {
            "table_name": found.get("table"),
            "region": found.get("region"),
            "dynamodb_endpoint": found.get("dynamodb"),
            "vector_table": found.get("vector_table"),
            "vector_endpoint": found.get("vectors"),
            "embedder": "local",
        }
    if not found.get("opensearch"):
        raise NoLocalStack("its vector index lives in its own process: restart it instead")
    return {
        "table_name": found.get("table"),
        "region": found.get("region"),
        "dynamodb_endpoint": found.get("dynamodb"),
        "opensearch_endpoint": found.get("opensearch"),
        "opensearch_flavour": "domain",
        "opensearch_auth": "none",
        "embedder": "local",
    }


def _on_this_machine(endpoint: str | None) -> bool:
    from urllib.parse import urlparse

    return (urlparse(endpoint or "").hostname or "") in ("localhost", "127.0.0.1", "::1")


def reindex_command(args: Any) -> int:
    """`memkit reindex`: settings from MEMKIT_* variables, overridden by the options (and,
    with `--local`, by what the running local stack says); a progress line on stderr, the
    summary (JSON) on stdout. Exit 1 when items failed."""
    import json
    import os
    import sys

    from memkit.config import ReindexSettings
    from memkit.handlers.wiring import reindexer
    from memkit_dev.options import settings_from

    local: dict[str, Any] = {}
    if getattr(args, "local", None) is not None:
        url = args.local or os.environ.get("MEMKIT_URL") or "http://127.0.0.1:8000"
        try:
            local = local_options(url)
        except NoLocalStack as exc:
            sys.stderr.write(f"memkit reindex: {exc}\n")
            return 2
    options = {
        "table_name": args.table,
        "region": args.region,
        "dynamodb_endpoint": args.dynamodb_endpoint,
        "opensearch_endpoint": args.opensearch_endpoint,
        "opensearch_flavour": args.opensearch_flavour,
        "opensearch_index": args.index,
        "opensearch_auth": args.opensearch_auth,
        "vector_table": args.vector_table,
        "embedder": args.embedder,
        "embedding_model": args.embedding_model,
        "embedding_dimensions": args.embedding_dimensions,
        "reindex_segments": args.segments,
        "reindex_page_size": args.page_size,
    }
    # An option wins over what the local stack says, which wins over its MEMKIT_* variable.
    options = {**local, **{k: v for k, v in options.items() if v is not None}}
    settings = settings_from(ReindexSettings.from_env, options, "memkit reindex")
    if settings is None:
        return 2
    if _on_this_machine(settings.dynamodb_endpoint):
        # A DynamoDB on this machine takes any credentials, but botocore wants some.
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, "testing")
    if settings.opensearch_endpoint is None and settings.vector_table is None and not args.dry_run:
        sys.stderr.write(
            "memkit reindex: set --opensearch-endpoint (or MEMKIT_OPENSEARCH_ENDPOINT), or "
            "--vector-table (MEMKIT_VECTOR_TABLE): the in-process index lives in the process "
            "that serves it\n"
        )
        return 2
    try:
        report = run_quietly(reindexer(settings), sys.stderr, dry_run=args.dry_run)
    except MemkitError as exc:  # the table or the index refused or is unreachable
        sys.stderr.write(f"memkit reindex: {exc}\n")
        return 1
    sys.stdout.write(json.dumps(report.summary()) + "\n")
    return 1 if report.failed else 0
