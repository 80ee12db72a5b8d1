"""Long-term records listed by namespace and user (GSI3): forgetting and compaction; and the
namespaces' lifecycle policies, each listed under one GSI3 partition so that the scheduled
run finds every tenant's policies with Queries, never a Scan.

    lifecycle policy   PK T#<tenant>#LIFECYCLE#<namespace>  SK POLICY
                       GSI3PK POLICIES                      GSI3SK <tenant>#<namespace>
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memkit.models.lifecycle import LifecyclePolicy, Listing, RecordEntry, StoredPolicy
from memkit.store import keys
from memkit.store.curation import CurationTable
from memkit.store.failures import translated

POLICY_SK = "POLICY"
POLICY_KIND = "lifecycle_policy"
POLICIES_PK = "POLICIES"
# Entries a listing Query asks for at a time (a GSI3 entry takes ~300 bytes).
PAGE_SIZE = 500
# Sorts after every character a key component holds after its prefix.
TOP = "\uffff"


def policy_key(tenant: str, namespace: str) -> keys.Key:
    return f"T#{keys.part(tenant)}#LIFECYCLE#{keys.part(namespace)}", POLICY_SK


def policy_position(tenant: str, namespace: str) -> str:
    """A policy's GSI3SK in the POLICIES partition."""
    return keys.sort_key(f"{keys.part(tenant)}#", keys.part(namespace))


class ForgettingTable(CurationTable):
    """Long-term records listed by namespace and user (GSI3): forgetting and compaction."""

    # -- records -----------------------------------------------------------------------------

    def list_records(self, listing: Listing, after: str | None = None) -> Iterator[RecordEntry]:
        """The listing's live records in index order (user, then creation time), from just
        after position `after` (None: the start), a page at a time as the caller reads on.
        Session and type filters are applied by DynamoDB (FilterExpression)."""
        if listing.memory_types is not None and not listing.memory_types:
            return  # no type allowed: nothing to list (and `IN ()` is no valid filter)
        record_cls = self._items.record
        sk = record_cls.gsi3sk
        pk = keys.records_by_namespace(listing.tenant, listing.namespace)
        if listing.one_user:
            prefix = keys.user_records_prefix(listing.user_id)
            low = after if after is not None and after > prefix else prefix
            range_condition: Any = sk.between(low, prefix + TOP)
        else:
            range_condition = sk > after if after is not None else None
        condition: Any = None
        if listing.session_id is not None:
            condition = record_cls.session_id == listing.session_id
        if listing.memory_types is not None:
            types = record_cls.memory_type.is_in(*sorted(listing.memory_types))
            condition = types if condition is None else condition & types
        with translated("list long-term memories"):
            results = record_cls.by_namespace.query(
                pk,
                range_key_condition=range_condition,
                filter_condition=condition,
                page_size=PAGE_SIZE,
            )
            for item in results:
                if item.gsi3sk == after or not self._live(item):
                    continue
                yield RecordEntry(
                    id=item.record_id,
                    user_id=item.user_id,
                    session_id=item.session_id,
                    memory_type=item.memory_type,
                    memory_hash=item.memory_hash,
                    pinned=bool(item.pinned),
                    created_at=item.created_at,
                    last_accessed=item.last_accessed or item.created_at,
                    position=item.gsi3sk,
                )

    # -- lifecycle policies ------------------------------------------------------------------

    def put_lifecycle_policy(
        self, tenant: str, namespace: str, policy: LifecyclePolicy, now: str
    ) -> StoredPolicy:
        """Create or replace the namespace's policy (one PutItem)."""
        pk, sk = policy_key(tenant, namespace)
        position = policy_position(tenant, namespace)
        with translated("write lifecycle policy"):
            self._items.connection.client.put_item(
                TableName=self._items.base.Meta.table_name,
                Item={
                    "PK": {"S": pk},
                    "SK": {"S": sk},
                    "kind": {"S": POLICY_KIND},
                    "tenant": {"S": tenant},
                    "namespace": {"S": namespace},
                    "created_at": {"S": now},
                    "updated_at": {"S": now},
                    "version": {"N": "1"},
                    "policy": {"S": policy.model_dump_json()},
                    "GSI3PK": {"S": POLICIES_PK},
                    "GSI3SK": {"S": position},
                },
            )
        return StoredPolicy(tenant, namespace, policy, now, position)

    def get_lifecycle_policy(self, tenant: str, namespace: str) -> StoredPolicy | None:
        """The namespace's policy (a consistent read), or None."""
        item = self._consistent_item(policy_key(tenant, namespace), "read lifecycle policy")
        if item is None:
            return None
        return StoredPolicy(
            tenant=tenant,
            namespace=namespace,
            policy=LifecyclePolicy.model_validate(json.loads(item["policy"]["S"])),
            updated_at=item["updated_at"]["S"],
            position=item["GSI3SK"]["S"],
        )

    def delete_lifecycle_policy(self, tenant: str, namespace: str) -> bool:
        """Delete the namespace's policy; whether there was one."""
        pk, sk = policy_key(tenant, namespace)
        with translated("delete lifecycle policy"):
            found = self._items.connection.client.delete_item(
                TableName=self._items.base.Meta.table_name,
                Key={"PK": {"S": pk}, "SK": {"S": sk}},
                ReturnValues="ALL_OLD",
            )
        return "Attributes" in found

    def lifecycle_policies(self, start: str | None = None) -> Iterator[tuple[str, str, str]]:
        """Every tenant's policies as (tenant, namespace, position), in position order from
        `start` (inclusive; None: the first), a page at a time (GSI3, the POLICIES partition)."""
        client = self._items.connection.client
        request: dict[str, Any] = {
            "TableName": self._items.base.Meta.table_name,
            "IndexName": "GSI3",
            "KeyConditionExpression": "GSI3PK = :pk"
            + (" AND GSI3SK >= :start" if start is not None else ""),
            "ExpressionAttributeValues": {":pk": {"S": POLICIES_PK}}
            | ({":start": {"S": start}} if start is not None else {}),
            "Limit": PAGE_SIZE,
        }
        while True:
            with translated("list lifecycle policies"):
                page = client.query(**request)
            for item in page.get("Items", []):
                yield item["tenant"]["S"], item["namespace"]["S"], item["GSI3SK"]["S"]
            last = page.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last
