"""Forgetting: which long-term records a policy lets go, and the service that lists a
namespace's records (the lifecycle index, never a Scan), decides and deletes them.

The rules (AMS's select_ids_for_forgetting, with memkit's stricter combination):
- pinned records, and the request's `pinned_ids`, are never forgotten and never counted;
- with `memory_type_allowlist`, records of other types are never forgotten nor counted;
- `max_age_days`: created more than N days ago; `max_inactive_days`: last accessed (or,
  never accessed, created) more than N days ago; with both, a record must be old AND
  inactive (AMS also forgets a record 12 times older than max_age_days however recently
  it was read; memkit never forgets a record in use);
- `budget`: of the records the other rules keep, the N with the best recency score (AMS's:
  0.6 x freshness, created with a 30-day half-life + 0.4 x novelty, accessed with a 7-day
  half-life) stay and the rest go.
Deleting a record deletes its vectors too (the stream's REMOVE reaches the indexer). A record
pinned, edited or accessed after it was listed is not deleted (nor reported): each delete is
conditional on the record as listed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby, islice
from typing import Protocol

from memkit.models.domain import Owner, StoredRecord
from memkit.models.lifecycle import ForgetPolicy, ForgetResult, Listing, RecordEntry, Unchanged
from memkit.observability import logger, metrics
from memkit.store.protocol import user_records_start
from memkit.store.records import RecordTable

DAY = 86_400.0
FRESHNESS_WEIGHT, NOVELTY_WEIGHT = 0.6, 0.4
CREATED_HALF_LIFE_DAYS, ACCESS_HALF_LIFE_DAYS = 30.0, 7.0
# Records read back and deleted at a time (one BatchGetItem, then a DeleteItem each).
DELETE_BATCH = 100


class RecordListing(Protocol):
    """A namespace's records in listing order (RecordTable.list_records)."""

    def list_records(self, listing: Listing, after: str | None = None) -> Iterable[RecordEntry]: ...


@dataclass(frozen=True)
class Rules:
    """A ForgetPolicy as plain values."""

    max_age_days: float | None = None
    max_inactive_days: float | None = None
    budget: int | None = None
    allowlist: frozenset[str] | None = None

    @classmethod
    def of(cls, policy: ForgetPolicy) -> Rules:
        allowlist = policy.memory_type_allowlist
        return cls(
            max_age_days=policy.max_age_days,
            max_inactive_days=policy.max_inactive_days,
            budget=policy.budget,
            allowlist=None if allowlist is None else frozenset(t.value for t in allowlist),
        )


def epoch(value: str) -> float:
    """An ISO 8601 time (memkit's, with `Z`) as epoch seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def recency_score(entry: RecordEntry, now: float) -> float:
    """AMS's recency score with no relevance: fresh (recently created) and novel (recently
    accessed) records score high."""
    created = epoch(entry.created_at)
    accessed = epoch(entry.last_accessed)
    freshness = 0.5 ** (max(0.0, now - created) / (CREATED_HALF_LIFE_DAYS * DAY))
    novelty = 0.5 ** (max(0.0, now - accessed) / (ACCESS_HALF_LIFE_DAYS * DAY))
    return float(FRESHNESS_WEIGHT * freshness + NOVELTY_WEIGHT * novelty)


def _expired(entry: RecordEntry, rules: Rules, now: float) -> bool:
    """Whether the age and inactivity rules let the record go (both must, when both given)."""
    checks: list[bool] = []
    if rules.max_age_days is not None:
        checks.append(now - epoch(entry.created_at) > rules.max_age_days * DAY)
    if rules.max_inactive_days is not None:
        checks.append(now - epoch(entry.last_accessed) > rules.max_inactive_days * DAY)
    return bool(checks) and all(checks)


def to_forget(
    entries: Sequence[RecordEntry],
    rules: Rules,
    now: float,
    pinned_ids: frozenset[str] = frozenset(),
    use_budget: bool = True,
) -> list[str]:
    """The ids of `entries` the rules forget, in listing order. Without `use_budget`,
    only age and inactivity apply (the lifecycle ranks no user it has not seen whole)."""
    forget: set[str] = set()
    ranked: list[RecordEntry] = []
    for entry in entries:
        if entry.pinned or entry.id in pinned_ids:
            continue
        if rules.allowlist is not None and entry.memory_type not in rules.allowlist:
            continue
        if _expired(entry, rules, now):
            forget.add(entry.id)
        else:
            ranked.append(entry)
    if use_budget and rules.budget is not None and len(ranked) > rules.budget:
        # Best first; a tie goes to the newer record, then to the id (a stable answer).
        ranked.sort(key=lambda e: (-recency_score(e, now), -epoch(e.created_at), e.id))
        forget.update(e.id for e in ranked[rules.budget :])
    return [e.id for e in entries if e.id in forget]


# -- windows: bounded reads of a listing that end between users ------------------------------


@dataclass(frozen=True)
class Window:
    """Records read from a listing. `next_after` is where the next window starts (None: the
    listing is done); `partial` are the users only some of whose records are here (a user
    with more records than a window holds is cut)."""

    entries: list[RecordEntry]
    next_after: str | None
    partial: frozenset[str | None]


def _user(entry: RecordEntry) -> str | None:
    return entry.user_id


def read_window(lister: RecordListing, listing: Listing, after: str | None, size: int) -> Window:
    """Up to `size` records from just after `after`, ending where a user's records end: a
    last user that does not fit whole is left to the next window, unless it is the only
    one (then it is cut at `size`)."""
    read = list(islice(lister.list_records(listing, after), size + 1))
    partial: set[str | None] = set()
    # Resumed inside a user's records (past their start): the window holds only the rest.
    if read and after is not None and after > user_records_start(read[0].user_id):
        partial.add(read[0].user_id)
    if len(read) <= size:
        return Window(read, None, frozenset(partial))
    extra, window = read[-1], read[:-1]
    last = window[-1].user_id
    if extra.user_id != last:
        return Window(window, user_records_start(extra.user_id), frozenset(partial))
    kept = [e for e in window if e.user_id != last]
    if kept:
        return Window(kept, user_records_start(last), frozenset(partial))
    partial.add(last)
    return Window(window, window[-1].position, frozenset(partial))


# -- the service -----------------------------------------------------------------------------


class Forgetting:
    """Forgetting over the table: list, decide (to_forget), delete unless a dry run."""

    def __init__(self, records: RecordTable, clock: Callable[[], float] = time.time) -> None:
        self._records = records
        self._clock = clock

    def forget(
        self,
        owner: Owner,
        policy: ForgetPolicy,
        pinned_ids: Sequence[str] = (),
        session_id: str | None = None,
        limit: int = 1000,
        dry_run: bool = True,
    ) -> ForgetResult:
        """AMS's forget: the first `limit` records in scope (the namespace; with
        `owner.user_id` that user's; with `session_id` that session's), the policy applied
        across all of them (the budget too)."""
        rules = Rules.of(policy)
        listing = Listing(
            tenant=owner.tenant,
            namespace=owner.namespace,
            user_id=owner.user_id,
            one_user=owner.user_id is not None,
            session_id=session_id,
            memory_types=rules.allowlist,
        )
        entries = list(islice(self._records.list_records(listing), limit))
        doomed = to_forget(entries, rules, self._clock(), frozenset(pinned_ids))
        return self._apply(owner.tenant, entries, doomed, dry_run)

    def forget_window(
        self, tenant: str, namespace: str, policy: ForgetPolicy, after: str | None, size: int
    ) -> tuple[ForgetResult, str | None]:
        """A scheduled policy's forgetting of one window of the namespace (never a dry run):
        the budget counts each user's records, and only of users seen whole. Where the next
        window starts (None: the namespace is done)."""
        rules = Rules.of(policy)
        listing = Listing(tenant=tenant, namespace=namespace, memory_types=rules.allowlist)
        window = read_window(self._records, listing, after, size)
        now = self._clock()
        doomed: list[str] = []
        for user, group in groupby(window.entries, key=_user):
            whole = user not in window.partial
            doomed += to_forget(list(group), rules, now, use_budget=whole)
        return self._apply(tenant, window.entries, doomed, False), window.next_after

    def _apply(
        self, tenant: str, entries: Sequence[RecordEntry], doomed: list[str], dry_run: bool
    ) -> ForgetResult:
        deleted = doomed
        if not dry_run:
            listed = {entry.id: entry for entry in entries}
            deleted = []
            for start in range(0, len(doomed), DELETE_BATCH):
                batch = doomed[start : start + DELETE_BATCH]
                deleted += self._delete(tenant, [listed[record_id] for record_id in batch])
            metrics.add_metric(name="LongTermRecordsForgotten", unit="Count", value=len(deleted))
        logger.info(
            "forgetting",
            extra={"scanned": len(entries), "forgotten": len(deleted), "dry_run": dry_run},
        )
        return ForgetResult(
            scanned=len(entries), deleted=len(deleted), deleted_ids=deleted, dry_run=dry_run
        )

    def _delete(self, tenant: str, entries: Sequence[RecordEntry]) -> list[str]:
        """Delete the listed records that are still as listed: their versions read back
        right before (the listing has none), and each delete conditional on that version,
        on the listed hash and type, on no access since the listing, and on not being
        pinned. A record pinned, edited or accessed meanwhile stays. The ids deleted."""
        current = self._records.get_records(tenant, [entry.id for entry in entries])
        expected = {
            entry.id: unchanged_since(entry, current[entry.id])
            for entry in entries
            if entry.id in current
        }
        return self._records.delete_records_if_unchanged(tenant, expected) if expected else []


def unchanged_since(entry: RecordEntry, record: StoredRecord) -> Unchanged:
    """What `record` (read after `entry` was listed) must still hold to be deleted: its
    version, and the listing's hash, type and last access (the decision's inputs)."""
    return Unchanged(
        version=record.version,
        memory_hash=entry.memory_hash,
        memory_type=entry.memory_type,
        last_accessed=entry.last_accessed,
    )
