"""Compaction: duplicate long-term records of one user merged into one.

- Exact duplicates (the same content hash: the same text of the same user in the same
  namespace) are merged into the oldest: it takes the union of their topics, entities and
  sources (`extracted_from`), the others are deleted (their vectors follow).
- Near duplicates (within `distance` of each other by vector search among the user's
  records) are merged only when the configured model can judge meaning and says they state
  the same fact (MemoryModel.same_fact: anything unclear is a no). Without such a model they
  are flagged in the answer, never merged: unrelated facts are never merged.
- A pinned record is never deleted: a group with pinned records keeps its oldest pinned one
  (and every other pinned one); two pinned near duplicates are only flagged.
- Concurrent writes win: the union is computed from a fresh read of the keeper and written
  at that version (retried on a conflict), and a duplicate is deleted only if it is still
  unpinned at the version compaction read (else it stays, and is not reported merged).
Messages (memory_type "message") are never compacted. Work is bounded per call: one
window of at most `limit` records of the listing, resumed from a cursor.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memkit.errors import BadRequest, FieldProblem, NotFound, TooLarge, VersionConflict
from memkit.jobs.forget import epoch, read_window
from memkit.llm.protocol import LLMError, MemoryModel
from memkit.models.domain import Owner, StoredRecord
from memkit.models.lifecycle import (
    DEFAULT_NEAR_DISTANCE,
    CompactResult,
    FlaggedPair,
    Listing,
    MergedGroup,
    Unchanged,
)
from memkit.models.memory import MAX_TAGS, SearchMode, SearchRequest
from memkit.observability import logger, metrics
from memkit.service.long_term import LongTermService, check_size
from memkit.store.protocol import user_records_start
from memkit.store.records import RecordTable
from memkit.times import now_iso

COMPACTED_TYPES = frozenset({"semantic", "episodic"})
# Close records a near-duplicate search returns for each record.
NEAR_HITS = 5
# Reads and writes of a keeper before a merge gives up (each lost to a concurrent write).
MERGE_ATTEMPTS = 3


@dataclass(frozen=True)
class CompactOptions:
    limit: int = 200
    dry_run: bool = True
    near_duplicates: bool = True
    distance: float = DEFAULT_NEAR_DISTANCE
    # Questions to the model per call (None: no limit; the scheduled run has its deadline).
    judgements: int | None = None


class _Verdicts:
    """The model's answers within one compaction: None where it cannot judge meaning, its
    question budget is spent, or it failed (after a failure it is not asked again)."""

    def __init__(self, model: Callable[[], MemoryModel], budget: int | None) -> None:
        self._model = model
        self._budget = budget
        self._asked = 0
        self._failed = False

    def same(self, first: str, second: str) -> bool | None:
        if self._failed or (self._budget is not None and self._asked >= self._budget):
            return None
        model = self._model()
        if not model.capabilities.judge:
            return None
        self._asked += 1
        try:
            return model.same_fact(first, second)
        except LLMError as exc:
            logger.warning("compaction could not ask the model", extra={"reason": exc.reason})
            self._failed = True
            return None


def encode_cursor(after: str | None) -> str | None:
    if after is None:
        return None
    raw = json.dumps({"after": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, listing: Listing) -> str | None:
    """The listing position a cursor stands for; 400 for anything not issued for `listing`."""
    if not cursor:
        return None
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        after = raw["after"] if isinstance(raw, dict) else None
    except (binascii.Error, ValueError, UnicodeDecodeError, KeyError) as exc:
        raise BadRequest("invalid cursor", [FieldProblem("cursor", "not a cursor")]) from exc
    mine = isinstance(after, str) and (
        not listing.one_user or after.startswith(user_records_start(listing.user_id))
    )
    if not mine:
        raise BadRequest("invalid cursor", [FieldProblem("cursor", "not a cursor for this scope")])
    return str(after)


def _union(*lists: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for values in lists for v in values))[:MAX_TAGS]


def _as_seen(record: StoredRecord) -> Unchanged:
    """A duplicate is deleted only as compaction read it (its version: the same text and
    tags); an access since does not matter."""
    return Unchanged(record.version, record.memory_hash, record.memory_type, None)


def _age(record: StoredRecord) -> tuple[float, str]:
    return epoch(record.created_at), record.id


def keeper_of(records: Sequence[StoredRecord]) -> tuple[StoredRecord, list[StoredRecord]]:
    """The record a group merges into (the oldest pinned one, else the oldest) and those
    merged into it (never a pinned one)."""
    pinned = [r for r in records if r.pinned]
    keeper = min(pinned or records, key=_age)
    others = sorted((r for r in records if not r.pinned and r.id != keeper.id), key=_age)
    return keeper, others


def one_scope(topics: Iterable[str]) -> Hashable:
    """Every record of a user in a namespace is in one scope: any two may merge."""
    return None


class Compaction:
    """Compaction over the table and long-term memory, with the configured model.
    `scope_of`: the scope a record's topics put it in (a wing's records carry theirs:
    memkit.agentcore.mapping.agentcore_scope); only records of one scope merge."""

    def __init__(
        self,
        records: RecordTable,
        long_term: LongTermService,
        model: Callable[[], MemoryModel],
        clock: Callable[[], float] = time.time,
        scope_of: Callable[[Iterable[str]], Hashable] = one_scope,
    ) -> None:
        self._records = records
        self._long_term = long_term
        self._model = model  # built on first use: most windows have no near duplicate
        self._clock = clock
        self._scope_of = scope_of

    def compact(
        self,
        owner: Owner,
        options: CompactOptions,
        after: str | None = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> tuple[CompactResult, str | None]:
        """Compact one window of the namespace's records (with `owner.user_id`, of that
        user's) from just after `after`; the answer and where the next window starts (None:
        the end). `should_stop` ends the near-duplicate pass early (the scheduled run's
        deadline); the position returned is then where it stopped."""
        listing = Listing(
            tenant=owner.tenant,
            namespace=owner.namespace,
            user_id=owner.user_id,
            one_user=owner.user_id is not None,
            memory_types=COMPACTED_TYPES,
        )
        window = read_window(self._records, listing, after, options.limit)
        records = self._records.get_records(owner.tenant, [e.id for e in window.entries])
        ordered = [(e.position, records[e.id]) for e in window.entries if e.id in records]
        merged: list[MergedGroup] = []
        removed: set[str] = set()
        for group in self._exact_groups([record for _, record in ordered]):
            keeper, others = keeper_of(group)
            gone = self._merge(owner.tenant, keeper, others, options.dry_run, records)
            if gone:
                merged.append(MergedGroup(kept=keeper.id, removed=gone, reason="exact"))
                removed.update(gone)
        flagged: list[FlaggedPair] = []
        next_after = window.next_after
        if options.near_duplicates and ordered:
            searched = self._near(
                owner, options, ordered, records, removed, (merged, flagged), should_stop
            )
            if searched < len(ordered):  # stopped: resume after the last record searched
                next_after = ordered[searched - 1][0] if searched else after
        merges = sum(len(m.removed) for m in merged)
        if not options.dry_run:
            metrics.add_metric(name="LongTermRecordsCompacted", unit="Count", value=merges)
        logger.info(
            "compaction",
            extra={
                "scanned": len(window.entries),
                "merged": merges,
                "flagged": len(flagged),
                "dry_run": options.dry_run,
            },
        )
        result = CompactResult(
            merged=merged,
            flagged=flagged,
            scanned=len(window.entries),
            dry_run=options.dry_run,
            next_cursor=encode_cursor(next_after),
        )
        return result, next_after

    @staticmethod
    def _exact_groups(records: Sequence[StoredRecord]) -> list[list[StoredRecord]]:
        """Records with one user, one hash and (checked, not assumed) one text."""
        groups: dict[tuple[str | None, str, str], list[StoredRecord]] = defaultdict(list)
        for record in records:
            groups[(record.user_id, record.memory_hash, record.text.strip())].append(record)
        return [group for group in groups.values() if len(group) > 1]

    def _near(
        self,
        owner: Owner,
        options: CompactOptions,
        window: Sequence[tuple[str, StoredRecord]],
        records: dict[str, StoredRecord],
        removed: set[str],
        found: tuple[list[MergedGroup], list[FlaggedPair]],
        should_stop: Callable[[], bool],
    ) -> int:
        """Find each record's close records and merge (judged) or flag them; how many of
        the window's records were searched before `should_stop` said to stop."""
        merged, flagged = found
        seen: set[tuple[str, str]] = set()
        verdicts = _Verdicts(self._model, options.judgements)
        for done, (_, record) in enumerate(window):
            if should_stop():
                return done
            if record.id in removed:
                continue
            record = records.get(record.id, record)  # as merged into, if it was
            for hit in self._close_to(owner, record, options.distance):
                pair = (min(record.id, hit.id), max(record.id, hit.id))
                if hit.id in removed or pair in seen:
                    continue
                seen.add(pair)
                other = records.get(hit.id) or self._record(owner.tenant, hit.id)
                if other is None:
                    continue
                records[other.id] = other
                keeper, others = keeper_of([record, other])
                same = verdicts.same(keeper.text, others[0].text) if others else None
                if same is None:  # nobody could judge: flagged for a person to look at
                    flagged.append(FlaggedPair(a=pair[0], b=pair[1], distance=round(hit.dist, 6)))
                    continue
                if not same:
                    continue
                gone = self._merge(owner.tenant, keeper, others, options.dry_run, records)
                if gone:
                    merged.append(MergedGroup(kept=keeper.id, removed=gone, reason="judged"))
                    removed.update(gone)
                if record.id in removed:
                    break
        return len(window)

    def _record(self, tenant: str, record_id: str) -> StoredRecord | None:
        return self._records.get_records(tenant, [record_id]).get(record_id)

    def _close_to(self, owner: Owner, record: StoredRecord, distance: float) -> list[Any]:
        """The user's other records within `distance` of this one (semantic search, not
        counted as an access)."""
        found = self._long_term.search(
            owner.tenant,
            SearchRequest(
                text=record.text,
                search_mode=SearchMode.SEMANTIC,
                namespace={"eq": record.namespace},
                user_id={"eq": record.user_id} if record.user_id else None,
                memory_type={"ne": "message"},
                distance_threshold=distance,
                limit=NEAR_HITS + 1,
            ),
            access=False,
        )
        # A wing's record's near duplicates are in its own scope (an AgentCore record's:
        # its namespace and strategy).
        scope = self._scope_of(record.topics)
        return [
            hit
            for hit in found.memories
            if hit.id != record.id
            and hit.user_id == record.user_id
            and hit.memory_type != "message"
            and self._scope_of(hit.topics) == scope
        ]

    def _merge(
        self,
        tenant: str,
        keeper: StoredRecord,
        others: Sequence[StoredRecord],
        dry_run: bool,
        records: dict[str, StoredRecord],
    ) -> list[str]:
        """Give `keeper` the union of the others' topics, entities and sources, then delete
        those of them still as read (in that order: a failure between leaves duplicates,
        never a loss). The ids merged away: none when the keeper's text changed or it went
        meanwhile (the next run sees the group again). `records` gets the keeper as written."""
        if not others:
            return []
        if dry_run:
            return [r.id for r in others]
        kept = self._merge_into(tenant, keeper, others)
        if kept is None:
            logger.info("compaction skipped a changed record", extra={"record_id": keeper.id})
            return []
        records[kept.id] = kept
        gone = self._records.delete_records_if_unchanged(
            tenant, {r.id: _as_seen(r) for r in others}
        )
        if len(gone) < len(others):
            logger.info(
                "compaction kept changed duplicates", extra={"kept": len(others) - len(gone)}
            )
        return gone

    def _merge_into(
        self, tenant: str, keeper: StoredRecord, others: Sequence[StoredRecord]
    ) -> StoredRecord | None:
        """The keeper with the union written: computed from a fresh read of it and written
        at the version read (a concurrent edit is never overwritten: read again and retry).
        None when its text changed, it went, or the writes kept losing."""
        for _ in range(MERGE_ATTEMPTS):
            fresh = self._record(tenant, keeper.id)
            if (
                fresh is None
                or fresh.text != keeper.text
                or fresh.memory_hash != keeper.memory_hash
            ):
                return None  # gone, or no longer the duplicate it was found to be
            topics = _union(fresh.topics, *(r.topics for r in others))
            entities = _union(fresh.entities, *(r.entities for r in others))
            sources = _union(fresh.extracted_from, *(r.extracted_from for r in others))
            if (topics, entities, sources) == (fresh.topics, fresh.entities, fresh.extracted_from):
                return fresh
            now = self._clock()
            merged = replace(
                fresh,
                topics=topics,
                entities=entities,
                extracted_from=sources,
                updated_at=now_iso(now),
                written_us=max(int(now * 1_000_000), fresh.written_us + 1),
                indexing="pending",
            )
            try:
                check_size(merged, "record")
                return self._records.replace_record(tenant, merged, fresh)
            except (NotFound, TooLarge):
                return None
            except VersionConflict:
                continue
        return None
