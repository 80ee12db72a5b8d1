"""The cleanup run's rules, with phases and cursors in memory (memkit.jobs.cleanup)."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from memkit.jobs.cleanup import CleanupRun, RunResult, TimeBudget
from memkit.jobs.expiry import ExpiryCursor
from memkit.jobs.phases import Deadline, PhaseOutcome
from memkit.store import keys


class Cursors:
    """Cursors kept in a dict (the table's item in production)."""

    def __init__(self, **saved: str) -> None:
        self.saved: dict[str, str] = dict(saved)
        self.saves: list[tuple[str, str | None]] = []

    def load(self) -> dict[str, str]:
        return dict(self.saved)

    def save(self, phase: str, cursor: str | None) -> None:
        self.saves.append((phase, cursor))
        if cursor is None:
            self.saved.pop(phase, None)
        else:
            self.saved[phase] = cursor


class Steps:
    """A phase with `total` steps of work, each taking one tick of `clock`; its cursor is
    the number of steps done."""

    def __init__(self, name: str, total: int, tick: Callable[[], None] = lambda: None) -> None:
        self.name = name
        self.total = total
        self.tick = tick
        self.started_at: list[str | None] = []

    def run(self, cursor: str | None, deadline: Deadline) -> PhaseOutcome:
        self.started_at.append(cursor)
        step = int(cursor or 0)
        done = 0
        while step < self.total:
            if deadline.passed():
                return PhaseOutcome(False, str(step), {"StepsDone": done})
            self.tick()
            step += 1
            done += 1
        return PhaseOutcome(True, None, {"StepsDone": done})


class Failing:
    name = "failing"

    def run(self, cursor: str | None, deadline: Deadline) -> PhaseOutcome:
        raise ValueError("a message that might quote content: 'my pin is canary-9d2f'")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float = 1.0) -> None:
        self.now += seconds


@pytest.mark.parametrize(
    ("remaining_ms", "usable"),
    [(300_000, 255.0), (60_000, 50.0), (10_000, 0.0), (5_000, 0.0), (0, 0.0)],
)
def test_a_run_stops_the_larger_of_10_s_and_15_percent_before_the_timeout(
    remaining_ms: int, usable: float
) -> None:
    clock = Clock()

    deadline = TimeBudget().deadline(remaining_ms, clock)

    assert deadline.left() == pytest.approx(usable)


def test_a_time_budget_caps_the_run_below_the_timeout() -> None:
    clock = Clock()

    deadline = TimeBudget(budget_seconds=30).deadline(300_000, clock)

    assert deadline.left() == 30


def test_each_phase_resumes_from_its_saved_cursor_and_saves_where_it_ended() -> None:
    # Given two phases, the second resuming at step 3 of 5
    first, second = Steps("first", 2), Steps("second", 5)
    cursors = Cursors(second="3")

    # When a run with time enough runs them
    result = CleanupRun([first, second], cursors).run(remaining_ms=60_000)

    # Then each started from its cursor, and both are saved as done (no cursor)
    assert (first.started_at, second.started_at) == ([None], ["3"])
    assert cursors.saves == [("first", None), ("second", None)]
    assert result.done
    assert result.summary()["phases"]["second"] == {"status": "done", "counts": {"StepsDone": 2}}


def test_a_run_out_of_time_saves_where_it_stopped_and_the_next_run_finishes() -> None:
    # Given a phase of 10 one-second steps and runs with 4 usable seconds
    clock = Clock()
    phase = Steps("work", 10, tick=clock.advance)
    cursors = Cursors()
    budget = TimeBudget(margin_seconds=0, margin_fraction=0, budget_seconds=4)

    def run() -> RunResult:
        return CleanupRun([phase], cursors, budget, clock=clock).run(remaining_ms=300_000)

    # When runs follow one another
    results = [run(), run(), run()]

    # Then each does 4 steps from where the last stopped, and the third finishes
    assert phase.started_at == [None, "4", "8"]
    assert [r.phases[0].counts["StepsDone"] for r in results] == [4, 4, 2]
    assert [r.phases[0].status for r in results] == ["stopped", "stopped", "done"]
    assert cursors.saved == {}


def test_phases_not_reached_before_the_deadline_keep_their_cursors() -> None:
    clock = Clock()
    slow = Steps("slow", 10, tick=clock.advance)
    later = Steps("later", 1)
    cursors = Cursors(later="kept")
    budget = TimeBudget(margin_seconds=0, margin_fraction=0, budget_seconds=3)

    result = CleanupRun([slow, later], cursors, budget, clock=clock).run(remaining_ms=300_000)

    assert later.started_at == []
    assert result.phases[1].status == "not started"
    assert cursors.saved == {"slow": "3", "later": "kept"}
    assert not result.done


def test_a_failing_phase_keeps_its_cursor_and_does_not_stop_the_others(
    debug_log: io.StringIO,
) -> None:
    # Given a failing phase between two that work
    before, after = Steps("before", 1), Steps("after", 1)
    cursors = Cursors(failing="where-it-was")

    # When the run runs them
    result = CleanupRun([before, Failing(), after], cursors).run(remaining_ms=60_000)

    # Then the others ran, the failing one's cursor stays, and the result names it
    assert (before.started_at, after.started_at) == ([None], [None])
    assert cursors.saved == {"failing": "where-it-was"}
    assert result.failed == ["failing"]
    assert result.summary()["phases"]["failing"]["error"] == "ValueError"
    # And the log says which and where, never the exception's message
    logs = debug_log.getvalue()
    assert "cleanup phase failed" in logs
    assert "ValueError" in logs
    assert "canary-9d2f" not in logs


@pytest.mark.parametrize(
    "raw",
    [None, "", "not json", "[]", '{"shard": "x"}', '{"shard": 99}', '{"shard": 1, "after": 5}'],
)
def test_an_unreadable_expiry_cursor_starts_over(raw: str | None) -> None:
    assert ExpiryCursor.decode(raw) == ExpiryCursor(0, None)


def test_an_expiry_cursor_round_trips() -> None:
    cursor = ExpiryCursor(keys.EXPIRY_SHARDS - 1, "0000000060#T#default#S#default#s1")

    assert ExpiryCursor.decode(cursor.encode()) == cursor
