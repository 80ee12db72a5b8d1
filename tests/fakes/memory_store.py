"""An in-memory Store with DynamoStore's semantics, for service tests and benchmarks.

Same keys, same profile resolution, same versions and conditional writes, same expiry hiding
(items stay "on disk" after `expires_at`, as DynamoDB deletes them late). Content is stored as
JSON text, so a caller can never change stored content by mutating what it was given.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from memkit.errors import VersionConflict
from memkit.models.budget import envelope_bytes, fitting
from memkit.models.domain import (
    Content,
    PadRef,
    Profile,
    ProfileSpec,
    Scope,
    Scratchpad,
    SessionStub,
)
from memkit.scratchpad import resolution
from memkit.store import keys
from memkit.store.cursor import decode_cursor, encode_cursor
from memkit.store.protocol import PadState, ProfilePage


@dataclass(frozen=True)
class _Stored:
    """One item: a profile spec, a session or a scratchpad (content as JSON text)."""

    version: int
    record: Profile | SessionStub | Scratchpad
    expires_at: int | None = None
    content_json: str | None = None


def _iso(epoch: float) -> str:
    return (
        datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


# DynamoStore's tables that this fake does not hold (it holds `pads` and `profiles`).
UNHELD = frozenset(
    {"sessions", "records", "curation", "expiry", "policies", "users", "reindex", "quota"}
    | {"agentcore", "table"}
)


@dataclass(frozen=True)
class _Unheld:
    """A table of DynamoStore's the fake does not hold: services may keep it, never use it."""

    name: str

    def __getattr__(self, operation: str) -> Any:
        raise NotImplementedError(f"the in-memory store holds no {self.name} ({operation})")


class InMemoryStore:
    """DynamoStore's scratchpads and profiles (the PadStore and ProfileStore protocols) in a
    dict, as its `pads` and `profiles`; its other tables are not held (a use of one fails).

    Test hooks:
    - `conflicts_before_success`: the next N `write_pad` calls fail with VersionConflict, as if
      another writer had won each race (nothing is written).
    - `before_write(state)`: called at the start of every `write_pad`, before the condition is
      checked; a test can act as a concurrent writer there (the hook is not re-entered).
    - `calls`: how many times each operation ran.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        conflicts_before_success: int = 0,
        before_write: Callable[[PadState], None] | None = None,
    ) -> None:
        self._items: dict[keys.Key, _Stored] = {}
        self._clock = clock
        self.conflicts_before_success = conflicts_before_success
        self.before_write = before_write
        self._in_hook = False
        self.calls: Counter[str] = Counter()

    @property
    def pads(self) -> InMemoryStore:
        return self

    @property
    def profiles(self) -> InMemoryStore:
        return self

    def __getattr__(self, name: str) -> Any:
        if name in UNHELD:
            return _Unheld(name)
        raise AttributeError(name)

    # -- seeding (what other APIs or DynamoDB itself would have done) ------------------------

    def put_session(
        self,
        tenant: str,
        namespace: str,
        session_id: str,
        user_id: str | None = None,
        profile: str | None = None,
        expires_at: int | None = None,
    ) -> SessionStub:
        """Create or overwrite a session (the sessions API is not in the Store protocol yet)."""
        key = keys.session_key(tenant, namespace, session_id)
        old = self._items.get(key)
        session = SessionStub(
            session_id, namespace, user_id, profile, expires_at, old.version + 1 if old else 1
        )
        self._items[key] = _Stored(session.version, session, expires_at)
        return session

    # -- reads -------------------------------------------------------------------------------

    def _live(self, stored: _Stored) -> bool:
        return stored.expires_at is None or stored.expires_at > self._clock()

    def read_pad(self, ref: PadRef) -> PadState:
        self.calls["read_pad"] += 1
        owner = ref.owner
        tenant, namespace = owner.tenant, owner.namespace

        session_item = (
            self._items.get(keys.session_key(tenant, namespace, ref.session_id))
            if ref.session_id
            else None
        )
        session = session_item.record if session_item and self._live(session_item) else None
        assert session is None or isinstance(session, SessionStub)
        name, user_id = resolution.session_choices(ref, session)
        lenient = session is not None and bool(session.profile) and ref.profile is None
        stored = {
            (space, one): self._profile(tenant, space, one)
            for space, one in resolution.profile_candidates(namespace, name, lenient)
        }
        profile = resolution.effective_profile(namespace, name, stored, lenient)
        resolution.require_owner(ref, profile, user_id)
        pad_key = keys.pad_key(
            tenant, namespace, profile.scope is Scope.USER, ref.session_id, user_id, profile.name
        )

        pad_item = self._items.get(pad_key)
        disk_versions: dict[str, int] = {}
        if pad_item is not None:
            disk_versions["pad"] = pad_item.version
        if session_item is not None:
            disk_versions["session"] = session_item.version
        return PadState(
            ref=ref,
            profile=profile,
            scope=profile.scope,
            user_id=user_id,
            session=session,
            pad=self._pad(pad_item) if pad_item and self._live(pad_item) else None,
            disk_versions=disk_versions,
        )

    @staticmethod
    def _pad(stored: _Stored) -> Scratchpad:
        assert isinstance(stored.record, Scratchpad)
        content = None if stored.content_json is None else json.loads(stored.content_json)
        return replace(stored.record, content=content)

    # -- writes ------------------------------------------------------------------------------

    def _check(self, key: keys.Key, expected: int | None, what: str) -> None:
        """PynamoDB's version condition: absent when never read, else at the version read."""
        current = self._items.get(key)
        if (current.version if current else None) != expected:
            raise VersionConflict(f"write {what}: the item changed since it was read")

    def write_pad(self, state: PadState, content: Content, tokens: int) -> Scratchpad:
        self.calls["write_pad"] += 1
        if self.before_write is not None and not self._in_hook:
            self._in_hook = True
            try:
                self.before_write(state)
            finally:
                self._in_hook = False
        if self.conflicts_before_success > 0:
            self.conflicts_before_success -= 1
            raise VersionConflict("write scratchpad: the item changed since it was read")

        ref, owner = state.ref, state.ref.owner
        tenant, namespace, name = owner.tenant, owner.namespace, state.profile.name
        now = _iso(self._clock())
        user_scoped = state.scope is Scope.USER
        pad_key = keys.pad_key(tenant, namespace, user_scoped, ref.session_id, state.user_id, name)
        expires_at = state.session.expires_at if state.session and not user_scoped else None
        creates_session = ref.session_id is not None and state.session is None

        # Both conditions hold or nothing is written (one TransactWriteItems in DynamoDB).
        self._check(pad_key, state.disk_versions.get("pad"), "scratchpad")
        if creates_session:
            assert ref.session_id is not None
            session_key = keys.session_key(tenant, namespace, ref.session_id)
            self._check(session_key, state.disk_versions.get("session"), "session")
            version = state.disk_versions.get("session", 0) + 1
            session = SessionStub(
                ref.session_id, namespace, owner.user_id, ref.profile, None, version
            )
            self._items[session_key] = _Stored(version, session)

        pad = Scratchpad(
            profile=name,
            scope=state.scope,
            format=state.profile.pad_format,
            content=None,
            version=state.disk_versions.get("pad", 0) + 1,
            tokens=tokens,
            created_at=state.pad.created_at if state.pad and state.pad.created_at else now,
            updated_at=now,
            expires_at=expires_at,
        )
        text = None if content is None else json.dumps(content, ensure_ascii=False)
        self._items[pad_key] = _Stored(pad.version, pad, expires_at, text)
        return self._pad(self._items[pad_key])

    # -- profiles ----------------------------------------------------------------------------

    def get_profile(self, tenant: str, namespace: str, name: str) -> Profile | None:
        self.calls["get_profile"] += 1
        return self._profile(tenant, namespace, name)

    def _profile(self, tenant: str, namespace: str, name: str) -> Profile | None:
        stored = self._items.get(keys.profile_key(tenant, namespace, name))
        if stored is None:
            return None
        assert isinstance(stored.record, Profile)
        return stored.record

    def put_profile(
        self,
        tenant: str,
        namespace: str,
        name: str,
        spec: ProfileSpec,
        expected_version: int | None,
    ) -> Profile:
        self.calls["put_profile"] += 1
        key = keys.profile_key(tenant, namespace, name)
        current = self._items.get(key)
        version = current.version if current else 0
        if expected_version is not None and version != expected_version:
            raise VersionConflict(f"profile {name!r} is not at version {expected_version}")
        # Through JSON, as DynamoStore stores it: the same defaults and aliases come back.
        fields = json.loads(spec.model_dump_json(by_alias=True))
        profile = Profile.model_validate(
            {**fields, "name": name, "version": version + 1, "updated_at": _iso(self._clock())}
        )
        self._items[key] = _Stored(profile.version, profile)
        return profile

    def delete_profile(
        self, tenant: str, namespace: str, name: str, expected_version: int | None
    ) -> bool:
        self.calls["delete_profile"] += 1
        key = keys.profile_key(tenant, namespace, name)
        current = self._items.get(key)
        if current is None:
            return False
        if expected_version is not None and current.version != expected_version:
            raise VersionConflict("delete profile: the item changed since it was read")
        del self._items[key]
        return True

    def list_profiles(
        self, tenant: str, namespace: str, limit: int, cursor: str | None
    ) -> ProfilePage:
        """Profiles in key order; like a DynamoDB Query, a full page always carries a cursor."""
        self.calls["list_profiles"] += 1
        pk = keys.profiles_pk(tenant, namespace)
        start = decode_cursor(cursor, pk)
        after = (start or {}).get("SK", {}).get("S", "")
        in_partition = [(sk, item) for (p, sk), item in self._items.items() if p == pk]
        page = sorted((row for row in in_partition if row[0] > after), key=lambda row: row[0])
        page = page[:limit]
        full = len(page) == limit
        kept = fitting(
            envelope_bytes(item.record.model_dump(mode="json")) + 300 for _, item in page
        )
        page, full = page[:kept], full or kept < len(page)
        profiles = [item.record for _, item in page if isinstance(item.record, Profile)]
        last = {"PK": {"S": pk}, "SK": {"S": page[-1][0]}} if full else None
        return ProfilePage(profiles, encode_cursor(last))
