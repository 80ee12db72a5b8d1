"""Keyword search for the local stack: BM25 over the same docs and filters as the vectors.

Terms are what OpenSearch's built-in `english` analyzer makes of a text, as near as the
standard library and snowballstemmer allow (`terms`): the text lowercased, accents stripped,
split into runs of letters and digits (the BERT normalisation the embedder uses), a
possessive "'s" dropped, Lucene's English stop words dropped, each word Porter-stemmed
("painted", "painting", "paints" -> "paint"). A question asks "when did she paint" of a
message that says "I painted"; plain words miss that (what the analysis buys BM25 on the
LoCoMo development split is in docs/benchmarks.md). `plain_terms` (words as written) stays
for baselines. Scores are Okapi BM25 (k1 1.2, b 0.75) with the document frequencies and
average length of the tenant's live docs, as OpenSearch takes them from the shard rather
than from the docs a filter leaves. An inverted index (term -> docs) means a query reads
only the docs holding one of its terms, and only those the caller allows when its filters
already narrowed the candidates. Scores are summed with one vector
operation per query term (numpy), so a common word held by every doc costs no Python loop.
"""

from __future__ import annotations

import heapq
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import snowballstemmer

from memkit.text import words
from memkit.vectors.filters import Condition, meets_all
from memkit.vectors.protocol import Hit, Removal

K1 = 1.2
B = 0.75

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET: what the `english` analyzer's stop filter
# removes (a short list: pronouns and most function words stay).
_ENGLISH_STOP = """
    a an and are as at be but by for if in into is it no not of on or such that the their
    then there these they this to was will with
"""
ENGLISH_STOP_WORDS = frozenset(_ENGLISH_STOP.split())
# english_possessive_stemmer: a trailing 's (straight or curly apostrophe) of a word.
_POSSESSIVE = re.compile(r"(?<=\w)['\u2019][sS]\b")
_STEMS: dict[str, str] = {}
_STEMS_KEPT = 200_000
_stemmers = threading.local()


def _stem(word: str) -> str:
    stem = _STEMS.get(word)
    if stem is None:
        stemmer = getattr(_stemmers, "porter", None)
        if stemmer is None:  # a stemmer object is not thread-safe: one per thread
            stemmer = _stemmers.porter = snowballstemmer.stemmer("porter")
        stem = stemmer.stemWord(word)
        if len(_STEMS) >= _STEMS_KEPT:
            _STEMS.clear()
        _STEMS[word] = stem
    return stem


def terms(text: str) -> list[str]:
    """A text's terms as the `english` analyzer makes them (see the module docstring)."""
    found = words(_POSSESSIVE.sub("", text))
    return [_stem(word) for word in found if word not in ENGLISH_STOP_WORDS]


def plain_terms(text: str) -> list[str]:
    """A text's words as written (lowercased, accents stripped): plain BM25's terms."""
    return words(text)


@dataclass
class _Entry:
    fields: dict[str, object]
    counts: Counter[str]
    length: int
    version: int
    live: bool = True


@dataclass
class _Tenant:
    """A tenant's docs as rows (a doc keeps its row across rewrites and removals), postings
    (term -> row -> count) and the length statistics of its live docs."""

    rows: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(64))
    postings: dict[str, dict[int, int]] = field(default_factory=dict)
    docs: int = 0
    total_length: int = 0

    def row_of(self, doc_id: str) -> int:
        row = self.rows.get(doc_id)
        if row is None:
            row = self.rows[doc_id] = len(self.ids)
            self.ids.append(doc_id)
            if row == len(self.lengths):
                self.lengths = np.concatenate([self.lengths, np.zeros(len(self.lengths))])
        return row


class KeywordIndex:
    """BM25 over text, with the versioning rules of the vector index (thread-safe)."""

    def __init__(self, analyzer: Callable[[str], list[str]] = terms) -> None:
        self._analyze = analyzer
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self._tenants: dict[str, _Tenant] = {}

    def _add(self, tenant: str, doc_id: str, entry: _Entry) -> None:
        stats = self._tenants.setdefault(tenant, _Tenant())
        row = stats.row_of(doc_id)
        for term, count in entry.counts.items():
            stats.postings.setdefault(term, {})[row] = count
        stats.lengths[row] = entry.length
        if entry.length:  # as Lucene counts a field's docs: those with a term in it
            stats.docs += 1
            stats.total_length += entry.length

    def _drop(self, tenant: str, doc_id: str, entry: _Entry) -> None:
        stats = self._tenants[tenant]
        row = stats.rows[doc_id]
        for term in entry.counts:
            holders = stats.postings.get(term)
            if holders is not None:
                holders.pop(row, None)
                if not holders:
                    del stats.postings[term]
        if entry.length:
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
            found = self._analyze(text)
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
        wanted = sorted(set(self._analyze(query)))  # sorted: the same sum in every process
        if k <= 0 or not wanted:
            return []
        with self._lock:
            stats = self._tenants.get(tenant)
            if stats is None or stats.docs == 0:
                return []
            scores, matched = self._scores(stats, wanted)
            if allowed is not None:
                matched &= self._mask(stats, allowed)
            hits: list[Hit] = []
            candidates = np.flatnonzero(matched)
            for row in self._best_first(stats, scores, candidates, k if not conditions else 4 * k):
                doc_id = stats.ids[row]
                entry = self._entries[(tenant, doc_id)]
                if conditions and not meets_all(entry.fields, conditions):
                    continue
                hits.append(Hit(doc_id, float(scores[row]), dict(entry.fields)))
                if len(hits) == k:
                    break
        return hits

    def matches(
        self, tenant: str, query: str, allowed: Collection[str] | None = None
    ) -> dict[str, float]:
        """Every live doc of the tenant (among `allowed`, when given) holding a term of
        `query`, with its BM25 score: one field's part of a query over several."""
        wanted = sorted(set(self._analyze(query)))
        with self._lock:
            stats = self._tenants.get(tenant)
            if stats is None or stats.docs == 0 or not wanted:
                return {}
            scores, matched = self._scores(stats, wanted)
            if allowed is not None:  # narrowed first: only allowed matches become entries
                matched &= self._mask(stats, allowed)
            rows = np.flatnonzero(matched).tolist()
            return {stats.ids[row]: float(scores[row]) for row in rows}

    def fields_of(self, tenant: str, doc_id: str) -> dict[str, object] | None:
        """A live doc's fields (None: not held, or removed)."""
        with self._lock:
            entry = self._entries.get((tenant, doc_id))
            return dict(entry.fields) if entry is not None and entry.live else None

    def count(self, tenant: str, query: str, allowed: Collection[str] | None = None) -> int:
        """How many of the tenant's live docs (among `allowed`, when given) hold a term of
        `query`: a search's total."""
        wanted = sorted(set(self._analyze(query)))
        with self._lock:
            stats = self._tenants.get(tenant)
            if stats is None or not wanted:
                return 0
            held: set[int] = set()
            for term in wanted:
                held.update(stats.postings.get(term, ()))
            if allowed is None:
                return len(held)
            return sum(1 for doc_id in allowed if stats.rows.get(doc_id, -1) in held)

    @staticmethod
    def _mask(stats: _Tenant, allowed: Collection[str]) -> np.ndarray:
        """Which rows are docs among `allowed`."""
        keep = np.zeros(len(stats.ids), dtype=bool)
        keep[[stats.rows[doc_id] for doc_id in allowed if doc_id in stats.rows]] = True
        return keep

    @staticmethod
    def _scores(stats: _Tenant, wanted: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every row's BM25 score for the query's terms, and which rows hold one of them
        (one vector operation per term: a term of every doc costs no Python loop)."""
        size = len(stats.ids)
        scores = np.zeros(size)
        matched = np.zeros(size, dtype=bool)
        average = stats.total_length / stats.docs or 1.0
        for term in wanted:
            holders = stats.postings.get(term)
            if not holders:
                continue
            held = len(holders)
            idf = math.log(1 + (stats.docs - held + 0.5) / (held + 0.5))
            rows = np.fromiter(holders.keys(), dtype=np.int64, count=held)
            counts = np.fromiter(holders.values(), dtype=np.float64, count=held)
            norm = counts + K1 * (1 - B + B * stats.lengths[rows] / average)
            scores[rows] += idf * counts * (K1 + 1) / norm
            matched[rows] = True
        return scores, matched

    @staticmethod
    def _best_first(
        stats: _Tenant, scores: np.ndarray, candidates: np.ndarray, likely: int
    ) -> Iterator[int]:
        """Candidate rows best first, ties by id: the `likely` best from a partial sort
        (with every row tied with the last of them), the rest only if the caller reads past
        them (filters rejected most of the best)."""
        if len(candidates) == 0:
            return
        ranked = scores[candidates]
        if likely < len(candidates):
            cut = -np.partition(-ranked, likely - 1)[likely - 1]
            first = candidates[ranked >= cut]
        else:
            first = candidates
        yield from sorted(first.tolist(), key=lambda row: (-scores[row], stats.ids[row]))
        if len(first) < len(candidates):
            rest = np.setdiff1d(candidates, first, assume_unique=True)
            yield from sorted(rest.tolist(), key=lambda row: (-scores[row], stats.ids[row]))


def weighted_matches(
    clauses: Sequence[tuple[KeywordIndex, float, str]],
    tenant: str,
    allowed: Collection[str] | None = None,
) -> dict[str, float]:
    """Every doc matching a clause (index, weight, query), with the weighted sum of its
    BM25 over the clauses in their order (OpenSearch's sum of a bool's `should` clauses)."""
    total: dict[str, float] = {}
    for index, weight, query in clauses:
        for doc_id, score in index.matches(tenant, query, allowed).items():
            total[doc_id] = total.get(doc_id, 0.0) + weight * score
    return total


def weighted_search(
    fields: Sequence[tuple[KeywordIndex, float]],
    tenant: str,
    query: str,
    k: int,
    conditions: Sequence[Condition] = (),
    allowed: Collection[str] | None = None,
) -> list[Hit]:
    """The k best docs by the weighted sum of their BM25 in each (index, weight) of
    `fields` (one index a field, as OpenSearch's bool `should` of boosted `match` clauses
    sums them), among the docs of the first index that meet the conditions; ties by id."""
    if k <= 0 or not fields:
        return []
    holder = fields[0][0]
    total = weighted_matches([(index, weight, query) for index, weight in fields], tenant, allowed)

    def best_first(item: tuple[str, float]) -> tuple[float, str]:
        return -item[1], item[0]

    # The likely best from a partial sort; the rest only when the conditions reject them.
    likely = heapq.nsmallest(4 * k if conditions else k, total.items(), key=best_first)
    hits: list[Hit] = []
    for ranked in (likely, sorted(total.items(), key=best_first)[len(likely) :]):
        for doc_id, score in ranked:
            found = holder.fields_of(tenant, doc_id)
            if found is None or (conditions and not meets_all(found, conditions)):
                continue
            hits.append(Hit(doc_id, score, found))
            if len(hits) == k:
                return hits
        if len(likely) == len(total):
            break
    return hits


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
