"""The cleanup run: every lifecycle phase in turn, inside the time Lambda gives the run.

A run derives one deadline from the invocation's remaining time (a margin before the
timeout, so it always stops cleanly and saves its cursors), then runs each phase
(memkit.jobs.phases) from the cursor it saved last time. A phase starts no work after that
deadline; a request to the vector index it started before may take until `margin_seconds`
before the timeout (memkit.times.within), no longer: a Serverless collection waking from
zero (10 to 30 s a component, search and indexing each) fits in the larger margin, and one
that does not answer in time leaves the run the time to save and report. After each phase
it saves the phase's new cursor (none once the phase reached its end, unless it keeps one to
say when to start again), so a run stopped by its deadline resumes where it stopped.

A phase that raises does not stop the others: the run logs it (the exception's type and
where, never its message: it could quote content), counts it, keeps the phase's saved
cursor (the next run retries from there) and reports the run as failed. The Lambda handler
raises at the end of such a run (memkit.handlers.cleanup), so the Errors alarm and the
dead-letter queue see it.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from memkit.errors import VersionConflict
from memkit.jobs.phases import Phase
from memkit.observability import logger, metrics
from memkit.store.expiry import ExpiryTable
from memkit.times import Deadline, invocation_deadline, within

Status = Literal["done", "stopped", "failed", "not started"]

PHASES_FAILED = "CleanupPhasesFailed"
PHASES_UNFINISHED = "CleanupPhasesUnfinished"
# Concurrent runs saving at once (a retried invocation overlapping the next one).
SAVE_ATTEMPTS = 5


class CursorStore(Protocol):
    """Where each phase's cursor is kept between runs."""

    def load(self) -> dict[str, str]: ...

    def save(self, phase: str, cursor: str | None) -> None: ...


class TableCursors:
    """Cursors in the table's system item (memkit.store.expiry). A save re-reads the item and
    changes only its own phase's entry, conditionally on the version read, so two runs that
    overlap never undo each other's progress."""

    def __init__(self, table: ExpiryTable, attempts: int = SAVE_ATTEMPTS) -> None:
        self._table = table
        self._attempts = attempts

    def load(self) -> dict[str, str]:
        return dict(self._table.cleanup_cursors().cursors)

    def save(self, phase: str, cursor: str | None) -> None:
        for _ in range(self._attempts):
            saved = self._table.cleanup_cursors()
            cursors = {k: v for k, v in saved.cursors.items() if k != phase}
            if cursor is not None:
                cursors[phase] = cursor
            if cursors == saved.cursors:
                return
            try:
                self._table.save_cleanup_cursors(cursors, saved.version)
                return
            except VersionConflict:
                continue
        raise VersionConflict("the cleanup cursors kept changing; the next run saves again")


@dataclass(frozen=True)
class TimeBudget:
    """How much of the invocation's remaining time a run may use: all but a margin (the
    larger of `margin_seconds` and `margin_fraction` of it), at most `budget_seconds`."""

    margin_seconds: float = 10.0
    margin_fraction: float = 0.15
    budget_seconds: float | None = None

    def deadline(self, remaining_ms: int, clock: Callable[[], float] = time.monotonic) -> Deadline:
        """When the run stops starting work."""
        remaining = max(0.0, remaining_ms / 1000)
        usable = remaining - max(self.margin_seconds, remaining * self.margin_fraction)
        if self.budget_seconds is not None:
            usable = min(usable, self.budget_seconds)
        return Deadline.after(max(0.0, usable), clock)

    def requests_deadline(
        self, remaining_ms: int, clock: Callable[[], float] = time.monotonic
    ) -> Deadline:
        """When the requests of work started before `deadline` must end: `margin_seconds`
        before the timeout, the time to save the cursors and report."""
        return invocation_deadline(remaining_ms, self.margin_seconds, clock)


@dataclass(frozen=True)
class PhaseReport:
    """What one phase did in a run: `error` is the exception's type when it failed."""

    name: str
    status: Status
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class RunResult:
    phases: list[PhaseReport]

    @property
    def failed(self) -> list[str]:
        return [p.name for p in self.phases if p.status == "failed"]

    @property
    def done(self) -> bool:
        """Every phase reached its end (the next run starts them over)."""
        return all(p.status == "done" for p in self.phases)

    def summary(self) -> dict[str, Any]:
        """Phase -> status and counts; ids and counts only, never content."""
        return {
            "done": self.done,
            "failed": self.failed,
            "phases": {
                p.name: {
                    "status": p.status,
                    "counts": dict(p.counts),
                    **({"error": p.error} if p.error else {}),
                }
                for p in self.phases
            },
        }


def _where(exc: BaseException) -> str:
    """The innermost frame of `exc` (file:line in function), without its message."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown"
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name}"


class CleanupRun:
    """One scheduled run over `phases`, resuming each from its cursor in `cursors`."""

    def __init__(
        self,
        phases: Sequence[Phase],
        cursors: CursorStore,
        budget: TimeBudget | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._phases = list(phases)
        self._cursors = cursors
        self._budget = budget or TimeBudget()
        self._clock = clock

    def run(self, remaining_ms: int) -> RunResult:
        """Run every phase within `remaining_ms` (the invocation's remaining time)."""
        deadline = self._budget.deadline(remaining_ms, self._clock)
        with within(self._budget.requests_deadline(remaining_ms, self._clock)):
            saved = self._cursors.load()
            reports = [
                self._run_phase(phase, saved.get(phase.name), deadline) for phase in self._phases
            ]
        result = RunResult(reports)
        unfinished = sum(1 for p in reports if p.status in ("stopped", "not started"))
        metrics.add_metric(name=PHASES_FAILED, unit="Count", value=len(result.failed))
        metrics.add_metric(name=PHASES_UNFINISHED, unit="Count", value=unfinished)
        logger.info("cleanup run", extra={"cleanup": result.summary()})
        return result

    def _run_phase(self, phase: Phase, cursor: str | None, deadline: Deadline) -> PhaseReport:
        name = phase.name
        if deadline.passed():
            # Not started: its saved cursor stays, the next run starts with it.
            logger.info("cleanup phase not started", extra={"phase": name})
            return PhaseReport(name, "not started")
        try:
            outcome = phase.run(cursor, deadline)
        except Exception as exc:  # one phase's failure must not stop the others
            return self._failed(name, exc)
        for metric, value in outcome.counts.items():
            metrics.add_metric(name=metric, unit="Count", value=value)
        try:
            self._cursors.save(name, outcome.cursor)
        except Exception as exc:  # the work is done; the next run redoes a little of it
            return self._failed(name, exc, outcome.counts)
        status: Status = "done" if outcome.done else "stopped"
        logger.info(
            "cleanup phase", extra={"phase": name, "status": status, "counts": outcome.counts}
        )
        return PhaseReport(name, status, dict(outcome.counts))

    @staticmethod
    def _failed(name: str, exc: Exception, counts: dict[str, int] | None = None) -> PhaseReport:
        error = type(exc).__name__
        logger.error(
            "cleanup phase failed", extra={"phase": name, "error": error, "where": _where(exc)}
        )
        return PhaseReport(name, "failed", dict(counts or {}), error)
