"""Scratchpads on DynamoDB: a session's (with its session, and its life) or a user's, and the
profile that governs each (keys.py; how one is resolved is memkit.scratchpad.resolution)."""

from __future__ import annotations

import json

from pynamodb.transactions import TransactWrite

from memkit.models.domain import DEFAULT_PROFILE, Content, PadRef, Scope, Scratchpad
from memkit.store import keys
from memkit.store.base import Table
from memkit.store.failures import translated
from memkit.store.protocol import PadState
from memkit.store.sessions import SessionTable
from memkit.times import now_iso


class PadTable:
    """Scratchpad reads and writes; a write to a session that does not exist yet creates it
    (in one transaction with the scratchpad)."""

    def __init__(self, table: Table, sessions: SessionTable) -> None:
        self._table = table
        self._items = table.items
        self._clock = table.clock
        self._sessions = sessions

    # -- reads -------------------------------------------------------------------------------

    def read_pad(self, ref: PadRef) -> PadState:
        owner = ref.owner
        first = self._table.pad_keys(ref, ref.profile or DEFAULT_PROFILE, owner.user_id)
        if ref.session_id:
            first.append(keys.session_key(owner.tenant, owner.namespace, ref.session_id))
        found = self._table.batch_get(first)
        session_item = (
            found.get(keys.session_key(owner.tenant, owner.namespace, ref.session_id))
            if ref.session_id
            else None
        )
        return self._table.resolve_pad(ref, session_item, found, set(first))

    # -- writes ------------------------------------------------------------------------------

    def write_pad(self, state: PadState, content: Content, tokens: int) -> Scratchpad:
        ref, owner = state.ref, state.ref.owner
        tenant, namespace = owner.tenant, owner.namespace
        name = state.profile.name
        now = now_iso(self._clock())
        user_scoped = state.scope is Scope.USER
        pk, sk = keys.pad_key(tenant, namespace, user_scoped, ref.session_id, state.user_id, name)
        # A session's scratchpad lives and expires with the session (and its other items).
        session = state.session
        expires_at = None
        if session is not None and not user_scoped:
            expires_at = session.children_expire_at or session.expires_at
        session_item = None
        if ref.session_id and session is None:
            meta = self._sessions.new_session_meta(owner, ref.session_id, ref.profile)
            session_item = self._sessions.session_item(owner.tenant, meta)
            if "session" in state.disk_versions:
                session_item.version = state.disk_versions["session"]
        created_at = state.pad.created_at if state.pad and state.pad.created_at else now
        item = self._items.scratchpad(
            pk,
            sk,
            tenant=tenant,
            namespace=namespace,
            created_at=created_at,
            updated_at=now,
            expires_at=expires_at,
            profile=name,
            scope=state.scope.value,
            format=state.profile.pad_format.value,
            content=None if content is None else json.dumps(content, ensure_ascii=False),
            tokens=tokens,
            session_id=ref.session_id if state.scope is Scope.SESSION else None,
            user_id=state.user_id,
        )
        if state.scope is Scope.SESSION:
            item.gen = (session or self._table.to_session(session_item)).gen
        if "pad" in state.disk_versions:
            item.version = state.disk_versions["pad"]
        if session_item is not None:
            with (
                translated("write scratchpad"),
                TransactWrite(connection=self._items.connection) as transaction,
            ):
                transaction.save(session_item)
                transaction.save(item)
        else:
            with translated("write scratchpad"):
                item.save()
        return self._table.to_pad(item)
