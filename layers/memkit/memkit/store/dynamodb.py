"""The Store on DynamoDB through PynamoDB: one table, read and written through the tables
composed here, each over the shared `Table` (base.py). SDK errors are translated in each, at
the edge; items never leave them."""

from __future__ import annotations

import time
from collections.abc import Callable

from memkit.config import StoreSettings
from memkit.store.base import Table
from memkit.store.curation import CurationTable
from memkit.store.expiry import ExpiryTable
from memkit.store.pads import PadTable
from memkit.store.policies import PolicyTable
from memkit.store.profiles import ProfileTable
from memkit.store.quota import QuotaTable
from memkit.store.records import RecordTable
from memkit.store.reindex import ReindexTable
from memkit.store.sessions import SessionTable
from memkit.store.users import UserTable


class DynamoStore:
    """memkit's single table as the parts that use it see it: sessions and their messages,
    long-term records, scratchpads, profiles, background curation's reads and marks, the
    lifecycle's (expiry, namespace policies, a user's deletion, the index rebuild) and
    quotas. Jobs and services take the tables they use; a wing composes its own over the
    shared `table` (memkit.agentcore.table)."""

    def __init__(
        self,
        settings: StoreSettings,
        clock: Callable[[], float] = time.time,
        index_messages: bool = False,
        index_all_messages: bool = False,
    ) -> None:
        self.table = Table(settings, clock, index_messages, index_all_messages)
        self.sessions = SessionTable(self.table)
        self.records = RecordTable(self.table)
        self.pads = PadTable(self.table, self.sessions)
        self.profiles = ProfileTable(self.table)
        self.curation = CurationTable(self.table, self.sessions)
        self.expiry = ExpiryTable(self.table)
        self.policies = PolicyTable(self.table)
        self.users = UserTable(self.table)
        self.reindex = ReindexTable(self.table)
        self.quota = QuotaTable(self.table)

    def reachable(self) -> None:
        """One eventually consistent read of a key no item has (the health check)."""
        self.table.reachable()
