"""API keys in the table: one item the authorizer finds a key by, one a tenant lists it by.

    key, by its hash   PK APIKEY#<sha256 of the key, hex>  SK APIKEY      (kind api_key)
    key, by tenant     PK T#<tenant>#APIKEYS                SK K#<key_id>  (kind api_key_listing)

The authorizer knows only the key a request presents, not its tenant, so the item it reads
is keyed by the key's hash alone: one consistent GetItem, whatever the number of keys or
tenants. That partition belongs to no tenant (like the cleanup cursors): no tenant's Query,
listing or deletion reaches it, and reading it needs the key itself. Listing and revoking
go through the tenant's own partition, which also holds the hash of each key (to revoke
it) and keeps a revoked or expired key's record for RETENTION_SECONDS, then TTL removes it.

Both items are written in one transaction and never change after, except `last_used` (on
the hash item, written by the authorizer at most every so often) and a revocation, which
deletes the hash item (the key then matches nothing) and marks the listing item, in one
transaction. Neither item has a GSI key, and their kinds are none of the item classes', so
the stream's readers, the lifecycle index and a reindex pass them by.

Only botocore is imported here (not PynamoDB's item classes, nor the models): the
authorizer's cold start pays for this module and no more.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from memkit.config import StoreSettings
from memkit.errors import VersionConflict
from memkit.models.api_keys import ApiKey, UserKeysRevoked
from memkit.store import keys
from memkit.store.failures import translated

LOOKUP_PREFIX = "APIKEY#"
LOOKUP_SK = "APIKEY"
LOOKUP_KIND = "api_key"
LISTING_KIND = "api_key_listing"
# A revoked or expired key's record stays listed this long, then the table's TTL removes it.
RETENTION_SECONDS = 30 * 86_400
BATCH_GET_LIMIT = 100
# A revocation that loses a race to another writer of the key's items reads and tries again.
REVOKE_ATTEMPTS = 5
_HASH = re.compile(r"[0-9a-f]{64}")


def lookup_key(key_hash: str) -> keys.Key:
    """The hash item's key (`key_hash`: the SHA-256 of the key, lowercase hex)."""
    if not _HASH.fullmatch(key_hash):
        raise ValueError("a key hash is 64 lowercase hex digits")
    return f"{LOOKUP_PREFIX}{key_hash}", LOOKUP_SK


def listing_pk(tenant: str) -> str:
    return f"T#{keys.part(tenant)}#APIKEYS"


def listing_key(tenant: str, key_id: str) -> keys.Key:
    return listing_pk(tenant), f"K#{keys.part(key_id)}"


def _key(pair: keys.Key) -> dict[str, Any]:
    return {"PK": {"S": pair[0]}, "SK": {"S": pair[1]}}


def _grant(key: ApiKey) -> dict[str, Any]:
    """What both items say of the key: who it acts for and what it may do."""
    item: dict[str, Any] = {
        "tenant": {"S": key.tenant},
        "key_id": {"S": key.key_id},
        "scopes": {"L": [{"S": scope} for scope in key.scopes]},
        "created_at": {"S": key.created_at},
    }
    if key.user_id is not None:
        item["user_id"] = {"S": key.user_id}
    return item


def _text(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    return None if value is None else str(value["S"])


def _number(item: dict[str, Any], name: str) -> int | None:
    value = item.get(name)
    return None if value is None else int(value["N"])


def _to_key(item: dict[str, Any], expires_at: str = "expires_at") -> ApiKey:
    return ApiKey(
        key_id=item["key_id"]["S"],
        tenant=item["tenant"]["S"],
        scopes=tuple(scope["S"] for scope in item["scopes"]["L"]),
        user_id=_text(item, "user_id"),
        created_at=item["created_at"]["S"],
        name=_text(item, "name") or "",
        expires_at=_number(item, expires_at),
        last_used=_text(item, "last_used"),
        revoked_at=_text(item, "revoked_at"),
    )


def _retained(item: dict[str, Any], now: float) -> bool:
    forget_at = _number(item, "expires_at")
    return forget_at is None or forget_at > now


class ApiKeyTable:
    """API-key items of memkit's table, over a botocore DynamoDB client."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def add(self, key: ApiKey, key_hash: str) -> None:
        """Store a new key: both items, or neither (VersionConflict when its hash or its id
        is taken already)."""
        lookup: dict[str, Any] = {
            **_key(lookup_key(key_hash)),
            "kind": {"S": LOOKUP_KIND},
            **_grant(key),
        }
        listing: dict[str, Any] = {
            **_key(listing_key(key.tenant, key.key_id)),
            "kind": {"S": LISTING_KIND},
            **_grant(key),
            "name": {"S": key.name},
            "key_hash": {"S": key_hash},
        }
        if key.expires_at is not None:
            # The hash item goes with the key (TTL); the record stays listed a while longer.
            lookup["expires_at"] = {"N": str(key.expires_at)}
            listing["key_expires_at"] = {"N": str(key.expires_at)}
            listing["expires_at"] = {"N": str(key.expires_at + RETENTION_SECONDS)}
        new = "attribute_not_exists(PK)"
        with translated("create api key"):
            self._client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": new}}
                    for item in (lookup, listing)
                ]
            )

    def find(self, key_hash: str) -> ApiKey | None:
        """The key whose hash this is (a consistent read: a key works the moment it is
        created), or None. Expiry is the caller's to check (TTL deletes late)."""
        with translated("read api key"):
            response = self._client.get_item(
                TableName=self._table, Key=_key(lookup_key(key_hash)), ConsistentRead=True
            )
        item = response.get("Item")
        return None if item is None else _to_key(item)

    def record_use(self, key_hash: str, used_at: str, stale_before: str) -> bool:
        """Set the key's `last_used` to `used_at` if it is unset or older than `stale_before`
        (ISO 8601 strings order as times); whether it was written. A revoked key's item is
        gone and is not written back."""
        try:
            with translated("record api key use"):
                self._client.update_item(
                    TableName=self._table,
                    Key=_key(lookup_key(key_hash)),
                    UpdateExpression="SET last_used = :used",
                    ConditionExpression=(
                        "attribute_exists(PK) AND "
                        "(attribute_not_exists(last_used) OR last_used < :stale)"
                    ),
                    ExpressionAttributeValues={
                        ":used": {"S": used_at},
                        ":stale": {"S": stale_before},
                    },
                )
        except VersionConflict:
            return False  # another request wrote it first, or the key was revoked meanwhile
        return True

    def get(self, tenant: str, key_id: str) -> ApiKey | None:
        """The tenant's record of the key (revoked or expired ones too), or None."""
        item = self._listing_item(tenant, key_id)
        return None if item is None else _to_key(item, "key_expires_at")

    def keys_of(self, tenant: str, now: float) -> list[ApiKey]:
        """The tenant's keys by id, revoked and expired ones within their retention too,
        each with its `last_used`."""
        # Past its retention, a record is hidden before TTL deletes it (days late).
        listed = [item for item in self._listing(tenant) if _retained(item, now)]
        used = self._last_used([item["key_hash"]["S"] for item in listed])
        found = []
        for item in listed:
            key = _to_key(item, "key_expires_at")
            last_used = used.get(item["key_hash"]["S"], key.last_used)
            found.append(replace(key, last_used=last_used))
        return found

    def revoke(self, tenant: str, key_id: str, revoked_at: str, now: float) -> ApiKey | None:
        """Revoke the tenant's key: its hash item is deleted (the key matches nothing from
        then on) and its record marked, in one transaction. Returns the record (as it was,
        if it was revoked already), or None when the tenant has no such key."""
        for _ in range(REVOKE_ATTEMPTS):
            found = self._listing_item(tenant, key_id)
            if found is None:
                return None
            record = _to_key(found, "key_expires_at")
            if record.revoked_at is not None:
                return record
            key_hash = found["key_hash"]["S"]
            last_used = self._last_used([key_hash]).get(key_hash, record.last_used)
            try:
                self._revoke(tenant, key_id, key_hash, revoked_at, now, last_used)
            except VersionConflict:
                # Revoked by another caller, or the authorizer wrote the key's last use at
                # that moment (a transaction conflict): read again, and go on if it is live.
                continue
            return replace(record, revoked_at=revoked_at, last_used=last_used)
        raise VersionConflict("revoke api key: the key kept changing; try again")

    def revoke_keys_of(
        self, tenant: str, user_id: str, revoked_at: str, now: float
    ) -> UserKeysRevoked:
        """Revoke every key of the tenant that acts as `user_id` and is not revoked yet (a
        user's deletion), each as `revoke` does and each on its own: a key that keeps
        changing under every attempt stays live and is counted as failed (the caller's next
        pass tries it again), and the others are revoked all the same."""
        revoked = failed = 0
        latest: str | None = None
        for item in list(self._listing(tenant)):
            if _text(item, "user_id") != user_id:
                continue
            stamp = _text(item, "revoked_at")
            if stamp is None:
                try:
                    key = self.revoke(tenant, item["key_id"]["S"], revoked_at, now)
                except VersionConflict:
                    failed += 1
                    continue
                if key is None or key.revoked_at is None:  # gone meanwhile (its TTL)
                    continue
                revoked += key.revoked_at == revoked_at
                stamp = key.revoked_at
            latest = stamp if latest is None else max(latest, stamp)
        return UserKeysRevoked(revoked, failed, latest)

    def _revoke(
        self,
        tenant: str,
        key_id: str,
        key_hash: str,
        revoked_at: str,
        now: float,
        last_used: str | None,
    ) -> None:
        values: dict[str, Any] = {
            ":at": {"S": revoked_at},
            ":forget": {"N": str(int(now) + RETENTION_SECONDS)},
        }
        update = "SET revoked_at = :at, expires_at = :forget"
        if last_used is not None:  # kept with the record: the hash item goes
            values[":used"] = {"S": last_used}
            update += ", last_used = :used"
        with translated("revoke api key"):
            self._client.transact_write_items(
                TransactItems=[
                    {"Delete": {"TableName": self._table, "Key": _key(lookup_key(key_hash))}},
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": _key(listing_key(tenant, key_id)),
                            "UpdateExpression": update,
                            "ConditionExpression": (
                                "attribute_exists(PK) AND attribute_not_exists(revoked_at)"
                            ),
                            "ExpressionAttributeValues": values,
                        }
                    },
                ]
            )

    # -- reads -------------------------------------------------------------------------------

    def _listing_item(self, tenant: str, key_id: str) -> dict[str, Any] | None:
        with translated("read api key"):
            response = self._client.get_item(
                TableName=self._table, Key=_key(listing_key(tenant, key_id)), ConsistentRead=True
            )
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _listing(self, tenant: str) -> Iterator[dict[str, Any]]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": listing_pk(tenant)}},
            "ConsistentRead": True,
        }
        with translated("list api keys"):
            while True:
                page = self._client.query(**request)
                yield from page.get("Items", [])
                if "LastEvaluatedKey" not in page:
                    return
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _last_used(self, hashes: Sequence[str]) -> dict[str, str]:
        """Hash -> `last_used` of those keys' hash items that have one."""
        found: dict[str, str] = {}
        wanted = [_key(lookup_key(key_hash)) for key_hash in dict.fromkeys(hashes)]
        with translated("read api keys"):
            for start in range(0, len(wanted), BATCH_GET_LIMIT):
                pending: dict[str, Any] = {
                    self._table: {
                        "Keys": wanted[start : start + BATCH_GET_LIMIT],
                        "ProjectionExpression": "PK, last_used",
                    }
                }
                while pending:
                    response = self._client.batch_get_item(RequestItems=pending)
                    for item in response.get("Responses", {}).get(self._table, []):
                        if "last_used" in item:
                            key_hash = item["PK"]["S"].removeprefix(LOOKUP_PREFIX)
                            found[key_hash] = item["last_used"]["S"]
                    pending = response.get("UnprocessedKeys") or {}
        return found


def api_key_table(settings: StoreSettings) -> ApiKeyTable:
    """The table of `settings`, over a botocore client with its timeouts and retries (no
    boto3, no PynamoDB: the authorizer's cold start is the client alone)."""
    from botocore.config import Config
    from botocore.session import get_session

    client = get_session().create_client(
        "dynamodb",
        region_name=settings.region,
        endpoint_url=settings.dynamodb_endpoint,
        config=Config(
            connect_timeout=settings.connect_timeout_seconds,
            read_timeout=settings.read_timeout_seconds,
            retries={"total_max_attempts": 1 + settings.max_retry_attempts, "mode": "standard"},
        ),
    )
    return ApiKeyTable(client, settings.table_name)
