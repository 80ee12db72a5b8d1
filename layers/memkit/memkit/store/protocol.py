"""What the service needs from storage, as a Protocol (DynamoDB in production, fakes in tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from memkit.models.domain import (
    Content,
    PadRef,
    Profile,
    ProfileSpec,
    Scope,
    Scratchpad,
    SessionStub,
)


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
