"""What the store's tables exchange with their callers (reads, changes, pages), and the two
Protocols that have a fake (scratchpads and profiles: tests/fakes/memory_store.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from memkit.models.domain import (
    Content,
    JsonObject,
    Owner,
    PadRef,
    Profile,
    ProfileSpec,
    Scope,
    Scratchpad,
    SessionMeta,
    SessionStub,
    StoredMessage,
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


class PadStore(Protocol):
    """Scratchpad storage (PadTable; tests and benchmarks also use an in-memory fake). Raises
    memkit.errors types, never SDK errors."""

    def read_pad(self, ref: PadRef) -> PadState:
        """The scratchpad named by `ref` with its profile and session (at most 2 requests)."""
        ...

    def write_pad(self, state: PadState, content: Content, tokens: int) -> Scratchpad:
        """Store `content` (and its token count) if nothing changed since `state` was read,
        else VersionConflict.

        Creates the session when `state.session` is None and the ref names a session.
        """
        ...


class ProfileStore(Protocol):
    """Profile storage (ProfileTable, or the in-memory fake), each write conditional on the
    version read."""

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
