"""Profiles on DynamoDB: how a namespace's scratchpads behave, one item a profile (keys.py)."""

from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DoesNotExist

from memkit.errors import VersionConflict
from memkit.models.budget import envelope_bytes, fitting
from memkit.models.domain import Profile, ProfileSpec
from memkit.store import keys
from memkit.store.base import Table
from memkit.store.cursor import decode_cursor, encode_cursor
from memkit.store.failures import translated
from memkit.store.protocol import ProfilePage
from memkit.times import now_iso


class ProfileTable:
    """Profile reads and writes, each conditional on the version read."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._items = table.items
        self._clock = table.clock

    def _profile_item(self, tenant: str, namespace: str, name: str) -> Any | None:
        pk, sk = keys.profile_key(tenant, namespace, name)
        with translated("read profile"):
            try:
                return self._items.profile.get(pk, sk, consistent_read=True)
            except DoesNotExist:
                return None

    def get_profile(self, tenant: str, namespace: str, name: str) -> Profile | None:
        item = self._profile_item(tenant, namespace, name)
        return None if item is None else self._table.to_profile(item)

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
        return self._table.to_profile(item)

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
        return ProfilePage(
            [self._table.to_profile(item) for item in items], encode_cursor(last_key)
        )
