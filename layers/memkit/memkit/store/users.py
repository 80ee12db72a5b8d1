"""Everything of one user: sessions, scratchpads, records (full deletion)."""

from __future__ import annotations

from memkit.store.curation import CurationTable


class UserTable(CurationTable):
    """Everything of one user: sessions, scratchpads, records (full deletion)."""
