"""Per-tenant request quotas: one counter item per tenant and minute.

A request adds one to its tenant's counter for the current minute, in one conditional
UpdateItem that refuses to pass the limit; the counter expires (TTL) two minutes after its
minute ends. The cost: one write request unit per request counted (on-demand), and the
request's latency gains one DynamoDB round trip. A tenant's counter is one partition, which
takes up to 1,000 writes a second: far above any limit this is for.
"""

from __future__ import annotations

from memkit.errors import VersionConflict
from memkit.store import keys
from memkit.store.base import Table
from memkit.store.failures import translated

# How long a minute's counter is kept after its minute ends (TTL), for an operator to read.
KEEP_SECONDS = 120


class QuotaTable:
    """Request counters (the API's per-tenant quota)."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._items = table.items
        self._clock = table.clock

    def take_request(self, tenant: str, limit: int) -> float | None:
        """Count one request of `tenant` in the current minute: None while within `limit`,
        else the seconds until the next minute (nothing is counted then)."""
        now = self._clock()
        minute = int(now // 60)
        pk, sk = keys.quota_key(tenant, minute)
        client = self._items.connection.client
        try:
            with translated("count request"):
                client.update_item(
                    TableName=self._items.base.Meta.table_name,
                    Key={"PK": {"S": pk}, "SK": {"S": sk}},
                    UpdateExpression="ADD #n :one SET #e = if_not_exists(#e, :expires)",
                    ConditionExpression="attribute_not_exists(#n) OR #n < :limit",
                    ExpressionAttributeNames={"#n": "requests", "#e": "expires_at"},
                    ExpressionAttributeValues={
                        ":one": {"N": "1"},
                        ":limit": {"N": str(limit)},
                        ":expires": {"N": str((minute + 1) * 60 + KEEP_SECONDS)},
                    },
                )
        except VersionConflict:  # the condition failed: the minute's requests are spent
            return (minute + 1) * 60 - now
        return None
