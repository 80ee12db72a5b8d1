"""The local index: exact cosine search and BM25, for the local stack and the tests.

Every doc of the tenant that meets the conditions is scored (a matrix product), so results
are exact, and filters apply before ranking, as in OpenSearch's efficient k-NN filtering.
Writes follow external versioning: a write or a removal at a version older than the one
the index holds changes nothing, and a removal leaves its version behind (a tombstone) so a
replayed older write cannot bring the doc back. Versions must therefore keep growing across
a record's deletion and re-creation (the indexer uses the item's write time).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memkit.vectors.filters import Condition, meets_all
from memkit.vectors.keyword import KeywordIndex
from memkit.vectors.protocol import Failures, Hit, Removal, VectorDoc


@dataclass
class _Slot:
    tenant: str
    id: str
    fields: dict[str, Any]
    live: bool = True


class LocalVectorIndex:
    """An in-memory exact index of `dimensions`-long vectors, with BM25 over the same docs
    (memkit.vectors.keyword); thread-safe. Implements VectorIndex."""

    def __init__(self, dimensions: int) -> None:
        self._dimensions = dimensions
        self._keyword = KeywordIndex()
        self._lock = threading.Lock()
        self._matrix = np.zeros((64, dimensions), dtype=np.float32)
        self._slots: list[_Slot] = []
        self._where: dict[tuple[str, str], int] = {}
        self._versions: dict[tuple[str, str], int] = {}

    def __len__(self) -> int:
        return sum(1 for slot in self._slots if slot.live)

    def _unit(self, vector: Sequence[float]) -> np.ndarray:
        array = np.asarray(vector, dtype=np.float32)
        if array.shape != (self._dimensions,):
            raise ValueError(f"expected {self._dimensions} dimensions, got {array.shape}")
        norm = float(np.linalg.norm(array))
        return array / norm if norm > 0 else array

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def upsert(self, docs: Sequence[VectorDoc]) -> Failures:
        failures: Failures = {}
        checked: list[tuple[VectorDoc, np.ndarray]] = []
        for doc in docs:
            try:
                checked.append((doc, self._unit(doc.vector)))
            except ValueError as exc:
                failures[doc.id] = str(exc)
        with self._lock:
            for doc, vector in checked:
                key = (doc.tenant, doc.id)
                if self._versions.get(key, -1) >= doc.version:
                    continue  # a replay, or older than what the index holds
                index = self._where.get(key)
                if index is None:
                    index = len(self._slots)
                    if index == len(self._matrix):
                        grown = np.zeros((2 * len(self._matrix), self._dimensions), np.float32)
                        grown[:index] = self._matrix
                        self._matrix = grown
                    self._slots.append(_Slot(doc.tenant, doc.id, dict(doc.fields)))
                    self._where[key] = index
                else:
                    slot = self._slots[index]
                    slot.fields, slot.live = dict(doc.fields), True
                self._matrix[index] = vector
                self._versions[key] = doc.version
                self._keyword.upsert(doc.tenant, doc.id, doc.text, doc.version, doc.fields)
        return failures

    def remove(self, removals: Sequence[Removal]) -> Failures:
        self._keyword.remove(removals)
        with self._lock:
            for removal in removals:
                key = (removal.tenant, removal.id)
                if self._versions.get(key, -1) > removal.version:
                    continue  # the doc was written again after this removal
                self._versions[key] = removal.version
                index = self._where.get(key)
                if index is not None:
                    self._slots[index].live = False
        return {}

    def search(
        self, tenant: str, vector: Sequence[float], k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        if k <= 0:
            return []
        query = self._unit(vector)
        with self._lock:
            rows = [
                index
                for index, slot in enumerate(self._slots)
                if slot.live and slot.tenant == tenant and meets_all(slot.fields, conditions)
            ]
            if not rows:
                return []
            scores = self._matrix[rows] @ query
            ids = [self._slots[index].id for index in rows]
            fields = [self._slots[index].fields for index in rows]
        count = min(k, len(rows))
        best = np.argpartition(-scores, count - 1)[:count]
        ranked = sorted(best, key=lambda i: (-float(scores[i]), ids[i]))
        return [Hit(ids[i], float(scores[i]), dict(fields[i])) for i in ranked]

    def keyword(
        self, tenant: str, text: str, k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        return self._keyword.search(tenant, text, k, conditions)

    def browse(
        self, tenant: str, k: int, offset: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        if k <= 0:
            return []
        with self._lock:
            found = [
                slot
                for slot in self._slots
                if slot.live and slot.tenant == tenant and meets_all(slot.fields, conditions)
            ]
        found.sort(key=lambda slot: (-float(slot.fields.get("created_at") or 0), slot.id))
        return [Hit(slot.id, 0.0, dict(slot.fields)) for slot in found[offset : offset + k]]
