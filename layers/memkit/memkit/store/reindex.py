"""What the vector index is rebuilt from, read from the table in pages."""

from __future__ import annotations

from memkit.store.curation import CurationTable


class ReindexTable(CurationTable):
    """What the vector index is rebuilt from, read from the table in pages."""
