"""What background curation reads and writes of a session: its meta item, the messages in its
view, those not yet extracted, and the marks it leaves (keys.py, docs/design-sessions.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any

from memkit.errors import VersionConflict
from memkit.models.domain import Owner, SessionMeta, StoredMessage
from memkit.store import keys
from memkit.store.base import Table
from memkit.store.failures import translated
from memkit.store.protocol import SessionChange
from memkit.store.records import WORKERS
from memkit.store.sessions import SessionTable, to_message

PAGE_SIZE = 200


class CurationTable:
    """Session reads and writes for the memory worker; items never leave this class."""

    def __init__(self, table: Table, sessions: SessionTable) -> None:
        self._table = table
        self._items = table.items
        self._sessions = sessions

    def _ordered(self, owner: Owner, meta: SessionMeta, since: str | None) -> Iterator[Any]:
        """This life's messages from LSI1 key `since` (all when None), oldest first."""
        pk = keys.session_pk(owner.tenant, meta.namespace, meta.session_id)
        order = self._items.base.order
        start = since or keys.ORDER_PREFIX
        results = self._items.base.by_order.query(
            pk,
            range_key_condition=order.between(start, keys.ORDER_PREFIX + "\uffff"),
            consistent_read=True,
            page_size=PAGE_SIZE,
        )
        return (item for item in results if self._sessions.belongs(item, meta))

    def view_messages(self, owner: Owner, meta: SessionMeta) -> list[StoredMessage]:
        """The messages the document shows (from `view_from` on), oldest first."""
        with translated("read session"):
            return [to_message(item) for item in self._ordered(owner, meta, meta.view_from)]

    def first_messages(self, owner: Owner, meta: SessionMeta, count: int) -> list[StoredMessage]:
        with translated("read session"):
            return [to_message(i) for i in islice(self._ordered(owner, meta, None), count)]

    def unextracted_messages(
        self, owner: Owner, meta: SessionMeta, limit: int
    ) -> list[StoredMessage]:
        """Up to `limit` of the log's messages not yet read for memories, oldest first."""
        with translated("read session"):
            found = (i for i in self._ordered(owner, meta, None) if (i.extracted or "f") != "t")
            return [to_message(item) for item in islice(found, limit)]

    def mark_extracted(self, owner: Owner, meta: SessionMeta, message_ids: Sequence[str]) -> None:
        """Mark messages read for memories (each an UpdateItem on an existing message)."""
        client = self._items.connection.client
        table = self._items.base.Meta.table_name

        def mark(message_id: str) -> None:
            pk, sk = keys.message_key(owner.tenant, meta.namespace, meta.session_id, message_id)
            try:
                with translated("mark extracted"):
                    client.update_item(
                        TableName=table,
                        Key={"PK": {"S": pk}, "SK": {"S": sk}},
                        UpdateExpression="SET extracted = :t",
                        ConditionExpression="attribute_exists(PK)",
                        ExpressionAttributeValues={":t": {"S": "t"}},
                    )
            except VersionConflict:
                pass  # deleted meanwhile

        if not message_ids:
            return
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(message_ids))) as pool:
            list(pool.map(mark, message_ids))

    def save_meta(self, owner: Owner, meta: SessionMeta) -> SessionMeta:
        """Write the meta item alone, if it is still at `meta.version` (else VersionConflict)."""
        return self._sessions.commit_session(SessionChange(owner=owner, meta=meta))
