"""The local index: exact cosine search and BM25, for the local stack and the tests.

Every doc of the tenant that meets the conditions is scored (a matrix product), so results
are exact, and filters apply before ranking, as in OpenSearch's efficient k-NN filtering.
Writes follow external versioning: a write or a removal at a version older than the one
the index holds changes nothing, and a removal leaves its version behind (a tombstone) so a
replayed older write cannot bring the doc back. Versions must therefore keep growing across
a record's deletion and re-creation (the indexer uses the item's write time).

A rebuild fills a new instance while this one keeps answering, then the switch moves the new
one's state into this instance under its lock: every holder of this object (the API, the
indexer) sees the rebuilt index at once, as an OpenSearch alias switch does.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memkit.errors import Misconfigured
from memkit.vectors.filters import Condition, meets_all
from memkit.vectors.keyword import KeywordIndex, weighted_search
from memkit.vectors.protocol import CONTEXT_WEIGHT, Failures, Hit, Removal, Sampled, VectorDoc

POSTED_FIELDS = ("namespace", "user_id", "session_id", "memory_type", "topics", "entities")


def _values(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


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
        self._context = KeywordIndex()
        self._lock = threading.Lock()
        self._matrix = np.zeros((64, dimensions), dtype=np.float32)
        self._slots: list[_Slot] = []
        self._where: dict[tuple[str, str], int] = {}
        self._versions: dict[tuple[str, str], int] = {}
        # Per row: live or removed, and the tenant as a small code (vectorised masks).
        self._live = np.zeros(64, dtype=bool)
        self._tenants = np.zeros(64, dtype=np.int32)
        self._tenant_codes: dict[str, int] = {}
        # Rows by value of the fields filters most often narrow on (scope and type).
        self._postings: dict[str, dict[str, set[int]]] = {}

    def __len__(self) -> int:
        return sum(1 for slot in self._slots if slot.live)

    def _unit(self, vector: Sequence[float]) -> np.ndarray:
        array = np.asarray(vector, dtype=np.float32)
        if array.shape != (self._dimensions,):
            raise ValueError(f"expected {self._dimensions} dimensions, got {array.shape}")
        norm = float(np.linalg.norm(array))
        return array / norm if norm > 0 else array

    def _post(self, row: int, fields: dict[str, Any]) -> None:
        for name in POSTED_FIELDS:
            for value in _values(fields.get(name)):
                self._postings.setdefault(name, {}).setdefault(value, set()).add(row)

    def _unpost(self, row: int, fields: dict[str, Any]) -> None:
        for name in POSTED_FIELDS:
            for value in _values(fields.get(name)):
                self._postings.get(name, {}).get(value, set()).discard(row)

    def _posted_rows(self, conditions: Sequence[Condition]) -> set[int] | None:
        """The rows an eq or any on a keyword field allows (a superset of the matches;
        every condition is still checked on each row), or None when no such condition."""
        rows: set[int] | None = None
        for condition in conditions:
            if condition.field not in POSTED_FIELDS or condition.op not in ("eq", "any"):
                continue
            postings = self._postings.get(condition.field, {})
            allowed: set[int] = set()
            for value in _values(condition.value):
                if isinstance(value, str):
                    allowed |= postings.get(value, set())
            rows = allowed if rows is None else rows & allowed
        return rows

    def _grow(self) -> None:
        size = 2 * len(self._matrix)
        matrix = np.zeros((size, self._dimensions), np.float32)
        matrix[: len(self._matrix)] = self._matrix
        live = np.zeros(size, dtype=bool)
        live[: len(self._live)] = self._live
        tenants = np.zeros(size, dtype=np.int32)
        tenants[: len(self._tenants)] = self._tenants
        self._matrix, self._live, self._tenants = matrix, live, tenants

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
                        self._grow()
                    self._slots.append(_Slot(doc.tenant, doc.id, dict(doc.fields)))
                    self._post(index, doc.fields)
                    self._where[key] = index
                    code = self._tenant_codes.setdefault(doc.tenant, len(self._tenant_codes))
                    self._tenants[index] = code
                else:
                    slot = self._slots[index]
                    self._unpost(index, slot.fields)
                    slot.fields, slot.live = dict(doc.fields), True
                    self._post(index, slot.fields)
                self._matrix[index] = vector
                self._live[index] = True
                self._versions[key] = doc.version
                self._keyword.upsert(doc.tenant, doc.id, doc.text, doc.version, doc.fields)
                self._context.upsert(doc.tenant, doc.id, doc.context, doc.version, {})
        return failures

    def remove(self, removals: Sequence[Removal]) -> Failures:
        self._keyword.remove(removals)
        self._context.remove(removals)
        with self._lock:
            for removal in removals:
                key = (removal.tenant, removal.id)
                if self._versions.get(key, -1) > removal.version:
                    continue  # the doc was written again after this removal
                self._versions[key] = removal.version
                index = self._where.get(key)
                if index is not None:
                    self._slots[index].live = False
                    self._live[index] = False
        return {}

    def search(
        self, tenant: str, vector: Sequence[float], k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """Exact: every live doc of the tenant is scored (one matrix product), then docs are
        taken in score order until k meet the conditions, so a filter still applies before
        the cut, as OpenSearch's efficient filtering does."""
        if k <= 0:
            return []
        query = self._unit(vector)
        with self._lock:
            count = len(self._slots)
            code = self._tenant_codes.get(tenant)
            if code is None or count == 0:
                return []
            mask = self._live[:count] & (self._tenants[:count] == code)
            narrowed = self._posted_rows(conditions)
            if narrowed is not None:  # an eq/any on a keyword field: only its rows
                keep = np.zeros(count, dtype=bool)
                keep[list(narrowed)] = True
                mask &= keep
            live = int(mask.sum())
            if live == 0:
                return []
            scores = self._matrix[:count] @ query
            scores[~mask] = -np.inf
            hits: list[Hit] = []
            # The best few first (a partial sort); the whole order only when filters
            # reject most of them.
            wanted = min(live, max(4 * k, 64))
            while True:
                best = np.argpartition(-scores, wanted - 1)[:wanted]
                order = best[np.argsort(-scores[best], kind="stable")]
                hits = []
                for row in order:
                    slot = self._slots[int(row)]
                    if conditions and not meets_all(slot.fields, conditions):
                        continue
                    hits.append(Hit(slot.id, float(scores[row]), dict(slot.fields)))
                    if len(hits) == k:
                        break
                if len(hits) == k or wanted == live:
                    break
                wanted = min(live, wanted * 8)
        hits.sort(key=lambda hit: (-hit.score, hit.id))
        return hits

    def keyword(
        self, tenant: str, text: str, k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        with self._lock:
            rows = self._posted_rows(conditions)
            allowed = None if rows is None else {self._slots[row].id for row in rows}
        fields = [(self._keyword, 1.0), (self._context, CONTEXT_WEIGHT)]
        return weighted_search(fields, tenant, text, k, conditions, allowed)

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

    def sample(self, k: int, after: str | None = None) -> tuple[list[Sampled], str | None]:
        """Up to k live docs of every tenant in id order after `after`; the next cursor."""
        if k <= 0:
            return [], after
        with self._lock:
            live = sorted(
                (((slot.tenant, slot.id), slot) for slot in self._slots if slot.live),
                key=lambda pair: (pair[1].id, pair[1].tenant),
            )
            ids = [slot.id for _, slot in live]
            start = 0 if after is None else bisect.bisect_right(ids, after)
            page = [
                Sampled(slot.id, slot.tenant, self._versions[key], dict(slot.fields))
                for key, slot in live[start : start + k]
            ]
            more = start + k < len(live)
        return page, (page[-1].id if page and more else None)

    def rebuild(self, dimensions: int) -> LocalRebuild:
        """A new, empty instance to fill; its switch moves it into this one."""
        return LocalRebuild(self, LocalVectorIndex(dimensions))

    def resume_rebuild(
        self, generation: str, replaced: str | None, dimensions: int
    ) -> LocalRebuild:
        """A paused rebuild of an in-process index is lost with its process."""
        raise Misconfigured("a rebuild of the in-process index cannot be resumed")

    def adopt(self, rebuilt: LocalVectorIndex) -> None:
        """Take `rebuilt`'s docs, vectors and dimensions in one step (a rebuild's switch);
        `rebuilt` must not be used afterwards."""
        with rebuilt._lock, self._lock:
            for name, value in vars(rebuilt).items():
                if name != "_lock":
                    setattr(self, name, value)


class LocalRebuild:
    """A rebuild of a LocalVectorIndex into a fresh instance (implements Rebuild)."""

    def __init__(self, live: LocalVectorIndex, target: LocalVectorIndex) -> None:
        self._live = live
        self._target = target

    @property
    def target(self) -> LocalVectorIndex:
        return self._target

    @property
    def generation(self) -> str:
        return "local"

    @property
    def replaced(self) -> str | None:
        return None

    def switch(self) -> None:
        self._live.adopt(self._target)
        # Writes that follow (the catch-up) go to the live instance, which now holds them.
        self._target = self._live

    def retire(self) -> None:
        """Nothing to delete: the old state was dropped by the switch."""

    def abandon(self) -> None:
        """Nothing to delete: the new instance is garbage once unreferenced."""
