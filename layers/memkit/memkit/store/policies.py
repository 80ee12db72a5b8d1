"""The namespaces' lifecycle policies (forgetting and compaction rules), each listed under one
GSI3 partition so that the scheduled run finds every tenant's policies with Queries, never a
Scan.

    lifecycle policy   PK T#<tenant>#LIFECYCLE#<namespace>  SK POLICY
                       GSI3PK POLICIES                      GSI3SK <tenant>#<namespace>
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memkit.models.lifecycle import LifecyclePolicy, StoredPolicy
from memkit.store import keys
from memkit.store.base import Table
from memkit.store.failures import translated

POLICY_SK = "POLICY"
POLICY_KIND = "lifecycle_policy"
POLICIES_PK = "POLICIES"
# Entries a listing Query asks for at a time (a GSI3 entry takes ~300 bytes).
PAGE_SIZE = 500


def policy_key(tenant: str, namespace: str) -> keys.Key:
    return f"T#{keys.part(tenant)}#LIFECYCLE#{keys.part(namespace)}", POLICY_SK


def policy_position(tenant: str, namespace: str) -> str:
    """A policy's GSI3SK in the POLICIES partition."""
    return keys.sort_key(f"{keys.part(tenant)}#", keys.part(namespace))


class PolicyTable:
    """Lifecycle policies: one item a namespace, conditional writes, a listing of all."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._items = table.items
        self._clock = table.clock

    # -- policies ---------------------------------------------------------------------------

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
        item = self._table.consistent_item(policy_key(tenant, namespace), "read lifecycle policy")
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
