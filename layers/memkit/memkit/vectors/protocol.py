"""What indexing and search need from a vector index (OpenSearch on AWS, exact in the local
stack). The table stays the source of truth: an index can be rebuilt from it at any time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memkit.vectors.filters import Condition


@dataclass(frozen=True)
class VectorDoc:
    """One indexed record. `version` orders writes: an older version never overwrites a
    newer one (OpenSearch's external versioning). `fields` are what filters read: namespace,
    user_id, session_id, memory_type, topics, entities, and dates as epoch seconds."""

    id: str
    tenant: str
    vector: Sequence[float]
    version: int
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Removal:
    """A record gone from the table at `version` (a delete, or a TTL expiry)."""

    id: str
    tenant: str
    version: int


@dataclass(frozen=True)
class Hit:
    id: str
    score: float  # cosine similarity, 1 = the same direction

    @property
    def distance(self) -> float:
        """What AMS clients read as `dist` (cosine distance, 0 = identical)."""
        return 1.0 - self.score


class VectorIndex(Protocol):
    def upsert(self, docs: Sequence[VectorDoc]) -> None:
        """Write each doc unless the index holds the same id at a newer version."""
        ...

    def remove(self, removals: Sequence[Removal]) -> None:
        """Delete each id unless the index holds it at a newer version."""
        ...

    def search(
        self, tenant: str, vector: Sequence[float], k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The k nearest of the tenant's docs that meet every condition, nearest first."""
        ...
