"""Writes that change what is current (memkit.service.truth), and a record's history.

A record that names records it `supersedes`, or that fills a slot (`key`), is written in one
transaction with every record it supersedes (each at the version read, its validity closed
and retired, linked to it) and with the slot's pointer (if it still holds the record it held
when read). Two writers racing on one slot: the second's transaction fails, and it reads
again, finds the first writer's record current and supersedes that one instead, so the slot
ends with exactly one current record (and a chain of superseded ones). An explicit target
already superseded is followed to the current end of its chain.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from memkit.errors import FieldProblem, NotFound, ValidationFailed, VersionConflict
from memkit.models.domain import RecordHistory, StoredRecord, Writer
from memkit.service.truth import is_current, superseded
from memkit.store.records import RecordTable, SlotClaim
from memkit.times import now_iso

# Tries of a write whose records or slot changed under it (each re-reads them).
WRITE_ATTEMPTS = 6
# Hops along a chain of supersessions to its current end.
MAX_CHAIN = 20


class SupersessionConflict(VersionConflict):
    """The records or the slot a write supersedes kept changing under it."""


def check_target(
    record: StoredRecord, record_id: str, target: StoredRecord | None, field: str
) -> StoredRecord:
    """`target` (the record `record_id` names, as read) if `record` may supersede it: not
    itself, the same user's (another's is as absent as one not there), the same namespace's."""
    if record_id == record.id:
        raise ValidationFailed(
            "a memory cannot supersede itself", [FieldProblem(field, "names this memory")]
        )
    if target is None or target.user_id != record.user_id:
        raise NotFound(
            f"no long-term memory {record_id!r}",
            [FieldProblem(field, "names no memory of this user")],
        )
    if target.namespace != record.namespace:
        raise ValidationFailed(
            "a memory supersedes only memories of its namespace",
            [FieldProblem(field, "names a memory of another namespace")],
        )
    return target


class Versions:
    """Writes with supersession, retirement and restoration, over the records table."""

    def __init__(self, records: RecordTable, clock: Callable[[], float] = time.time) -> None:
        self._records = records
        self._clock = clock

    def needs_transaction(self, record: StoredRecord, previous: StoredRecord | None) -> bool:
        """Whether writing `record` supersedes anything: names records (a retired one too:
        an import of history links them), or takes a slot (a current one only)."""
        named = set(record.supersedes) - set(previous.supersedes if previous else ())
        takes_slot = (
            record.key is not None
            and record.retired_at is None
            and (previous is None or previous.key != record.key or previous.retired_at is not None)
        )
        return bool(named) or takes_slot

    def write(
        self,
        tenant: str,
        record: StoredRecord,
        previous: StoredRecord | None,
        writer: Writer,
        *,
        where: str = "supersedes",
        revived: int | None = None,
    ) -> StoredRecord:
        """Write `record` (over `previous`, the stored one as read, or as new: numbered
        after `record.version`) with what it supersedes, in one transaction, trying again on
        a race (module docstring)."""
        for _ in range(WRITE_ATTEMPTS):
            now = self._clock()
            targets, links = self._targets(tenant, record, previous, where)
            claim = None
            if record.key is not None and record.retired_at is None:
                held = self._records.slot_holder(
                    tenant, record.namespace, record.user_id, record.key
                )
                claim = SlotClaim(record.namespace, record.user_id, record.key, held)
                if held is not None and held != record.id and held not in targets:
                    slot_record = self._records.get_records(tenant, [held]).get(held)
                    if (
                        slot_record is not None
                        and slot_record.key == record.key
                        and slot_record.user_id == record.user_id
                        and slot_record.namespace == record.namespace
                        and is_current(slot_record, now)
                    ):
                        targets[held] = slot_record
                        links.append(held)
            written = replace(record, supersedes=tuple(dict.fromkeys(links)))
            writes: list[tuple[StoredRecord | None, StoredRecord]] = [(previous, written)]
            writes += [(old, superseded(old, written, now, writer)) for old in targets.values()]
            try:
                return self._records.commit(tenant, writes, claim, revived)[0]
            except VersionConflict:
                if previous is not None:
                    fresh = self._records.get_records(tenant, [previous.id]).get(previous.id)
                    if fresh is None:
                        raise NotFound(f"no long-term memory {record.id!r}") from None
                    if fresh.version != previous.version:
                        raise  # the record itself changed: the caller's edit is stale
        raise SupersessionConflict(
            "the records this write supersedes kept changing; retry",
            [FieldProblem(where, "changed by other writes while this one was made")],
        )

    def _targets(
        self, tenant: str, record: StoredRecord, previous: StoredRecord | None, where: str
    ) -> tuple[dict[str, StoredRecord], list[str]]:
        """The records `record` supersedes now, and the links it keeps: a link it had
        before stays; a newly named record is superseded, or the current end of its chain
        when another record superseded it since (one that already names `record` as its
        successor is only linked). A record of another user or namespace, or one that is
        not there, is refused (as absent as a read finds it)."""
        before = set(previous.supersedes) if previous is not None else set()
        named = [i for i in record.supersedes if i not in before]
        links = [i for i in record.supersedes if i in before]
        found = self._records.get_records(tenant, named) if named else {}
        targets: dict[str, StoredRecord] = {}
        for position, record_id in enumerate(record.supersedes):
            if record_id in before:
                continue
            target = check_target(record, record_id, found.get(record_id), f"{where}.{position}")
            if target.superseded_by == record.id:
                links.append(target.id)
                continue
            end = self._chain_end(tenant, target, record.id)
            if end is not None:
                targets[end.id] = end
                links.append(end.id)
        return targets, links

    def _chain_end(
        self, tenant: str, target: StoredRecord, superseding: str
    ) -> StoredRecord | None:
        """`target`, or the record at the end of its chain of supersessions (None: the chain
        leads to the superseding record itself, or to a record that is gone)."""
        for _ in range(MAX_CHAIN):
            successor = target.superseded_by
            if successor is None:
                return target
            if successor == superseding:
                return None
            found = self._records.get_records(tenant, [successor]).get(successor)
            if found is None:
                return target  # its successor is gone: link it again
            target = found
        return target

    def restore(
        self, tenant: str, history: RecordHistory, number: int, writer: Writer
    ) -> StoredRecord:
        """Version `number` of the record made current again, as a new version: a deleted
        record comes back (its tombstone goes); a restored record that fills a slot takes it
        back, and one restored from before a supersession supersedes the record that
        superseded it."""
        chosen = next(
            (v.record for v in history.versions if v.number == number and v.record is not None),
            None,
        )
        if chosen is None:
            raise NotFound(
                f"memory {history.record_id!r} has no version {number} to restore",
                [FieldProblem("version", "names no kept version (a delete keeps no text)")],
            )
        current = history.current
        now = self._clock()
        restored = replace(
            chosen,
            # over the current item at its version; after a delete, numbered after it
            version=current.version if current is not None else history.versions[-1].number,
            updated_at=now_iso(now),
            written_us=max(int(now * 1_000_000), chosen.written_us + 1),
            change="restore",
            changed_by=writer.by,
            changed_via=writer.via,
            indexing="pending",
        )
        successor = current.superseded_by if current is not None else None
        if restored.retired_at is None and successor not in (None, *restored.supersedes):
            restored = replace(restored, supersedes=(*restored.supersedes, str(successor)))
        if current is None or self.needs_transaction(restored, current):
            revived = chosen.life if current is None else None
            return self.write(tenant, restored, current, writer, where="version", revived=revived)
        return self._records.replace_record(tenant, restored, current)
