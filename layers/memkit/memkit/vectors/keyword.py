"""Keyword search for the local stack: BM25 over the same docs and filters as the vectors.

Terms are the text lowercased, accents stripped, split into runs of letters and digits (the
BERT normalisation the embedder uses). Scores are Okapi BM25 (k1 1.2, b 0.75) with the
document frequencies and average length of the tenant's live docs, as OpenSearch takes them
from the shard rather than from the docs a filter leaves. An inverted index (term -> docs)
means a query reads only the docs holding one of its terms, and only those the caller
allows when its filters already narrowed the candidates.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field

from memkit.embeddings.wordpiece import words
from memkit.vectors.filters import Condition, meets_all
from memkit.vectors.protocol import Hit, Removal

K1 = 1.2
B = 0.75


def terms(text: str) -> list[str]:
    return words(text)


def _rank(item: tuple[str, float]) -> tuple[float, str]:
    """Best score first, ties by id (a stable order across runs)."""
    return -item[1], item[0]


@dataclass
class _Entry:
    fields: dict[str, object]
    counts: Counter[str]
    length: int
    version: int
    live: bool = True


@dataclass
class _Tenant:
    """A tenant's live docs: postings (term -> doc ids) and the length statistics."""

    postings: dict[str, set[str]] = field(default_factory=dict)
    docs: int = 0
    total_length: int = 0


class KeywordIndex:
    """BM25 over text, with the versioning rules of the vector index (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self._tenants: dict[str, _Tenant] = {}

    def _add(self, tenant: str, doc_id: str, entry: _Entry) -> None:
        stats = self._tenants.setdefault(tenant, _Tenant())
        for term in entry.counts:
            stats.postings.setdefault(term, set()).add(doc_id)
        stats.docs += 1
        stats.total_length += entry.length

    def _drop(self, tenant: str, doc_id: str, entry: _Entry) -> None:
        stats = self._tenants[tenant]
        for term in entry.counts:
            holders = stats.postings.get(term)
            if holders is not None:
                holders.discard(doc_id)
                if not holders:
                    del stats.postings[term]
        stats.docs -= 1
        stats.total_length -= entry.length
        entry.live = False

    def upsert(
        self, tenant: str, doc_id: str, text: str, version: int, fields: dict[str, object]
    ) -> None:
        key = (tenant, doc_id)
        with self._lock:
            if self._versions.get(key, -1) >= version:
                return
            previous = self._entries.get(key)
            if previous is not None and previous.live:
                self._drop(tenant, doc_id, previous)
            found = terms(text)
            entry = _Entry(dict(fields), Counter(found), len(found), version)
            self._entries[key] = entry
            self._versions[key] = version
            self._add(tenant, doc_id, entry)

    def remove(self, removals: Sequence[Removal]) -> None:
        with self._lock:
            for removal in removals:
                key = (removal.tenant, removal.id)
                if self._versions.get(key, -1) > removal.version:
                    continue
                self._versions[key] = removal.version
                entry = self._entries.get(key)
                if entry is not None and entry.live:
                    self._drop(removal.tenant, removal.id, entry)

    def search(
        self,
        tenant: str,
        query: str,
        k: int,
        conditions: Sequence[Condition] = (),
        allowed: Collection[str] | None = None,
    ) -> list[Hit]:
        """The k best matches among the tenant's live docs that meet the conditions (and,
        when given, are among `allowed`: ids a caller's own index already narrowed to)."""
        wanted = set(terms(query))
        if k <= 0 or not wanted:
            return []
        with self._lock:
            stats = self._tenants.get(tenant)
            if stats is None or stats.docs == 0:
                return []
            average = stats.total_length / stats.docs or 1.0
            scores: dict[str, float] = {}
            for term in wanted:
                holders = stats.postings.get(term)
                if not holders:
                    continue
                idf = math.log(1 + (stats.docs - len(holders) + 0.5) / (len(holders) + 0.5))
                if allowed is not None and len(allowed) < len(holders):
                    holders = {doc_id for doc_id in allowed if doc_id in holders}
                for doc_id in holders:
                    entry = self._entries[(tenant, doc_id)]
                    count = entry.counts[term]
                    norm = count + K1 * (1 - B + B * entry.length / average)
                    scores[doc_id] = scores.get(doc_id, 0.0) + idf * count * (K1 + 1) / norm
            hits: list[Hit] = []
            for doc_id, score in self._best_first(scores, k if not conditions else 4 * k):
                entry = self._entries[(tenant, doc_id)]
                if allowed is not None and doc_id not in allowed:
                    continue
                if conditions and not meets_all(entry.fields, conditions):
                    continue
                hits.append(Hit(doc_id, score, dict(entry.fields)))
                if len(hits) == k:
                    break
        return hits

    @staticmethod
    def _best_first(scores: dict[str, float], likely: int) -> Iterator[tuple[str, float]]:
        """Scores best first: the `likely` best from a partial sort, the rest only if the
        caller reads past them (filters rejected most of the best)."""
        first = heapq.nsmallest(likely, scores.items(), key=_rank)
        yield from first
        if len(first) < len(scores):
            seen = {doc_id for doc_id, _ in first}
            rest = sorted((i for i in scores.items() if i[0] not in seen), key=_rank)
            yield from rest


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
