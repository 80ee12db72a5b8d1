"""What the cleanup run is made of: phases that each do a bounded amount of work.

A run calls each phase in turn with the cursor the phase returned last time (None: start
from the beginning) and a deadline. A phase works until it is done or the deadline is near,
then returns where it stopped; the run saves the cursors, so the next run resumes there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from memkit.times import Deadline


@dataclass
class PhaseOutcome:
    """What a phase did in one run. `done`: it reached the end; `cursor`: what the next run
    starts from (None: the beginning; a phase that is done may keep one, as the orphan sweep
    keeps when its next pass may start). `counts` are what it examined, deleted, found...
    (metric names, values are counts); never content."""

    done: bool
    cursor: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


class Phase(Protocol):
    """One kind of lifecycle work (expiry, forgetting policies, compaction, orphans)."""

    @property
    def name(self) -> str: ...

    def run(self, cursor: str | None, deadline: Deadline) -> PhaseOutcome: ...
