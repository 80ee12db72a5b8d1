"""The session service: the working-memory document of API.md, over the sessions table.

Writes are optimistic: read the session's state, compute the change, commit it with the
meta item conditional on the version read (one transaction when it fits, else batches with
the meta item last). A writer that lost the race re-reads and recomputes; every write is
idempotent (messages keyed by id), so a retry converges. Everything a client can get wrong
is checked before the first write.

The document is a view of the session's log. A PUT makes the document exactly its
messages: a stored message it leaves out is deleted, except the ones older than every
message it keeps, which leave the document but stay in the log (GET …/messages). That is
what keeps agent-memory-client's append (a GET trimmed to a context window, then a PUT of
what it saw) from deleting history; docs/design-sessions.md has the reasoning.

An expired session is gone, and a write to it starts a new life (`gen`). With
index_all_messages its indexed messages outlive it as long-term records, and a GET rebuilds
the document from them (`reconstructed`; nothing is stored). A write then starts the new life
as before; the messages it carries come into it (agent-memory-client's append, a GET then a
PUT of what it saw plus the new messages, so continues the conversation, as with AMS), and
kept messages it leaves out stay records of the old life: searchable, never in the new
document. A DELETE removes them with the rest.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError as PydanticValidationError

from memkit.errors import (
    FieldProblem,
    Forbidden,
    NotFound,
    TooLarge,
    ValidationFailed,
    VersionConflict,
)
from memkit.models.domain import (
    JsonObject,
    Owner,
    PadRef,
    Profile,
    SessionMeta,
    StoredMessage,
)
from memkit.models.session import (
    AppendMessages,
    MemoryStrategy,
    Message,
    PendingMemory,
    SessionPatch,
    SessionWrite,
    iso,
)
from memkit.observability import logger, metrics
from memkit.service.retry import back_off, commit_in_time
from memkit.service.scratchpad import ScratchpadResult, ScratchpadService
from memkit.service.windows import Window, effective_window, fit, message_tokens
from memkit.store.protocol import SessionChange, SessionWriteState, message_order
from memkit.store.sessions import SessionTable
from memkit.times import Deadline, now_iso
from memkit.vectors.filters import Condition
from memkit.vectors.protocol import MESSAGE_KIND
from memkit.vectors.removal import remove_vectors
from memkit.versions import version_matches

if TYPE_CHECKING:
    from memkit.vectors.protocol import VectorIndex

# A DynamoDB item holds 400 KB, and an item with the sort key of a local secondary index
# counts twice, its projection included (LSI1 projects ALL: messages, the session's meta).
# So a message, a memory or the session's own fields must fit half of it, with room for
# keys and attributes. (moto lets 350 KB through; DynamoDB and DynamoDB Local refuse it.)
MAX_ITEM_BYTES = 190_000
# Pending memories of one session together (they travel in every document).
MAX_MEMORIES_BYTES = 1_000_000
# New messages one PUT may add (it may carry more that are already stored). A rebuilt
# document holds fewer (store/sessions.MAX_REBUILT_MESSAGES), so a PUT of it can add more.
MAX_NEW_MESSAGES_PER_PUT = 1_000
# A document holds its newest messages up to this many bytes as Lambda counts them
# (memkit.models.budget): with the pending memories (1 MB of JSON, at most 2 MB there), the
# session's fields and its scratchpad (MAX_ITEM_BYTES of JSON each, at most twice that there)
# it stays under the 6 MiB a Lambda response may hold. `message_count` says how many the log
# has; GET .../messages pages through all of them.
DOCUMENT_BYTE_BUDGET = 3_300_000


@dataclass(frozen=True)
class SessionDocument:
    """What a client sees of a session. `reconstructed`: the session had expired and this
    is the document rebuilt from the messages it kept in long-term memory."""

    meta: SessionMeta
    window: Window
    memories: list[JsonObject]
    pad: ScratchpadResult | None
    created: bool = False
    reconstructed: bool = False


T = TypeVar("T")


@dataclass(frozen=True)
class Appended:
    """What an append's committed attempt wrote: new ids, ids stored already, how many pruned."""

    new: list[str]
    already: list[str]
    pruned: int


@dataclass(frozen=True)
class AppendResult:
    meta: SessionMeta
    created: bool
    appended: list[str]
    already_stored: list[str]
    pruned: int


@dataclass(frozen=True)
class MessagesPage:
    messages: list[StoredMessage]
    next_cursor: str | None


def _within_budget(messages: list[StoredMessage], budget: int) -> list[StoredMessage]:
    """The newest messages that fit `budget` bytes of a response (at least one)."""
    kept: list[StoredMessage] = []
    size = 0
    for message in reversed(messages):
        size += message.response_bytes
        if size > budget and kept:
            break
        kept.append(message)
    kept.reverse()
    return kept


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


# A session DELETE removes the session's vectors for this long at most, its requests to the
# index included; the stream's REMOVE records take out whatever is left. So a DELETE that
# meets a Serverless collection waking from zero (10 to 30 s) answers at once instead of
# waiting for it: the session is gone either way, and a search drops a hit whose item is.
SESSION_VECTORS_SECONDS = 5.0


def session_vector_conditions(owner: Owner, session_id: str) -> list[Condition]:
    """The docs of a session's indexed messages. A request that names a user removes only
    that user's: another user's messages kept from an earlier life of the session id stay
    (store.delete_session keeps them too); messages of no user go through the stream's
    REMOVE records a moment later."""
    conditions = [
        Condition("kind", "eq", MESSAGE_KIND),
        Condition("namespace", "eq", owner.namespace),
        Condition("session_id", "eq", session_id),
    ]
    if owner.user_id:
        conditions.append(Condition("user_id", "eq", owner.user_id))
    return conditions


def stored_message(message: Message) -> StoredMessage:
    return StoredMessage(
        id=message.id,
        role=message.role,
        content=message.content,
        created_at=iso(message.created_at),
        order=message_order(message.created_at_us, message.id),
        tokens=message_tokens(message.role, message.content),
        name=message.name,
        tool_call_id=message.tool_call_id,
        tool_calls=message.tool_calls,
        metadata=message.metadata,
        persisted_at=iso(message.persisted_at) if message.persisted_at else None,
        discrete_memory_extracted=message.discrete_memory_extracted,
    )


def _unique_messages(messages: Sequence[Message]) -> list[Message]:
    """The request's messages, each id once. agent-memory-client's append sends the stored
    messages plus the new ones, so a retried append repeats an id: an identical repeat is
    dropped (the first wins); a repeat that differs is a 422. Every message must fit one
    item."""
    first: dict[str, int] = {}
    unique: list[Message] = []
    problems: list[FieldProblem] = []
    for index, message in enumerate(messages):
        if message.id in first:
            earlier = messages[first[message.id]]
            if (earlier.role, earlier.content) != (message.role, message.content):
                problems.append(
                    FieldProblem(
                        f"messages.{index}.id",
                        f"repeats messages.{first[message.id]}.id with other content",
                    )
                )
            continue
        first[message.id] = index
        unique.append(message)
    if problems:
        raise ValidationFailed("message ids repeat within the request", problems)
    for index, message in enumerate(messages):
        size = _json_bytes(message.model_dump(mode="json", exclude_none=True))
        if size > MAX_ITEM_BYTES:
            raise TooLarge(
                f"message {index} is {size} bytes; a message holds at most {MAX_ITEM_BYTES}",
                [FieldProblem(f"messages.{index}", "too large for one stored message")],
            )
    return unique


def _confine_memories(
    records: Sequence[JsonObject], session_id: str, session_user: str | None
) -> None:
    """A pending memory belongs to its session: promoted, it becomes a record of the session's
    user in this session, so naming another user or another session would plant a record
    where its writer has no right to write (the promotion skips the checks of a create). The
    session's user is the writer's own already (or the writer an admin): the write loop
    refuses another's session."""
    for index, record in enumerate(records):
        user = record.get("user_id")
        if user is not None and user != session_user:
            raise Forbidden(
                "a pending memory names another user",
                [FieldProblem(f"memories.{index}.user_id", "must be the session's user")],
            )
        named = record.get("session_id")
        if named is not None and named != session_id:
            raise ValidationFailed(
                "a pending memory names another session",
                [FieldProblem(f"memories.{index}.session_id", "must be this session's id")],
            )


def _check_memories(memories: Sequence[PendingMemory]) -> list[JsonObject]:
    records: list[JsonObject] = []
    seen: set[str] = set()
    total = 0
    for index, memory in enumerate(memories):
        if memory.id in seen:
            raise ValidationFailed(
                "memory ids repeat", [FieldProblem(f"memories.{index}.id", "repeated")]
            )
        seen.add(memory.id)
        # persisted_at is the server's (set when promoted), so an echo of it changes nothing.
        record = memory.model_dump(mode="json", exclude_none=True, exclude={"persisted_at"})
        _check_promotable(record, index)
        size = _json_bytes(record)
        if size > MAX_ITEM_BYTES:
            raise TooLarge(
                f"memory {index} is too large",
                [FieldProblem(f"memories.{index}", "too large for one stored memory")],
            )
        total += size
        records.append(record)
    if total > MAX_MEMORIES_BYTES:
        raise TooLarge(
            f"pending memories take {total} bytes; a session holds at most {MAX_MEMORIES_BYTES}",
            [FieldProblem("memories", "too large together (promote some to long-term memory)")],
        )
    return records


def _check_promotable(record: JsonObject, index: int) -> None:
    """A pending memory must make a valid long-term record (it is promoted to one), so what
    the indexer would refuse is a 422 now, not a record stuck in the stream's retries."""
    from memkit.models.memory import MemoryRecordIn  # only sessions with memories need it
    from memkit.models.problems import field_problems

    try:
        MemoryRecordIn.model_validate(record)
    except PydanticValidationError as exc:
        raise ValidationFailed(
            f"memory {index} cannot become a long-term memory",
            field_problems(exc.errors(), MemoryRecordIn, ("memories", index)),
        ) from exc


def _digest(record: JsonObject) -> str:
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _check_data(data: JsonObject | None) -> None:
    if data is None:
        return
    nulls = [key for key, value in data.items() if value is None]
    if nulls:
        raise ValidationFailed(
            "data values must not be null",
            [
                FieldProblem(f"data.{key}", "must not be null (leave the key out instead)")
                for key in nulls
            ],
        )


def _check_meta_size(meta: SessionMeta) -> None:
    parts = {
        "data": meta.data,
        "context": meta.context,
        "metadata": meta.metadata,
        "title": meta.title,
        "long_term_memory_strategy": meta.strategy,
        "memories": [meta.memory_ids, meta.memory_digests],
    }
    sizes = {name: _json_bytes(value) for name, value in parts.items()}
    if sum(sizes.values()) > MAX_ITEM_BYTES:
        largest = max(sizes, key=lambda name: sizes[name])
        raise TooLarge(
            f"the session's fields take {sum(sizes.values())} bytes; at most {MAX_ITEM_BYTES}",
            [FieldProblem(largest, f"{sizes[largest]} bytes")],
        )


def children_expiry(
    now: float, ttl_seconds: int | None, current: int | None, exists: bool
) -> tuple[int | None, bool]:
    """(expires_at for the session's other items, whether the stored ones need rewriting).

    Every item of a session carries `expires_at` so DynamoDB deletes it with the session
    (except the messages index_all_messages keeps: store/sessions.py), and it must outlive
    the session (whose own expiry moves with every write). Rewriting every item on every
    write would make a write cost the session's length, so other items
    get twice the TTL and are rewritten only once the session would outlive them: at most
    once per TTL period. Reads decide by the session's expiry, never by the items'.
    """
    if ttl_seconds is None:
        return None, exists and current is not None
    horizon = int(now) + ttl_seconds
    if exists and current is not None and horizon <= current <= horizon + ttl_seconds:
        return current, False
    return horizon + ttl_seconds, exists


@dataclass(frozen=True)
class _Replacement:
    """A PUT's plan, made again from each fresh read (`plan`): the messages it keeps, adds
    and deletes, its pending memories, and the session fields it sets."""

    owner: Owner
    session_id: str
    body: SessionWrite
    window: int | None
    incoming: list[StoredMessage]
    memories: list[JsonObject]
    # SessionService._prune: the profile's max_messages over stored and arriving messages.
    prune: Callable[
        [Profile, dict[str, str], list[StoredMessage]], tuple[list[StoredMessage], list[str]]
    ]

    def plan(
        self, state: SessionWriteState, meta: SessionMeta
    ) -> tuple[SessionChange, list[StoredMessage]]:
        """The write, and the document it leaves (the kept messages, stored versions first)."""
        new = [m for m in self.incoming if m.id not in state.stored]
        if len(new) > MAX_NEW_MESSAGES_PER_PUT:
            raise ValidationFailed(
                "too many new messages in one request",
                [
                    FieldProblem(
                        "messages",
                        f"{len(new)} new messages; at most {MAX_NEW_MESSAGES_PER_PUT} per "
                        "PUT (use POST …/messages in batches)",
                    )
                ],
            )
        view_from, deleted = self._view(state, meta)
        remaining = {i: m.order for i, m in state.stored.items() if i not in set(deleted)}
        new, pruned = self.prune(state.profile, remaining, new)
        arriving = {m.id: m for m in new}
        document = sorted(
            (
                state.stored.get(m.id) or arriving[m.id]
                for m in self.incoming
                if m.id in state.stored or m.id in arriving
            ),
            key=lambda m: m.order,
        )
        user_id = meta.user_id or self.body.user_id or self.owner.user_id
        _confine_memories(self.memories, self.session_id, user_id)
        old_memories = dict(zip(meta.memory_ids, meta.memory_digests, strict=False))
        digests = {r["id"]: _digest(r) for r in self.memories}
        updated = replace(
            self._fields(meta),
            user_id=user_id,
            memory_ids=tuple(digests),
            memory_digests=tuple(digests.values()),
            view_from=view_from,
            message_count=len(remaining) + len(new) - len(pruned),
        )
        change = SessionChange(
            owner=self.owner,
            meta=updated,
            put_messages=new,
            delete_messages=deleted + pruned,
            put_memories=[
                r for r in self.memories if old_memories.get(r["id"]) != digests[r["id"]]
            ],
            delete_memories=sorted(set(old_memories) - set(digests)),
        )
        return change, document

    def _view(self, state: SessionWriteState, meta: SessionMeta) -> tuple[str | None, list[str]]:
        """Where the document starts after the PUT, and the stored messages it deletes (those
        in the view it leaves out; older ones stay in the log)."""
        kept = {m.id: state.stored.get(m.id, m).order for m in self.incoming}
        view_from: str | None
        if kept:
            view_from = min(kept.values())
        elif state.stored:  # an empty document: everything stored leaves the view
            view_from = max(m.order for m in state.stored.values()) + "\uffff"
        else:
            view_from = meta.view_from
        deleted = [
            message_id
            for message_id, message in state.stored.items()
            if message_id not in kept and view_from is not None and message.order >= view_from
        ]
        return view_from, deleted

    def _fields(self, meta: SessionMeta) -> SessionMeta:
        """The session's fields as the body sets them (those it leaves out keep their value,
        where the PUT keeps them)."""
        body, fields = self.body, self.body.model_fields_set
        return replace(
            meta,
            data=body.data or {},
            context=body.context,
            tokens=body.tokens,
            strategy=(body.long_term_memory_strategy or MemoryStrategy()).model_dump(mode="json"),
            ttl_seconds=body.ttl_seconds if "ttl_seconds" in fields else meta.ttl_seconds,
            title=body.title if "title" in fields else meta.title,
            metadata=body.metadata if "metadata" in fields else meta.metadata,
            index_messages=(
                body.index_messages if "index_messages" in fields else meta.index_messages
            ),
            profile=body.profile or meta.profile,
            window_tokens=self.window if self.window is not None else meta.window_tokens,
        )


class SessionService:
    """Session operations over the sessions table; the scratchpad through its own service."""

    def __init__(
        self,
        sessions: SessionTable,
        scratchpads: ScratchpadService,
        # As the scratchpad's: concurrent appends to one session (4 clients x 50) lost 10
        # races in a row on a slow engine; each attempt waits a jittered moment (at most
        # 0.4 s), so 25 is a few seconds before a 409 says the session will not settle.
        max_attempts: int = 25,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        index: Callable[[], VectorIndex] | None = None,
    ) -> None:
        self._sessions = sessions
        self._scratchpads = scratchpads
        self._max_attempts = max_attempts
        self._clock = clock
        self._sleep = sleep
        self._index = index

    # -- reads -------------------------------------------------------------------------------

    def get(
        self,
        owner: Owner,
        session_id: str,
        recent_messages_limit: int | None = None,
        model_name: str | None = None,
        context_window_max: int | None = None,
    ) -> SessionDocument:
        window_size = effective_window(model_name, context_window_max)
        read = self._sessions.read_session(
            owner, session_id, recent_messages_limit, DOCUMENT_BYTE_BUDGET
        )
        if read is None:
            raise NotFound(f"session {session_id!r} does not exist")
        pad = self._scratchpads.result_of(read.pad) if read.pad is not None else None
        if read.reconstructed:
            metrics.add_metric(name="SessionsReconstructed", unit="Count", value=1)
        return SessionDocument(
            read.meta,
            fit(read.messages, window_size),
            read.memories,
            pad,
            reconstructed=read.reconstructed,
        )

    def user_of(self, owner: Owner, session_id: str) -> str | None:
        """The session's user, or None when it has none or does not exist."""
        read = self._sessions.read_session(owner, session_id, 1, DOCUMENT_BYTE_BUDGET)
        return None if read is None else read.meta.user_id

    def list_ids(
        self, owner: Owner, user_id: str | None, limit: int, offset: int
    ) -> tuple[list[str], int]:
        return self._sessions.list_sessions(owner, user_id, limit, offset)

    def messages(
        self,
        owner: Owner,
        session_id: str,
        limit: int,
        cursor: str | None,
        ascending: bool,
        roles: frozenset[str] | None,
    ) -> MessagesPage:
        page = self._sessions.page_messages(owner, session_id, limit, cursor, ascending, roles)
        if page is None:
            raise NotFound(f"session {session_id!r} does not exist")
        return MessagesPage(*page)

    # -- writes ------------------------------------------------------------------------------

    def put(
        self,
        owner: Owner,
        session_id: str,
        body: SessionWrite,
        if_match: str | None = None,
        model_name: str | None = None,
        context_window_max: int | None = None,
    ) -> SessionDocument:
        """Replace the document (API.md PUT); returns it as a GET with the same window would.
        A window given (`context_window_max`, or `model_name`'s) becomes the session's: the
        one background summarisation works against, as AMS summarises a PUT against it."""
        if body.session_id is not None and body.session_id != session_id:
            raise ValidationFailed(
                "session_id differs from the path",
                [FieldProblem("session_id", "must equal the session id in the path")],
            )
        window = effective_window(model_name, context_window_max)  # an unknown model fails first
        messages = _unique_messages(body.messages)
        memories = _check_memories(body.memories)
        _check_data(body.data)
        incoming = [stored_message(m) for m in messages]
        replacement = _Replacement(owner, session_id, body, window, incoming, memories, self._prune)
        seed = body.scratchpad
        meta, created, document = self._write(
            owner,
            session_id,
            None,
            body.profile,
            if_match,
            replacement.plan,
            lambda state: self._scratchpads.check_seed(state.profile, seed),
            changes_profile=True,
        )
        ref = PadRef(owner=owner, session_id=session_id)
        if seed is not None:
            self._scratchpads.seed(ref, seed)
        # Answer from what the write listed and wrote (no second read of the log), as a GET
        # would: the newest messages within the byte budget, then the window.
        shown = _within_budget(document, DOCUMENT_BYTE_BUDGET)
        return SessionDocument(
            meta, fit(shown, window), replacement.memories, self._pad_of(ref), created=created
        )

    def _pad_of(self, ref: PadRef) -> ScratchpadResult | None:
        """The session's scratchpad as a document shows it (None when it cannot resolve)."""
        try:
            return self._scratchpads.get(ref)
        except (NotFound, ValidationFailed):
            return None

    def patch(
        self, owner: Owner, session_id: str, body: SessionPatch, if_match: str | None = None
    ) -> SessionDocument:
        """Change session fields; `data` is merged (a null value deletes its key). A
        `context_window_max` becomes the session's window; null gives back the server's."""
        fields = body.model_fields_set

        def change(state: SessionWriteState, meta: SessionMeta) -> tuple[SessionChange, None]:
            if state.meta is None:
                raise NotFound(f"session {session_id!r} does not exist")
            data = dict(meta.data or {})
            for key, value in (body.data or {}).items():
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value
            updated = replace(
                meta,
                data=data,
                context=body.context if "context" in fields else meta.context,
                tokens=body.tokens if body.tokens is not None else meta.tokens,
                ttl_seconds=body.ttl_seconds if "ttl_seconds" in fields else meta.ttl_seconds,
                title=body.title if "title" in fields else meta.title,
                metadata=body.metadata if "metadata" in fields else meta.metadata,
                index_messages=(
                    body.index_messages if "index_messages" in fields else meta.index_messages
                ),
                profile=body.profile if "profile" in fields else meta.profile,
                strategy=(
                    body.long_term_memory_strategy.model_dump(mode="json")
                    if body.long_term_memory_strategy is not None
                    else meta.strategy
                ),
                window_tokens=(
                    body.context_window_max
                    if "context_window_max" in fields
                    else meta.window_tokens
                ),
            )
            return SessionChange(owner=owner, meta=updated), None

        self._write(owner, session_id, [], body.profile, if_match, change, changes_profile=True)
        return self.get(owner, session_id)

    def append(
        self,
        owner: Owner,
        session_id: str,
        body: AppendMessages,
        model_name: str | None = None,
        context_window_max: int | None = None,
    ) -> AppendResult:
        """Add messages (idempotent by id); creates the session if needed. A window given
        becomes the session's, as on a PUT."""
        window = effective_window(model_name, context_window_max)
        incoming = [stored_message(m) for m in _unique_messages(body.messages)]

        def change(state: SessionWriteState, meta: SessionMeta) -> tuple[SessionChange, Appended]:
            new = [m for m in incoming if m.id not in state.stored]
            already = [m.id for m in incoming if m.id in state.stored]
            count = meta.message_count
            if already and state.meta is not None:
                # A retry, or an attempt that wrote its messages and then lost the race for
                # the session item: the stored count may not include them. Count again.
                count = self._sessions.count_messages(owner, meta)
            new, pruned = self._prune_oldest(owner, state.profile, meta, count, new)
            # A message older than the document's first brings the document back to it.
            view_from = meta.view_from
            if new and view_from is not None:
                view_from = min(view_from, *(m.order for m in new))
            updated = replace(
                meta,
                view_from=view_from,
                user_id=meta.user_id or owner.user_id,
                ttl_seconds=body.ttl_seconds or meta.ttl_seconds,
                profile=meta.profile or body.profile,
                window_tokens=window if window is not None else meta.window_tokens,
                message_count=count + len(new) - len(pruned),
            )
            written = SessionChange(
                owner=owner, meta=updated, put_messages=new, delete_messages=pruned
            )
            return written, Appended([m.id for m in new], already, len(pruned))

        meta, created, appended = self._write(
            owner, session_id, [m.id for m in incoming], body.profile, None, change
        )
        metrics.add_metric(name="MessagesAppended", unit="Count", value=len(appended.new))
        return AppendResult(meta, created, appended.new, appended.already, appended.pruned)

    def _prune_oldest(
        self,
        owner: Owner,
        profile: Profile,
        meta: SessionMeta,
        count: int,
        new: list[StoredMessage],
    ) -> tuple[list[StoredMessage], list[str]]:
        """An append's `_prune`: the stored oldest are read only when the profile's
        max_messages is passed (`count` stored, `new` arriving)."""
        if profile.max_messages is None or count + len(new) <= profile.max_messages:
            return new, []
        excess = count + len(new) - profile.max_messages
        oldest = dict(self._sessions.oldest_messages(owner, meta, excess)) if count else {}
        return self._prune(profile, oldest, new, total=count + len(new))

    def remove_messages(self, owner: Owner, session_id: str, message_ids: list[str]) -> list[str]:
        """Delete these messages of the session (those it holds); the ids deleted. The session
        stays, with its count lowered (an AgentCore DeleteEvent)."""

        def change(state: SessionWriteState, meta: SessionMeta) -> tuple[SessionChange, list[str]]:
            if state.meta is None:
                raise NotFound(f"session {session_id!r} does not exist")
            removed = [message_id for message_id in message_ids if message_id in state.stored]
            updated = replace(meta, message_count=max(0, meta.message_count - len(removed)))
            return SessionChange(owner=owner, meta=updated, delete_messages=removed), removed

        _, _, removed = self._write(owner, session_id, list(message_ids), None, None, change)
        return removed

    def delete(self, owner: Owner, session_id: str) -> int:
        """Remove the session and every item of it (messages, memories, its scratchpad), and
        its messages' vectors from the index at once (the stream's removals come later)."""
        deleted = self._sessions.delete_session(owner, session_id)
        if not deleted or self._index is None:
            return deleted
        conditions = session_vector_conditions(owner, session_id)
        deadline = Deadline.after(SESSION_VECTORS_SECONDS)
        try:
            _, removed = remove_vectors(
                self._index(), owner.tenant, conditions, self._clock, deadline
            )
        except Exception as exc:
            # The session is gone: whatever failed (building the index client included), the
            # stream's REMOVE records still take its vectors out.
            logger.warning(
                "session vectors left to the stream", extra={"error": type(exc).__name__}
            )
            return deleted
        if not removed:
            logger.info("session vectors left to the stream", extra={"error": "deadline"})
        return deleted

    # -- the write loop ------------------------------------------------------------------------

    def _write(
        self,
        owner: Owner,
        session_id: str,
        message_ids: list[str] | None,
        profile_hint: str | None,
        if_match: str | None,
        change: Callable[[SessionWriteState, SessionMeta], tuple[SessionChange, T]],
        check: Callable[[SessionWriteState], None] | None = None,
        changes_profile: bool = False,
    ) -> tuple[SessionMeta, bool, T]:
        """Read, compute, commit; on a lost race read again (bounded, jittered). `change`
        plans the write from what was read, with what its caller answers (that of the
        attempt that was committed): the stored meta, whether it created the session, and
        that answer."""
        for attempt in range(self._max_attempts):
            state = self._sessions.write_state(
                owner, session_id, message_ids, profile_hint, hint_wins=changes_profile
            )
            current = state.meta
            if current is not None and owner.refuses(current.user_id):
                raise Forbidden("this session belongs to another user")
            if not version_matches(if_match, current.version if current else 0):
                raise VersionConflict(
                    f"the session is at version {current.version if current else 0}, not {if_match}"
                )
            if check is not None:
                check(state)
            created = current is None
            base = current or replace(
                self._sessions.new_session_meta(owner, session_id, profile_hint),
                version=state.disk_version,
            )
            planned, answer = change(state, base)
            now = self._clock()
            meta = planned.meta
            expires, refresh = children_expiry(
                now, meta.ttl_seconds, base.children_expire_at, not created
            )
            stamp = now_iso(now)
            meta = replace(
                meta,
                updated_at=stamp,
                last_accessed=stamp,
                expires_at=int(now) + meta.ttl_seconds if meta.ttl_seconds else None,
                children_expire_at=expires,
                version=base.version,
            )
            _check_meta_size(meta)
            commit_in_time("session")
            try:
                stored = self._sessions.commit_session(
                    replace(planned, meta=meta, refresh_children=refresh)
                )
            except VersionConflict:
                if if_match is not None:
                    raise
                back_off(attempt, self._sleep, "SessionWriteRetries")
                continue
            metrics.add_metric(name="SessionWrites", unit="Count", value=1)
            return stored, created, answer
        raise VersionConflict(
            f"the session kept changing under {self._max_attempts} attempts; retry later"
        )

    def _prune(
        self,
        profile: Profile,
        stored: dict[str, str],
        new: list[StoredMessage],
        total: int | None = None,
    ) -> tuple[list[StoredMessage], list[str]]:
        """Apply the profile's max_messages: (new messages still to write, stored ids to
        delete). The oldest go first, whether stored or arriving now."""
        limit = profile.max_messages
        count = (len(stored) + len(new)) if total is None else total
        if limit is None or count <= limit:
            return new, []
        excess = count - limit
        candidates = sorted(
            [(order, message_id, True) for message_id, order in stored.items()]
            + [(m.order, m.id, False) for m in new]
        )[:excess]
        dropped_new = {message_id for _, message_id, is_stored in candidates if not is_stored}
        pruned = [message_id for _, message_id, is_stored in candidates if is_stored]
        if pruned:
            metrics.add_metric(name="MessagesPruned", unit="Count", value=len(pruned))
        return [m for m in new if m.id not in dropped_new], pruned
