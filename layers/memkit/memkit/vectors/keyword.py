"""Keyword search for the local stack: BM25 over the same docs and filters as the vectors.

Terms are the text lowercased, accents stripped, split into runs of letters and digits (the
BERT normalisation the embedder uses). Scores are Okapi BM25 (k1 1.2, b 0.75), with the
document frequencies of the tenant's docs that meet the filters: what OpenSearch's match
query computes over a filtered index, close enough for ranking.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from memkit.embeddings.wordpiece import words
from memkit.vectors.filters import Condition, meets_all
from memkit.vectors.protocol import Hit, Removal

K1 = 1.2
B = 0.75


def terms(text: str) -> list[str]:
    return words(text)


@dataclass
class _Entry:
    fields: dict[str, object]
    counts: Counter[str]
    length: int
    version: int
    live: bool = True


class KeywordIndex:
    """BM25 over text, with the versioning rules of the vector index (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._versions: dict[tuple[str, str], int] = {}

    def upsert(
        self, tenant: str, doc_id: str, text: str, version: int, fields: dict[str, object]
    ) -> None:
        key = (tenant, doc_id)
        with self._lock:
            if self._versions.get(key, -1) >= version:
                return
            words = terms(text)
            self._entries[key] = _Entry(dict(fields), Counter(words), len(words), version)
            self._versions[key] = version

    def remove(self, removals: Sequence[Removal]) -> None:
        with self._lock:
            for removal in removals:
                key = (removal.tenant, removal.id)
                if self._versions.get(key, -1) > removal.version:
                    continue
                self._versions[key] = removal.version
                entry = self._entries.get(key)
                if entry is not None:
                    entry.live = False

    def search(
        self, tenant: str, query: str, k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        wanted = set(terms(query))
        if k <= 0 or not wanted:
            return []
        with self._lock:
            docs = [
                (doc_id, entry)
                for (owner, doc_id), entry in self._entries.items()
                if owner == tenant and entry.live and meets_all(entry.fields, conditions)
            ]
        if not docs:
            return []
        average = sum(entry.length for _, entry in docs) / len(docs) or 1.0
        frequency = {t: sum(1 for _, e in docs if t in e.counts) for t in wanted}
        scored: list[Hit] = []
        for doc_id, entry in docs:
            score = 0.0
            for term in wanted:
                count = entry.counts.get(term, 0)
                if not count:
                    continue
                idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
                norm = count + K1 * (1 - B + B * entry.length / average)
                score += idf * count * (K1 + 1) / norm
            if score > 0:
                scored.append(Hit(doc_id, score, dict(entry.fields)))
        scored.sort(key=lambda hit: (-hit.score, hit.id))
        return scored[:k]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Hit]], k: int, constant: int = 60, weights: Sequence[float] = ()
) -> list[Hit]:
    """One ranking from several: each id scores sum(weight / (constant + rank))."""
    fused: dict[str, float] = {}
    for index, ranking in enumerate(rankings):
        weight = weights[index] if index < len(weights) else 1.0
        for rank, hit in enumerate(ranking, start=1):
            fused[hit.id] = fused.get(hit.id, 0.0) + weight / (constant + rank)
    fields = {hit.id: hit.fields for ranking in rankings for hit in ranking}
    ordered = sorted(fused.items(), key=lambda item: (-item[1], item[0]))
    return [Hit(doc_id, score, fields[doc_id]) for doc_id, score in ordered[:k]]
