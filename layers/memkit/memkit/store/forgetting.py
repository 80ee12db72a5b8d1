"""Long-term records listed by namespace and user (GSI3): forgetting and compaction."""

from __future__ import annotations

from memkit.store.curation import CurationTable


class ForgettingTable(CurationTable):
    """Long-term records listed by namespace and user (GSI3): forgetting and compaction."""
