"""Sessions on DynamoDB: one partition per session (keys.py, docs/design-sessions.md).

Reads: the newest N messages come from one descending LSI1 Query that starts at the meta
item, then one BatchGetItem fetches the profile, the scratchpad and the pending memories.
Writes: message and memory items go in batches, the meta item last and conditionally on its
version, so a writer that lost a race retries from a fresh read (service/sessions.py).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain, islice
from typing import Any

from pynamodb.exceptions import DoesNotExist
from pynamodb.models import BatchWrite

from memkit.errors import (
    BadRequest,
    FieldProblem,
    Forbidden,
    NotFound,
    StoreUnavailable,
    ValidationFailed,
    VersionConflict,
)
from memkit.ids import new_ulid
from memkit.models.budget import fitting
from memkit.models.domain import (
    DEFAULT_PROFILE,
    JsonObject,
    MessageRef,
    Owner,
    PadRef,
    Profile,
    SessionMeta,
    StoredMessage,
    is_instruction,
)
from memkit.observability import metrics
from memkit.scratchpad import resolution
from memkit.store import keys
from memkit.store.base import PageCursor, Table
from memkit.store.changes import MessageValue as MessageTurn
from memkit.store.cursor import decode_cursor, encode_cursor
from memkit.store.failures import translated
from memkit.store.protocol import PadState, SessionChange, SessionRead, SessionWriteState
from memkit.times import now_iso

# Items per Query page when a read wants everything (a whole log, a whole partition).
PAGE_SIZE = 500
# TransactWriteItems takes 100 actions and 4 MB; the meta item is one of them.
TRANSACTION_ITEMS = 100
TRANSACTION_BYTES = 3_500_000
# Concurrent UpdateItems when a session's items get a new expiry.
REFRESH_WORKERS = 8
# Pauses (the longest of a jittered range) before a session transaction is sent again when
# storage stayed unavailable through the SDK's own retries (the same token: applied once).
RESEND_PAUSES_SECONDS = (0.25, 1.0)
# A rebuilt document holds at most this many messages (AMS's reconstruction reads 1,000), so
# a PUT of it plus new messages (agent-memory-client's append: to the new life they are all
# new) stays within the 1,000 new messages a PUT may add (service/sessions).
MAX_REBUILT_MESSAGES = 500
# How many items of an earlier life of a session (not yet deleted) the look for a turn before
# a message reads past before it gives up on that message's context.
LEFTOVERS_SKIPPED = 100
# Items a Query page reads when looking for the turns before a run of messages (the run's
# length plus one, at most this).
RUN_PAGE = 100


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _loads(raw: str | None) -> Any:
    return None if raw is None else json.loads(raw)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _searchable(item: Any) -> bool:
    """A message item the index holds: stamped for indexing, and not the assistant's
    instructions (a system message is kept, never searchable)."""
    return getattr(item, "idx", None) == "1" and not is_instruction(getattr(item, "role", None))


def to_meta(item: Any) -> SessionMeta:
    created_us = item.gsi1sk.split("#", 1)[0] if item.gsi1sk else "0"
    return SessionMeta(
        session_id=item.session_id,
        namespace=item.namespace,
        # Sessions stored before generations existed are one life: "0".
        gen=item.gen or "0",
        created_at=item.created_at,
        updated_at=item.updated_at,
        created_us=int(created_us),
        user_id=item.user_id,
        profile=item.profile,
        last_accessed=item.last_accessed or item.updated_at,
        expires_at=_int(item.expires_at),
        ttl_seconds=_int(item.ttl_seconds),
        data=_loads(item.data),
        context=item.context,
        tokens=int(item.tokens or 0),
        strategy=_loads(item.strategy),
        title=item.title,
        metadata=_loads(item.metadata),
        message_count=int(item.message_count or 0),
        memory_ids=tuple(item.memory_ids or ()),
        memory_digests=tuple(item.memory_digests or ()),
        view_from=item.view_from,
        children_expire_at=_int(item.children_expire_at),
        index_messages=item.index_messages,
        window_tokens=_int(item.window_tokens),
        version=int(item.version or 0),
    )


def to_message(item: Any) -> StoredMessage:
    return StoredMessage(
        id=item.message_id,
        role=item.role,
        content=item.content,
        created_at=item.message_at,
        order=item.order,
        tokens=int(item.tokens or 0),
        name=item.name,
        tool_call_id=item.tool_call_id,
        tool_calls=_loads(item.tool_calls),
        metadata=_loads(item.metadata),
        persisted_at=item.persisted_at,
        discrete_memory_extracted=item.extracted or "f",
    )


class SessionTable:
    """Session reads and writes. Items never leave this class: callers get domain objects.

    With `index_all_messages` (AMS's INDEX_ALL_MESSAGES_IN_LONG_TERM_MEMORY) an indexed
    message is written without `expires_at`: neither DynamoDB's TTL nor the cleanup run
    removes it, so it stays a long-term message record after its session expired, and a read
    of the expired session rebuilds the document from those records (`_rebuilt`)."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._items = table.items
        self._clock = table.clock

    # -- conversions -------------------------------------------------------------------------

    def new_session_meta(self, owner: Owner, session_id: str, profile: str | None) -> SessionMeta:
        """The meta of a session about to be created now (version 0: not stored yet)."""
        now = self._clock()
        stamp = now_iso(now)
        return SessionMeta(
            session_id=session_id,
            namespace=owner.namespace,
            gen=new_ulid(int(now * 1000)),
            created_at=stamp,
            updated_at=stamp,
            last_accessed=stamp,
            created_us=int(now * 1_000_000),
            user_id=owner.user_id,
            profile=profile,
        )

    def session_item(self, tenant: str, meta: SessionMeta) -> Any:
        pk, sk = keys.session_key(tenant, meta.namespace, meta.session_id)
        listed = keys.session_list_sk(meta.created_us, meta.session_id)
        expiry = keys.expiry_entry(pk, meta.expires_at) if meta.expires_at else (None, None)
        item = self._items.session(
            pk,
            sk,
            tenant=tenant,
            namespace=meta.namespace,
            created_at=meta.created_at,
            updated_at=meta.updated_at,
            expires_at=meta.expires_at,
            order=keys.SESSION_META,
            gen=meta.gen,
            session_id=meta.session_id,
            user_id=meta.user_id,
            profile=meta.profile,
            gsi1pk=keys.sessions_by_namespace(tenant, meta.namespace),
            gsi1sk=listed,
            gsi2pk=(
                keys.sessions_by_user(tenant, meta.namespace, meta.user_id)
                if meta.user_id
                else None
            ),
            gsi2sk=listed if meta.user_id else None,
            gsi3pk=expiry[0],
            gsi3sk=expiry[1],
            data=_dumps(meta.data),
            context=meta.context,
            tokens=meta.tokens,
            ttl_seconds=meta.ttl_seconds,
            strategy=_dumps(meta.strategy),
            title=meta.title,
            metadata=_dumps(meta.metadata),
            last_accessed=meta.last_accessed,
            message_count=meta.message_count,
            memory_ids=list(meta.memory_ids) or None,
            memory_digests=list(meta.memory_digests) or None,
            view_from=meta.view_from,
            children_expire_at=meta.children_expire_at,
            index_messages=meta.index_messages,
            window_tokens=meta.window_tokens,
        )
        if meta.version:  # else unset: the write requires that no item exists
            item.version = meta.version
        return item

    def _message_item(
        self, tenant: str, meta: SessionMeta, message: StoredMessage, expires_at: int | None
    ) -> Any:
        pk, sk = keys.message_key(tenant, meta.namespace, meta.session_id, message.id)
        return self._items.message(
            pk,
            sk,
            tenant=tenant,
            namespace=meta.namespace,
            created_at=message.created_at,
            updated_at=message.created_at,
            expires_at=expires_at,
            order=message.order,
            gen=meta.gen,
            message_id=message.id,
            role=message.role,
            content=message.content,
            message_at=message.created_at,
            tokens=message.tokens,
            name=message.name,
            tool_call_id=message.tool_call_id,
            tool_calls=_dumps(message.tool_calls),
            metadata=_dumps(message.metadata),
            persisted_at=message.persisted_at,
            extracted=message.discrete_memory_extracted,
            idx="1" if self._indexes_messages(meta) else None,
            session_id=meta.session_id,
            user_id=meta.user_id,
            written_us=int(self._clock() * 1_000_000),
        )

    def _indexes_messages(self, meta: SessionMeta) -> bool:
        """Whether this session's messages go to long-term memory: its own setting, else
        the server's (index_all_messages implies it)."""
        if meta.index_messages is not None:
            return meta.index_messages
        return self._table.index_messages or self._table.index_all_messages

    def _message_expiry(self, meta: SessionMeta) -> int | None:
        """The `expires_at` of this session's messages: none when they are kept as long-term
        records (index_all_messages, and the session's messages are indexed)."""
        if self._table.index_all_messages and self._indexes_messages(meta):
            return None
        return meta.children_expire_at

    def _kept(self, item: Any) -> bool:
        """A message kept as a long-term record: indexed, and with no expiry of its own.
        Only a session DELETE (or a user's deletion) removes it."""
        return bool(
            isinstance(item, self._items.message) and item.idx == "1" and item.expires_at is None
        )

    @staticmethod
    def _pending_memory(item: Any) -> JsonObject:
        """A pending memory as the document shows it: `persisted_at` once the indexer
        promoted it to long-term memory."""
        record: JsonObject = json.loads(item.record)
        if item.persisted_at:
            record["persisted_at"] = item.persisted_at
        return record

    def belongs(self, item: Any, meta: SessionMeta) -> bool:
        """An item of this life of the session, not past its own expiry."""
        return bool((item.gen or "0") == meta.gen and self._table.live(item))

    # -- reads -------------------------------------------------------------------------------

    def session_meta(self, owner: Owner, session_id: str) -> SessionMeta | None:
        """The live session's meta (a consistent read), or None."""
        pk, sk = keys.session_key(owner.tenant, owner.namespace, session_id)
        with translated("read session"):
            try:
                item = self._items.session.get(pk, sk, consistent_read=True)
            except DoesNotExist:
                return None
        return to_meta(item) if self._table.live(item) else None

    def read_session(
        self, owner: Owner, session_id: str, limit: int | None, byte_budget: int
    ) -> SessionRead | None:
        """The live session with its newest messages (at most `limit`, within `byte_budget`),
        its pending memories and its scratchpad. When it is absent or expired: with
        index_all_messages, the document rebuilt from its kept messages (`_rebuilt`), else
        None (and None when nothing is left)."""
        pk = keys.session_pk(owner.tenant, owner.namespace, session_id)
        page = PAGE_SIZE if limit is None else limit + 1
        with translated("read session"):
            results = self._items.base.by_order.query(
                pk,
                range_key_condition=self._items.base.order.between(
                    keys.ORDER_PREFIX, keys.SESSION_META
                ),
                scan_index_forward=False,
                consistent_read=True,
                page_size=page,
            )
            head = next(results, None)
            if head is None or head.order != keys.SESSION_META or not self._table.live(head):
                if not self._table.index_all_messages:
                    return None
                # The same Query goes on: the rebuild costs no request of its own.
                past_meta = head is None or head.order == keys.SESSION_META
                rest = results if past_meta else chain([head], results)
                return self._rebuilt(owner, session_id, rest, limit, byte_budget)
            meta = to_meta(head)
            newest_first: list[StoredMessage] = []
            size = 0
            # Stop before asking for a page the read does not need (the iterator is lazy).
            while limit is None or len(newest_first) < limit:
                item = next(results, None)
                if item is None or (meta.view_from is not None and item.order < meta.view_from):
                    break
                if not self.belongs(item, meta):
                    continue
                message = to_message(item)
                size += message.response_bytes
                if size > byte_budget and newest_first:
                    break
                newest_first.append(message)

        ref = PadRef(owner=owner, session_id=session_id)
        stub = self._table.to_session(head)
        name, user_id = resolution.session_choices(ref, stub)
        wanted = self._table.pad_keys(ref, name, user_id)
        memory_keys = [
            keys.memory_key(owner.tenant, owner.namespace, session_id, memory_id)
            for memory_id in meta.memory_ids
        ]
        found = self._table.batch_get([*wanted, *memory_keys])
        try:
            pad: PadState | None = self._table.resolve_pad(ref, head, found, set(wanted))
        except (NotFound, ValidationFailed):
            # A deleted profile, or a user-scoped one on a session without a user: the
            # session is still readable, it just has no scratchpad to show.
            pad = None
        memories = [
            self._pending_memory(found[key])
            for key in memory_keys
            if key in found and self.belongs(found[key], meta)
        ]
        newest_first.reverse()
        return SessionRead(meta=meta, messages=newest_first, memories=memories, pad=pad)

    def _rebuilt(
        self,
        owner: Owner,
        session_id: str,
        newest_first: Iterator[Any],
        limit: int | None,
        byte_budget: int,
    ) -> SessionRead | None:
        """An expired session's document rebuilt from the messages it left as long-term
        records (AMS's reconstruction from long-term memory), or None when it left none.

        `newest_first` is the partition's LSI1 Query past the meta item. The messages are
        those of the life of the newest kept message (a session re-created after it expired
        lives again under a new `gen`; an older life is never mixed in), newest first up to
        `limit` (at most MAX_REBUILT_MESSAGES) and `byte_budget`, shown oldest first.
        Everything else of the session expired with it, and the expired meta item (if
        DynamoDB has not deleted it yet) is not read, so the result does not depend on how
        late TTL deletion runs: no data, context, memories or scratchpad; version 0 (nothing
        is stored until a write, which starts a new life)."""
        gen: str | None = None
        user_id: str | None = None
        messages: list[StoredMessage] = []
        size = 0
        limit = min(limit or MAX_REBUILT_MESSAGES, MAX_REBUILT_MESSAGES)
        while len(messages) < limit:
            item = next(newest_first, None)
            if item is None:
                break
            if not self._kept(item):
                continue
            if gen is None:
                gen, user_id = item.gen or "0", item.user_id
                if owner.refuses(user_id):
                    raise Forbidden("this session belongs to another user")
            elif (item.gen or "0") != gen:
                continue
            message = to_message(item)
            size += message.response_bytes
            if size > byte_budget and messages:
                break
            messages.append(message)
        if gen is None:
            return None
        messages.reverse()
        now = self._clock()
        stamp = now_iso(now)
        first = messages[0]
        meta = SessionMeta(
            session_id=session_id,
            namespace=owner.namespace,
            gen=gen,
            created_at=first.created_at,
            updated_at=stamp,
            last_accessed=stamp,
            created_us=int(first.order[len(keys.ORDER_PREFIX) :].split("#", 1)[0]),
            user_id=user_id,
            message_count=len(messages),
        )
        return SessionRead(meta=meta, messages=messages, memories=[], pad=None, reconstructed=True)

    def write_state(
        self,
        owner: Owner,
        session_id: str,
        message_ids: list[str] | None,
        profile_hint: str | None,
        hint_wins: bool = False,
    ) -> SessionWriteState:
        """What a write needs: the session (and its stored version, expired or not), its
        profile, and its stored messages (those named, or all of them).

        The profile is the session's; `profile_hint` is used when the session names none, or
        always with `hint_wins` (a write that changes the profile). A profile the request
        names that does not exist (here or without a namespace) is a 404; one the session
        named and that was deleted since falls back to `default`
        (memkit.scratchpad.resolution)."""
        tenant, namespace = owner.tenant, owner.namespace
        meta_key = keys.session_key(tenant, namespace, session_id)
        guess = profile_hint or DEFAULT_PROFILE
        wanted = [meta_key, *self._table.profile_keys(tenant, namespace, guess).values()]
        message_keys = {
            message_id: keys.message_key(tenant, namespace, session_id, message_id)
            for message_id in message_ids or []
        }
        found = self._table.batch_get([*wanted, *message_keys.values()])
        meta_item = found.get(meta_key)
        meta = to_meta(meta_item) if self._table.live(meta_item) else None
        disk_version = int(meta_item.version or 0) if meta_item is not None else 0

        named = None if hint_wins and profile_hint else (meta.profile if meta else None)
        name = named or guess
        lenient = named is not None  # the session's own choice: never stranded
        profile_keys = self._table.profile_keys(tenant, namespace, name, lenient).values()
        unread = [key for key in profile_keys if key not in wanted]
        if unread:  # the session names another profile than the request guessed
            found.update(self._table.batch_get(unread))
        profile: Profile = self._table.effective_profile(tenant, namespace, name, found, lenient)

        stored: dict[str, StoredMessage] = {}
        if meta is not None:
            items = (
                self._session_items(tenant, namespace, session_id, keys.MESSAGE_PREFIX)
                if message_ids is None
                else (found[key] for key in message_keys.values() if key in found)
            )
            for item in items:
                if self.belongs(item, meta):
                    stored[item.message_id] = to_message(item)
        return SessionWriteState(meta, disk_version, stored, profile)

    def _session_items(
        self, tenant: str, namespace: str, session_id: str, prefix: str | None = None
    ) -> Iterator[Any]:
        """Every item of the session's partition (or those whose sort key has `prefix`)."""
        pk = keys.session_pk(tenant, namespace, session_id)
        condition = self._items.base.sk.startswith(prefix) if prefix else None
        with translated("read session items"):
            yield from self._items.base.query(
                pk, range_key_condition=condition, consistent_read=True, page_size=PAGE_SIZE
            )

    def log(
        self, owner: Owner, meta: SessionMeta, ascending: bool, page_size: int, start: Any = None
    ) -> Iterator[Any]:
        """The items of this life's message log in created_at order (LSI1), lazily."""
        pk = keys.session_pk(owner.tenant, meta.namespace, meta.session_id)
        results = self._items.base.by_order.query(
            pk,
            range_key_condition=self._items.base.order.startswith(keys.ORDER_PREFIX),
            scan_index_forward=ascending,
            consistent_read=True,
            last_evaluated_key=start,
            page_size=page_size,
        )
        return (item for item in results if self.belongs(item, meta))

    def turns_before(self, messages: Sequence[MessageTurn]) -> dict[MessageRef, str]:
        """For each message, the content of the message just before it in its session's log
        (the same life of the session) when that one is indexed too: what the indexer keeps
        as its context. A turn the index does not hold (written while the session did not
        index messages) is no one's context: its removal would never reach the indexer.

        Backwards Queries of LSI1, one a run of consecutive messages asked: a stream batch's
        appends are one run, read with one item more than it holds; messages far apart in
        the log (a rebuild's Scan page) cost a short Query each, never the gap between."""
        by_session: dict[tuple[str, str, str], dict[str, MessageTurn]] = {}
        for message in messages:
            if message.order:
                ref = message.ref
                session = by_session.setdefault((ref.tenant, ref.namespace, ref.session_id), {})
                session[message.order] = message
        found: dict[MessageRef, str] = {}
        for (tenant, namespace, session_id), wanted in by_session.items():
            pk = keys.session_pk(tenant, namespace, session_id)
            unread = sorted(wanted, reverse=True)
            while unread:
                for order in self._run_before(pk, unread[0], wanted, found, len(unread)):
                    unread.remove(order)
        return found

    def _run_before(
        self,
        pk: str,
        newest: str,
        wanted: dict[str, MessageTurn],
        found: dict[MessageRef, str],
        unread: int,
    ) -> list[str]:
        """One backwards Query from `newest` (a wanted order): the turn before each wanted
        message of the run it starts, into `found`. The wanted orders it read."""
        read: list[str] = []
        pending: list[MessageTurn] = []  # asked, waiting for the next older item of its life
        leftovers = 0
        log = self._items.base.by_order.query(
            pk,
            range_key_condition=self._items.base.order.between(keys.ORDER_PREFIX, newest),
            scan_index_forward=False,
            consistent_read=True,
            page_size=min(unread, RUN_PAGE) + 1,
        )
        with translated("read messages"):
            for item in log:
                waiting = []
                for message in pending:
                    if (item.gen or "0") != (message.gen or "0"):
                        waiting.append(message)  # a leftover of an earlier life: not its turn
                        continue
                    found[message.ref] = item.content if _searchable(item) else ""
                pending = waiting
                if item.order in wanted:
                    pending.append(wanted[item.order])
                    read.append(item.order)
                elif not pending:
                    break  # the run ended: the next wanted message starts its own Query
                else:
                    leftovers += 1
                    if leftovers > LEFTOVERS_SKIPPED:
                        break
        if not read:  # the newest asked is gone from the log: nothing before it to read
            read.append(newest)
        return read

    def touch_turns_after(
        self, changed: Sequence[MessageTurn], skip: Collection[MessageRef] = ()
    ) -> int:
        """For each message removed or edited, mark the indexed message after it in its
        session's log (the same life) as having a new turn before it: a new `ctx_us` and a
        newer `written_us`, so the stream brings it back to the indexer, which reads its
        context again (a removed turn's words must not stay findable through its reply).
        Messages in `skip` (written or removed in the same batch anyway) are left alone, and
        a message written meanwhile is not touched (its own change reaches the indexer).

        One forward Query of LSI1 a run of changed messages with nothing left between them
        (a deleted page of a log has one message after it, not one each). How many were
        touched."""
        by_session: dict[tuple[str, str, str], list[MessageTurn]] = {}
        for message in changed:
            if message.order:
                ref = message.ref
                by_session.setdefault((ref.tenant, ref.namespace, ref.session_id), []).append(
                    message
                )
        touched = 0
        for (tenant, namespace, session_id), messages in by_session.items():
            pk = keys.session_pk(tenant, namespace, session_id)
            unresolved = sorted(messages, key=lambda m: str(m.order))
            while unresolved:
                first = unresolved[0]
                following = self._turn_after(pk, first)
                # every changed message before that one has it as the turn after it
                bound = following.order if following is not None else None
                unresolved = [
                    m
                    for m in unresolved[1:]
                    if (bound is not None and str(m.order) >= bound)
                    or (m.gen or "0") != (first.gen or "0")
                ]
                if following is None:
                    continue
                ref = MessageRef(tenant, namespace, session_id, following.message_id)
                if _searchable(following) and ref not in skip:
                    touched += self._touch(following)
        return touched

    def _turn_after(self, pk: str, message: MessageTurn) -> Any | None:
        """The first message after `message` in the log, of its life (None: the last)."""
        after = self._items.base.by_order.query(
            pk,
            range_key_condition=self._items.base.order > message.order,
            consistent_read=True,
            page_size=4,
        )
        with translated("read messages"):
            for item in islice(after, LEFTOVERS_SKIPPED):
                if not item.order.startswith(keys.ORDER_PREFIX):
                    return None  # past the log (the session's META)
                if (item.gen or "0") == (message.gen or "0"):
                    return item
        return None

    def _touch(self, item: Any) -> int:
        """Set `ctx_us` and a newer `written_us` on a message unless it was written
        meanwhile (then its own change reaches the indexer). 1 if touched."""
        old = int(item.written_us or 0)
        now = max(int(self._clock() * 1_000_000), old + 1)
        values = {":now": {"N": str(now)}}
        if item.written_us is None:
            unwritten = "attribute_not_exists(written_us)"
        else:
            unwritten = "written_us = :old"
            values[":old"] = {"N": str(old)}
        update = {
            "TableName": self._items.base.Meta.table_name,
            "Key": {"PK": {"S": item.pk}, "SK": {"S": item.sk}},
            "UpdateExpression": "SET ctx_us = :now, written_us = :now",
            "ConditionExpression": f"attribute_exists(PK) AND {unwritten}",
            "ExpressionAttributeValues": values,
        }
        try:
            with translated("touch message"):
                self._items.connection.client.update_item(**update)
        except VersionConflict:
            return 0  # deleted or written meanwhile
        return 1

    def _owned_meta_item(self, owner: Owner, session_id: str) -> Any | None:
        """The live session item, after refusing another user's session (403)."""
        meta_key = keys.session_key(owner.tenant, owner.namespace, session_id)
        meta_item = self._table.batch_get([meta_key]).get(meta_key)
        if not self._table.live(meta_item):
            return None
        resolution.session_choices(
            PadRef(owner=owner, session_id=session_id), self._table.to_session(meta_item)
        )
        return meta_item

    def oldest_messages(self, owner: Owner, meta: SessionMeta, count: int) -> list[tuple[str, str]]:
        """(id, order) of the session's `count` oldest messages, oldest first."""
        with translated("read session"):
            log = self.log(owner, meta, ascending=True, page_size=count)
            return [(item.message_id, item.order) for item in islice(log, count)]

    def page_messages(
        self,
        owner: Owner,
        session_id: str,
        limit: int,
        cursor: str | None,
        ascending: bool,
        roles: frozenset[str] | None,
    ) -> tuple[list[StoredMessage], str | None] | None:
        """One page of the session's log (archived messages included), and the cursor of the
        next: at most `limit` messages, fewer when more would outgrow what one response may
        hold (memkit.models.budget; at least one). None if the session is absent."""
        pk = keys.session_pk(owner.tenant, owner.namespace, session_id)
        start = decode_cursor(cursor, pk)
        if start is not None and set(start) != {"PK", "SK", "LSI1SK"}:
            raise BadRequest("invalid cursor", [FieldProblem("cursor", "not a messages cursor")])
        meta_item = self._owned_meta_item(owner, session_id)
        if meta_item is None:
            return None
        meta = to_meta(meta_item)
        with translated("read messages"):
            log = self.log(owner, meta, ascending, page_size=limit + 1, start=start)
            wanted = (item for item in log if not roles or item.role in roles)
            items = list(islice(wanted, limit + 1))
        page = [to_message(item) for item in items[:limit]]
        kept = fitting(message.response_bytes for message in page)
        next_cursor = None
        if len(items) > kept:
            page = page[:kept]
            last = items[kept - 1]
            next_cursor = encode_cursor(
                {"PK": {"S": last.pk}, "SK": {"S": last.sk}, "LSI1SK": {"S": last.order}}
            )
        return page, next_cursor

    def list_sessions(
        self, owner: Owner, user_id: str | None, limit: int, offset: int
    ) -> tuple[list[str], int]:
        """Live session ids, newest first, `offset` and `limit` applied, and the total."""
        session_cls = self._items.session
        if user_id:
            index, hash_key = (
                session_cls.by_user,
                keys.sessions_by_user(owner.tenant, owner.namespace, user_id),
            )
        else:
            index, hash_key = (
                session_cls.by_namespace,
                keys.sessions_by_namespace(owner.tenant, owner.namespace),
            )
        live = session_cls.expires_at.does_not_exist() | (session_cls.expires_at > self._clock())
        ids: list[str] = []
        total = 0
        with translated("list sessions"):
            for item in index.query(
                hash_key, filter_condition=live, scan_index_forward=False, page_size=PAGE_SIZE
            ):
                if offset <= total < offset + limit:
                    ids.append(item.session_id)
                total += 1
        return ids, total

    # -- writes ------------------------------------------------------------------------------

    def commit_session(self, change: SessionChange) -> SessionMeta:
        """Write the change, the meta item conditionally on the version read (else
        VersionConflict, and the caller retries from a fresh read).

        A change that fits one transaction (100 items, 4 MB) is one TransactWriteItems: all
        of it or nothing. A larger one goes in batches with the meta item last; a failure
        part-way leaves writes that the retry (idempotent, keyed by id) completes."""
        owner, meta = change.owner, change.meta
        tenant = owner.tenant
        expires = meta.children_expire_at
        if change.refresh_children:
            self._refresh_children(owner, meta, change)
        kept = self._message_expiry(meta)
        puts = [self._message_item(tenant, meta, m, kept) for m in change.put_messages]
        puts += [self._memory_item(tenant, meta, r, expires) for r in change.put_memories]
        deletes = [
            keys.message_key(tenant, meta.namespace, meta.session_id, message_id)
            for message_id in change.delete_messages
        ] + [
            keys.memory_key(tenant, meta.namespace, meta.session_id, memory_id)
            for memory_id in change.delete_memories
        ]
        item = self.session_item(tenant, meta)
        serialized = [p.serialize() for p in puts]
        size = sum(len(json.dumps(i)) for i in serialized)
        if len(puts) + len(deletes) < TRANSACTION_ITEMS and size < TRANSACTION_BYTES:
            self._transact(serialized, deletes, item)
            return to_meta(item)
        with translated("write session"), BatchWrite(self._items.base) as batch:
            for put in puts:
                batch.save(put)
            for pk, sk in deletes:
                batch.delete(self._items.message(pk, sk))
        with translated("write session"):
            item.save()
        return to_meta(item)

    def _transact(self, puts: list[Any], deletes: list[keys.Key], meta_item: Any) -> None:
        """One TransactWriteItems: the puts, the deletes, and the meta item if its version is
        still the one read. Children carry no version condition (they are keyed by id)."""
        table = self._items.base.Meta.table_name
        expected = meta_item.version
        meta_item.version = (expected or 0) + 1
        condition: dict[str, Any] = (
            {
                "ConditionExpression": "#v = :v",
                "ExpressionAttributeNames": {"#v": "version"},
                "ExpressionAttributeValues": {":v": {"N": str(expected)}},
            }
            if expected
            else {"ConditionExpression": "attribute_not_exists(PK)"}
        )
        actions: list[dict[str, Any]] = [{"Put": {"TableName": table, "Item": p}} for p in puts]
        actions += [
            {"Delete": {"TableName": table, "Key": {"PK": {"S": pk}, "SK": {"S": sk}}}}
            for pk, sk in deletes
        ]
        actions.append({"Put": {"TableName": table, "Item": meta_item.serialize(), **condition}})
        # Derived from the transaction itself: when the SDK sends it again (its answer was
        # lost to a timeout), DynamoDB answers as it did the first time (for 10 minutes)
        # instead of failing the version check of a write that in fact went through.
        token = hashlib.sha256(json.dumps(actions, sort_keys=True).encode()).hexdigest()[:36]
        # The token also makes a resend safe when storage stays unavailable past the SDK's
        # own retries: the same transaction is sent again after a pause, and whether or not
        # an earlier attempt went through, it is applied once.
        for pause in (*RESEND_PAUSES_SECONDS, None):
            try:
                with translated("write session"):
                    self._items.connection.client.transact_write_items(
                        TransactItems=actions, ClientRequestToken=token
                    )
                return
            except StoreUnavailable:
                if pause is None:
                    raise
                metrics.add_metric(name="SessionWriteResends", unit="Count", value=1)
                time.sleep(random.uniform(pause / 2, pause))  # noqa: S311 (jitter)

    def _memory_item(
        self, tenant: str, meta: SessionMeta, record: JsonObject, expires_at: int | None
    ) -> Any:
        pk, sk = keys.memory_key(tenant, meta.namespace, meta.session_id, record["id"])
        return self._items.memory(
            pk,
            sk,
            tenant=tenant,
            namespace=meta.namespace,
            created_at=meta.updated_at,
            updated_at=meta.updated_at,
            expires_at=expires_at,
            gen=meta.gen,
            memory_id=record["id"],
            record=_dumps(record),
            session_id=meta.session_id,
            user_id=meta.user_id,
        )

    def _refresh_children(self, owner: Owner, meta: SessionMeta, change: SessionChange) -> None:
        """Give every other item of this life of the session the children's expiry (they must
        outlive the session, and go with it); items of an earlier life are deleted, except
        the messages it left as long-term records (`_kept`).

        With index_all_messages an indexed message of this life loses its expiry instead (a
        message written before the setting was on becomes a record too); one that already
        has none is left alone. Each item gets an UpdateItem of `expires_at` alone, on
        condition that it still exists and belongs to this life: a refresh never brings back
        an item another request deleted, nor undoes its write. They run concurrently (once
        per TTL period)."""
        rewritten = {m.id for m in change.put_messages} | set(change.delete_messages)
        memories = {r["id"] for r in change.put_memories} | set(change.delete_memories)
        keeps = self._table.index_all_messages
        stale: list[Any] = []
        current: list[tuple[keys.Key, int | None]] = []
        for item in self._session_items(owner.tenant, meta.namespace, meta.session_id):
            if item.sk == keys.SESSION_META:
                continue
            is_message = item.sk.startswith(keys.MESSAGE_PREFIX)
            if item.gen is not None and item.gen != meta.gen:
                if not self._kept(item):
                    stale.append(item)
            elif (is_message and item.message_id in rewritten) or (
                item.sk.startswith(keys.MEMORY_PREFIX) and item.memory_id in memories
            ):
                continue  # this write puts it with its expiry
            elif keeps and is_message and item.idx == "1":
                if item.expires_at is not None:
                    current.append(((item.pk, item.sk), None))
            else:
                current.append(((item.pk, item.sk), meta.children_expire_at))
        with translated("write session"), BatchWrite(self._items.base) as batch:
            for item in stale:
                batch.delete(item)
        with ThreadPoolExecutor(max_workers=REFRESH_WORKERS) as pool:
            list(pool.map(lambda job: self._set_expiry(job[0], meta.gen, job[1]), current))

    def _set_expiry(self, key: keys.Key, gen: str, expires: int | None) -> None:
        """Set (or with None remove) the item's `expires_at`, if it is still of life `gen`."""
        table = self._items.base.Meta.table_name
        update: dict[str, Any] = {
            "TableName": table,
            "Key": {"PK": {"S": key[0]}, "SK": {"S": key[1]}},
            "ConditionExpression": "attribute_exists(PK) AND "
            "(attribute_not_exists(gen) OR gen = :gen)",
            "ExpressionAttributeValues": {":gen": {"S": gen}},
        }
        if expires is None:
            update["UpdateExpression"] = "REMOVE expires_at"
        else:
            update["UpdateExpression"] = "SET expires_at = :e"
            update["ExpressionAttributeValues"][":e"] = {"N": str(expires)}
        try:
            with translated("refresh expiry"):
                self._items.connection.client.update_item(**update)
        except VersionConflict:
            pass  # deleted meanwhile, or of another life: nothing to refresh

    def count_messages(self, owner: Owner, meta: SessionMeta) -> int:
        """How many messages this life of the session holds (a read of the whole log)."""
        message_cls = self._items.message
        this_life = message_cls.gen == meta.gen
        if meta.gen == "0":
            this_life = this_life | message_cls.gen.does_not_exist()
        pk = keys.session_pk(owner.tenant, meta.namespace, meta.session_id)
        with translated("count messages"):
            return int(
                message_cls.count(
                    pk,
                    range_key_condition=message_cls.sk.startswith(keys.MESSAGE_PREFIX),
                    filter_condition=this_life,
                    consistent_read=True,
                )
            )

    def delete_session(self, owner: Owner, session_id: str) -> int:
        """Delete every item of the session's partition, a page at a time, the meta item
        last. Items deleted (see delete_session_page)."""
        count, cursor = self.delete_session_page(owner, session_id)
        while cursor is not None:
            deleted, cursor = self.delete_session_page(owner, session_id, cursor)
            count += deleted
        return count

    def delete_session_page(
        self, owner: Owner, session_id: str, after: PageCursor | None = None
    ) -> tuple[int, PageCursor | None]:
        """One page of delete_session (from `after`, None: the first): the items deleted and
        where the next page starts, None once the session is gone. The meta item goes with
        the last page, so until then the user's listing (GSI2) still names the session and a
        deletion cut short between pages finds it again. The first page refuses another
        user's session (Forbidden) before deleting anything.

        A request that names a user leaves the messages another user kept in long-term
        memory (an earlier life of the session id, index_all_messages): they are that user's
        records, not this session's."""
        meta_key = keys.session_key(owner.tenant, owner.namespace, session_id)
        if after is None:
            self._owned_meta_item(owner, session_id)

        def doomed(item: Any) -> bool:
            theirs = (
                self._kept(item)
                and owner.user_id is not None
                and item.user_id not in (None, owner.user_id)
            )
            return (item.pk, item.sk) != meta_key and not theirs

        count, cursor = self._table.delete_page(meta_key[0], doomed, after, "delete session")
        if cursor is None:
            meta_item = self._table.batch_get([meta_key]).get(meta_key)  # expired or not
            if meta_item is not None:
                with translated("delete session"):
                    meta_item.delete(add_version_condition=False)
                count += 1
        return count, cursor
