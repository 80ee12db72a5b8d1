"""Current truth (docs/long-term-memory.md "Current truth", docs/design-long-term.md): which
records a read sees in time, and what superseding, retiring and restoring do to a record.

A record has two times. Valid time: the fact held from `valid_from` until `valid_until`
(None: open). System time: memkit learned it at `recorded_at` and stopped holding it as
current at `retired_at` (None: current). A record written before these existed reads as valid
and recorded since its creation, never retired: its index doc lacks the fields, and every
condition here treats a missing `valid_from` or `recorded_at` as its `created_at`, a missing
`valid_until`, `retired_at` or `held_until` as open. Messages in the index are docs without
them too: a read in time sees a message from when it was said.

Three questions, each one set of index conditions (so one index query, as before):

- current (the default): not retired, and valid now or later (a fact that starts later, a
  planned move, is shown; one whose validity ended is not);
- `as_of=A`: what memkit now holds was valid at A (superseded records included: they were);
- `known_at=K`: what a default read at K would have answered (recorded by K, not retired by
  K, its validity as memkit held it then: a validity that a later supersession shortened was
  `held_until`, open unless it was given); with `as_of=A` too: what memkit held at K about A.

An edit changes a record in place (its history keeps the version before): a search as of an
earlier `known_at` matches its newest text. To keep what was believed searchable as it was,
supersede instead of editing.
"""

from __future__ import annotations

from dataclasses import replace

from memkit.models.domain import StoredRecord, Writer
from memkit.times import now_iso
from memkit.vectors.filters import Condition, absent, either
from memkit.vectors.protocol import epoch_seconds


def _since(field: str, at: float) -> Condition:
    """`field` (or, where a doc lacks it, `created_at`) is at or before `at`."""
    return either(
        [Condition(field, "lte", at)], [absent(field), Condition("created_at", "lte", at)]
    )


def _open_after(field: str, at: float) -> Condition:
    """`field` is unset (open) or after `at`."""
    return either([absent(field)], [Condition(field, "gt", at)])


def truth_conditions(
    now: float, *, as_of: float | None, known_at: float | None, current_only: bool
) -> list[Condition]:
    """The index conditions of a read in time (epoch seconds; module docstring)."""
    if known_at is not None:
        about = known_at if as_of is None else as_of
        held_then = either(
            [absent("valid_until")],
            [Condition("valid_until", "gt", about)],
            [Condition("retired_at", "gt", known_at), _open_after("held_until", about)],
        )
        conditions = [_since("recorded_at", known_at), held_then]
        if as_of is None:
            return [*conditions, _open_after("retired_at", known_at)]
        return [*conditions, _since("valid_from", as_of)]
    if as_of is not None:
        return [_since("valid_from", as_of), _open_after("valid_until", as_of)]
    if not current_only:
        return []
    return [absent("retired_at"), _open_after("valid_until", now)]


def is_current(record: StoredRecord, now: float) -> bool:
    """Whether a default read shows `record` (not retired, validity not over)."""
    if record.retired_at is not None:
        return False
    until = epoch_seconds(record.valid_until)
    return until is None or until > now


def _seconds(value: str | None) -> float:
    return float(epoch_seconds(value) or 0.0)


def _closed_at(old: StoredRecord, at: str) -> str:
    """Where superseding at `at` closes `old`'s validity: never before it began (a
    correction that holds from the start leaves it valid for no time), never after it
    ended."""
    closing = max((at, str(old.valid_from)), key=_seconds)
    if old.valid_until is not None and _seconds(old.valid_until) < _seconds(closing):
        return old.valid_until
    return closing


def superseded(old: StoredRecord, by: StoredRecord, now: float, writer: Writer) -> StoredRecord:
    """`old` once `by` supersedes it: its validity closed at `by`'s valid_from, retired now,
    linked to `by`. A record retired already (by hand) keeps its times and gains the link."""
    stamp = now_iso(now)
    common = {
        "superseded_by": by.id,
        "updated_at": stamp,
        "change": "supersede",
        "changed_by": writer.by,
        "changed_via": writer.via,
        "version": old.version,
        "indexing": "pending",
        "written_us": max(int(now * 1_000_000), old.written_us + 1),
    }
    if old.retired_at is not None:
        return replace(old, **common)  # type: ignore[arg-type]
    return replace(
        old,
        **common,  # type: ignore[arg-type]
        valid_until=_closed_at(old, str(by.valid_from)),
        held_until=old.valid_until,
        retired_at=stamp,
    )


def retired(
    record: StoredRecord, now: float, writer: Writer, valid_until: str | None = None
) -> StoredRecord:
    """`record` no longer held as current: retired now, its validity closed at
    `valid_until` (default: now; never before it began, never later than it was)."""
    stamp = now_iso(now)
    return replace(
        record,
        retired_at=stamp,
        valid_until=_closed_at(record, valid_until or stamp),
        held_until=record.valid_until,
        updated_at=stamp,
        change="retire",
        changed_by=writer.by,
        changed_via=writer.via,
        indexing="pending",
        written_us=max(int(now * 1_000_000), record.written_us + 1),
    )
