"""PynamoDB item classes, bound to a table at run time (never at import).

One table, one base class with a `kind` discriminator; each kind is a subclass. The base
carries what every item has: keys, version (optimistic locking), timestamps and `expires_at`
(the TTL attribute). Content and specs are stored as JSON strings so floats and empty values
round-trip exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from pynamodb.attributes import (
    DiscriminatorAttribute,
    NumberAttribute,
    UnicodeAttribute,
    VersionAttribute,
)
from pynamodb.connection import Connection
from pynamodb.models import Model


@dataclass(frozen=True)
class ItemClasses:
    """The item classes bound to one table, and the connection they share."""

    base: Any
    profile: Any
    session: Any
    scratchpad: Any
    # For TransactWrite: the same botocore client, timeouts and retries as the items.
    connection: Connection


@lru_cache(maxsize=8)
def bind_items(
    table_name: str,
    region: str,
    host: str | None,
    connect_timeout_seconds: float,
    read_timeout_seconds: float,
    max_retry_attempts: int,
) -> ItemClasses:
    """Item classes bound to `table_name` (cached: one set of classes per table)."""
    meta = {
        "table_name": table_name,
        "region": region,
        "host": host,
        "connect_timeout_seconds": connect_timeout_seconds,
        "read_timeout_seconds": read_timeout_seconds,
        "max_retry_attempts": max_retry_attempts,
    }

    class TableItem(Model):
        Meta = cast(Any, type("Meta", (), meta))  # PynamoDB reads these as class attributes

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK")
        kind = DiscriminatorAttribute(attr_name="kind")
        version = VersionAttribute()
        tenant = UnicodeAttribute()
        namespace = UnicodeAttribute()
        created_at = UnicodeAttribute()
        updated_at = UnicodeAttribute()
        expires_at = NumberAttribute(null=True)

    class ProfileItem(TableItem, discriminator="profile"):
        name = UnicodeAttribute()
        spec = UnicodeAttribute()

    class SessionItem(TableItem, discriminator="session"):
        session_id = UnicodeAttribute()
        user_id = UnicodeAttribute(null=True)
        profile = UnicodeAttribute(null=True)

    class ScratchpadItem(TableItem, discriminator="scratchpad"):
        profile = UnicodeAttribute()
        scope = UnicodeAttribute()
        format = UnicodeAttribute()
        content = UnicodeAttribute(null=True)
        tokens = NumberAttribute(default=0)
        session_id = UnicodeAttribute(null=True)
        user_id = UnicodeAttribute(null=True)

    # Connect the base class first: PynamoDB gives each subclass that connects before its base
    # a connection of its own, and each connection builds a botocore client (~60 ms).
    connection = TableItem._get_connection().connection
    return ItemClasses(TableItem, ProfileItem, SessionItem, ScratchpadItem, connection)
