"""What the service needs from storage, as a Protocol (DynamoDB in production, fakes in tests)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memkit.models.agentcore import AgentMemory, Listing, MemoryPage
from memkit.models.domain import (
    Content,
    JsonObject,
    MessageRef,
    Owner,
    PadRef,
    Profile,
    ProfileSpec,
    Scope,
    Scratchpad,
    SessionMeta,
    SessionStub,
    StoredMessage,
    StoredRecord,
)
from memkit.store import keys

# How many partitions the lifecycle index spreads expiring sessions over: a pass over every
# due session walks shards 0 .. EXPIRY_SHARDS - 1 (memkit.jobs.expiry).
EXPIRY_SHARDS = keys.EXPIRY_SHARDS


def user_records_start(user_id: str | None) -> str:
    """Where a user's records start in a listing of a namespace's records (which lists them
    user by user): an opaque position, before every record of the user and after every
    record of the users before."""
    return keys.user_records_prefix(user_id)


def message_order(created_at_us: int, message_id: str) -> str:
    """A message's place in its session (created_at, then id), as an opaque token that
    sorts as the messages do: what `StoredMessage.order` and a session's `view_from` hold."""
    return keys.message_order(created_at_us, message_id)


@dataclass(frozen=True)
class PadState:
    """One consistent read of a scratchpad and what governs it.

    `session` is None when the session does not exist (or has expired): a write creates it.
    `disk_versions` holds the versions of items physically present, expired ones included, so a
    write can replace an expired item that DynamoDB has not deleted yet.
    """

    ref: PadRef
    profile: Profile
    scope: Scope
    user_id: str | None
    session: SessionStub | None
    pad: Scratchpad | None
    disk_versions: dict[str, int] = field(default_factory=dict)

    @property
    def version(self) -> int:
        """The version a client sees (0 = never written)."""
        return self.pad.version if self.pad else self.disk_versions.get("pad", 0)

    @property
    def content(self) -> Content:
        return self.pad.content if self.pad else None


@dataclass(frozen=True)
class ProfilePage:
    profiles: list[Profile]
    next_cursor: str | None


class Store(Protocol):
    """Intent-named storage operations. Raise memkit.errors types, never SDK errors."""

    def reachable(self) -> None:
        """Return when the table answers a read, else StoreUnavailable (the health check)."""
        ...

    def read_pad(self, ref: PadRef) -> PadState:
        """The scratchpad named by `ref` with its profile and session (at most 2 requests)."""
        ...

    def write_pad(self, state: PadState, content: Content, tokens: int) -> Scratchpad:
        """Store `content` (and its token count) if nothing changed since `state` was read,
        else VersionConflict.

        Creates the session when `state.session` is None and the ref names a session.
        """
        ...

    def get_profile(self, tenant: str, namespace: str, name: str) -> Profile | None: ...

    def put_profile(
        self,
        tenant: str,
        namespace: str,
        name: str,
        spec: ProfileSpec,
        expected_version: int | None,
    ) -> Profile: ...

    def delete_profile(
        self, tenant: str, namespace: str, name: str, expected_version: int | None
    ) -> bool: ...

    def list_profiles(
        self, tenant: str, namespace: str, limit: int, cursor: str | None
    ) -> ProfilePage: ...


@dataclass(frozen=True)
class SessionRead:
    """A live session: its meta, its newest messages (oldest first), pending memories and
    the scratchpad it resolves to. `reconstructed`: an expired session rebuilt from the
    messages it kept in long-term memory (index_all_messages); its meta is not stored."""

    meta: SessionMeta
    messages: list[StoredMessage]
    memories: list[JsonObject]
    pad: PadState | None
    reconstructed: bool = False


@dataclass(frozen=True)
class SessionWriteState:
    """What a session write starts from. `meta` is None when the session does not exist or
    has expired; `disk_version` is the stored meta item's version either way (0 = none), so
    a write can replace an expired item DynamoDB has not deleted yet. `stored` holds this
    life's stored messages, by id: those asked about, or all of them."""

    meta: SessionMeta | None
    disk_version: int
    stored: dict[str, StoredMessage]
    profile: Profile


@dataclass(frozen=True)
class SessionChange:
    """One session write: `meta` is the new meta item (its `version` the one read)."""

    owner: Owner
    meta: SessionMeta
    put_messages: list[StoredMessage] = field(default_factory=list)
    delete_messages: list[str] = field(default_factory=list)
    put_memories: list[JsonObject] = field(default_factory=list)
    delete_memories: list[str] = field(default_factory=list)
    # Rewrite the session's other items with meta.children_expire_at (see service/sessions).
    refresh_children: bool = False


class SessionStore(Protocol):
    """Session storage (DynamoDB; the integration tests run it on moto)."""

    def new_session_meta(
        self, owner: Owner, session_id: str, profile: str | None
    ) -> SessionMeta: ...

    def read_session(
        self, owner: Owner, session_id: str, limit: int | None, byte_budget: int
    ) -> SessionRead | None: ...

    def write_state(
        self,
        owner: Owner,
        session_id: str,
        message_ids: list[str] | None,
        profile_hint: str | None,
        hint_wins: bool = False,
    ) -> SessionWriteState: ...

    def oldest_messages(
        self, owner: Owner, meta: SessionMeta, count: int
    ) -> list[tuple[str, str]]: ...

    def page_messages(
        self,
        owner: Owner,
        session_id: str,
        limit: int,
        cursor: str | None,
        ascending: bool,
        roles: frozenset[str] | None,
    ) -> tuple[list[StoredMessage], str | None] | None: ...

    def list_sessions(
        self, owner: Owner, user_id: str | None, limit: int, offset: int
    ) -> tuple[list[str], int]: ...

    def count_messages(self, owner: Owner, meta: SessionMeta) -> int: ...

    def commit_session(self, change: SessionChange) -> SessionMeta: ...

    def delete_session(self, owner: Owner, session_id: str) -> int: ...


class RecordStore(Protocol):
    """What long-term memory needs of the table (DynamoStore's RecordTable)."""

    def get_records(self, tenant: str, record_ids: Sequence[str]) -> dict[str, StoredRecord]: ...

    def get_record(self, tenant: str, record_id: str) -> StoredRecord: ...

    def duplicates(
        self, tenant: str, wanted: Sequence[tuple[str, str, str]]
    ) -> dict[str, set[str]]: ...

    def put_records(self, tenant: str, records: Sequence[StoredRecord]) -> None: ...

    def replace_record(self, tenant: str, record: StoredRecord) -> StoredRecord: ...

    def delete_records(self, tenant: str, record_ids: Sequence[str]) -> int: ...

    def session_meta(self, owner: Owner, session_id: str) -> SessionMeta | None:
        """The live session's meta, or None (whose session a record may name)."""
        ...

    def touch_records(self, tenant: str, record_ids: Sequence[str], now: str, before: str) -> None:
        """Set `last_accessed` to `now` on the records whose last access is before `before`."""
        ...

    def messages_by_ref(self, wanted: Sequence[MessageRef]) -> dict[MessageRef, StoredMessage]:
        """Session messages named by search hits, live ones only."""
        ...

    def messages_around(self, ref: MessageRef, order: str, count: int) -> list[StoredMessage]:
        """Up to `count` live messages before and after the one at `order` in its session,
        oldest first."""
        ...


class AgentCoreStore(Protocol):
    """What AgentCore needs of the table besides sessions (memkit.store.agentcore)."""

    def create_agent_memory(self, tenant: str, memory: AgentMemory) -> None: ...

    def get_agent_memory(self, tenant: str, memory_id: str) -> AgentMemory | None: ...

    def delete_agent_memory(self, tenant: str, memory: AgentMemory) -> bool: ...

    def list_agent_memories(self, tenant: str, limit: int, token: str | None) -> MemoryPage: ...

    def note_actor(
        self, tenant: str, memory_id: str, actor_id: str, expires_at: int | None
    ) -> None: ...

    def list_actors(
        self, tenant: str, memory_id: str, limit: int, token: str | None
    ) -> Listing: ...

    def has_actor(self, tenant: str, memory_id: str, actor_id: str) -> bool: ...

    def list_actor_sessions(
        self, owner: Owner, limit: int, token: str | None, with_events: bool
    ) -> Listing: ...

    def messages_with_prefix(
        self, owner: Owner, session_id: str, created_at_us: int, id_prefix: str
    ) -> list[StoredMessage]: ...

    def session_log(
        self, owner: Owner, session_id: str, token: str | None, newest_first: bool
    ) -> Iterator[StoredMessage] | None: ...

    def log_token(self, owner: Owner, session_id: str, message: StoredMessage) -> str: ...
