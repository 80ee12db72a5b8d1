"""The Store on DynamoDB through PynamoDB. SDK errors are translated here, at the edge."""

from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DoesNotExist
from pynamodb.transactions import TransactWrite

from memkit.errors import VersionConflict
from memkit.models.budget import envelope_bytes, fitting
from memkit.models.domain import (
    DEFAULT_PROFILE,
    Content,
    PadRef,
    Profile,
    ProfileSpec,
    Scope,
    Scratchpad,
)
from memkit.store import keys
from memkit.store.agentcore import AgentCoreTable
from memkit.store.cursor import decode_cursor, encode_cursor
from memkit.store.expiry import ExpiryTable
from memkit.store.failures import translated
from memkit.store.forgetting import ForgettingTable
from memkit.store.protocol import PadState, ProfilePage
from memkit.store.quota import QuotaTable
from memkit.store.reindex import ReindexTable
from memkit.store.users import UserTable
from memkit.times import now_iso


class DynamoStore(
    ExpiryTable, ForgettingTable, UserTable, ReindexTable, QuotaTable, AgentCoreTable
):
    """memkit's single table: scratchpads and profiles here, sessions in SessionTable,
    long-term records in RecordTable, background curation's reads in CurationTable, and the
    lifecycle's in ExpiryTable, ForgettingTable, UserTable and ReindexTable (each a
    CurationTable), the request quotas in QuotaTable, AgentCore's memories and event reads in
    AgentCoreTable."""

    # -- reads -------------------------------------------------------------------------------

    def read_pad(self, ref: PadRef) -> PadState:
        owner = ref.owner
        first = self._pad_keys(ref, ref.profile or DEFAULT_PROFILE, owner.user_id)
        if ref.session_id:
            first.append(keys.session_key(owner.tenant, owner.namespace, ref.session_id))
        found = self._batch_get(first)
        session_item = (
            found.get(keys.session_key(owner.tenant, owner.namespace, ref.session_id))
            if ref.session_id
            else None
        )
        return self._resolve_pad(ref, session_item, found, set(first))

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
            meta = self.new_session_meta(owner, ref.session_id, ref.profile)
            session_item = self._session_item(owner.tenant, meta)
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
            item.gen = (session or self._to_session(session_item)).gen
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
        return self._to_pad(item)

    # -- profiles ----------------------------------------------------------------------------

    def _profile_item(self, tenant: str, namespace: str, name: str) -> Any | None:
        pk, sk = keys.profile_key(tenant, namespace, name)
        with translated("read profile"):
            try:
                return self._items.profile.get(pk, sk, consistent_read=True)
            except DoesNotExist:
                return None

    def get_profile(self, tenant: str, namespace: str, name: str) -> Profile | None:
        item = self._profile_item(tenant, namespace, name)
        return None if item is None else self._to_profile(item)

    def put_profile(
        self,
        tenant: str,
        namespace: str,
        name: str,
        spec: ProfileSpec,
        expected_version: int | None,
    ) -> Profile:
        pk, sk = keys.profile_key(tenant, namespace, name)
        now = now_iso(self._clock())
        current = self._profile_item(tenant, namespace, name)
        if expected_version is not None and (current.version if current else 0) != expected_version:
            raise VersionConflict(f"profile {name!r} is not at version {expected_version}")
        item = self._items.profile(
            pk,
            sk,
            tenant=tenant,
            namespace=namespace,
            created_at=current.created_at if current is not None else now,
            updated_at=now,
            name=name,
            spec=spec.model_dump_json(by_alias=True),
        )
        if current is not None:
            item.version = current.version
        with translated("write profile"):
            item.save()
        return self._to_profile(item)

    def delete_profile(
        self, tenant: str, namespace: str, name: str, expected_version: int | None
    ) -> bool:
        pk, sk = keys.profile_key(tenant, namespace, name)
        item_cls = self._items.profile
        condition = item_cls.pk.exists()
        if expected_version is not None:
            condition = condition & (item_cls.version == expected_version)
        try:
            with translated("delete profile"):
                item_cls(pk, sk).delete(condition=condition, add_version_condition=False)
        except VersionConflict:
            if expected_version is not None and self.get_profile(tenant, namespace, name):
                raise
            return False
        return True

    def list_profiles(
        self, tenant: str, namespace: str, limit: int, cursor: str | None
    ) -> ProfilePage:
        pk = keys.profiles_pk(tenant, namespace)
        start = decode_cursor(cursor, pk)
        with translated("list profiles"):
            results = self._items.profile.query(
                pk, limit=limit, last_evaluated_key=start, consistent_read=True
            )
            items = list(results)
            last_key = results.last_evaluated_key
        # A page stops before it outgrows what one response may hold (schemas can be large).
        kept = fitting(envelope_bytes(json.loads(item.spec)) + 300 for item in items)
        if kept < len(items):
            items, last_key = items[:kept], {"PK": {"S": pk}, "SK": {"S": items[kept - 1].sk}}
        return ProfilePage([self._to_profile(item) for item in items], encode_cursor(last_key))

    # -- conversions: items are never returned past the store --------------------------------
