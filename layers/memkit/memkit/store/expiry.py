"""Expired sessions found by the lifecycle index (GSI3), read and deleted by the cleanup run."""

from __future__ import annotations

from memkit.store.curation import CurationTable


class ExpiryTable(CurationTable):
    """Expired sessions found by the lifecycle index (GSI3), read and deleted by the cleanup run."""
