"""Hybrid search: one ranking from a VectorIndex's vector (k-NN) and keyword (BM25) rankings.

Method (a convex combination of normalised scores, as in Bruch, Gai and Ingber, "An Analysis
of Fusion Functions for Hybrid Retrieval", TOIS 2023):

1. Ask each side for CANDIDATES docs (or k, if more), under the same conditions:
   `index.keyword` with the query text as asked (a doc's own text, plus its context at
   CONTEXT_WEIGHT), then `index.search` with the query vector. The vector may be made from
   what the keyword side found: the speakers of its candidates that the query names are left
   out of what is embedded (memkit.vectors.conversation.meaning_of). Two requests, one after
   the other, as before. A side whose weight is 0 is not asked.
2. Score each candidate `alpha * cosine + (1 - alpha) * bm25 / best_bm25`: the cosine as the
   index gives it (clipped to [0, 1]; it is already a relevance on an absolute scale), BM25
   divided by the best BM25 of this query (BM25 has no fixed scale: it grows with the query's
   length and differs between the local index and OpenSearch, whose BM25 drops the (k1 + 1)
   factor). A candidate missing from the vector list gets the lowest cosine in that list (it
   is at most that close); one missing from the keyword list gets 0 (it matched no term, or
   less well than every keyword candidate).
3. A candidate whose `speaker` the query names (memkit.vectors.conversation) gets
   SPEAKER_BOOST more: "what did Caroline research?" is about what Caroline said.
4. Best first; `Hit.score` is that sum clipped to [0, 1] (1: the nearest vector that is
   also the best keyword match), so the API's `dist = 1 - score` reads as a distance.

The query vector matters more than the fusion. With the local static embedder (a mean of
token vectors), the function words of a question ("what", "did", "I", "my") pull its vector
towards every other question and every chatty message, so the service embeds
`meaning_of(text)`, which leaves them out (and the speakers the question names). The keyword
side keeps the text as asked: there the pronouns help (they mark the user's own messages).

How the blend, alpha, the candidates and the query vector were chosen, what was tried and not
kept, and what they measure now, are in docs/benchmarks.md ("How hybrid search was tuned",
then "LoCoMo development split"): decisions are made on the LoCoMo development split
(bench/locomo.py) since issue 15.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memkit.text import words
from memkit.vectors.conversation import names_speaker
from memkit.vectors.filters import Condition
from memkit.vectors.protocol import Hit, VectorIndex

CANDIDATES = 100
DEFAULT_ALPHA = 0.8
# What a message said by the person a question names gains, on the blend's [0, 1] scale: a
# tie-breaker among messages that match about as well, not a filter. On the LoCoMo
# development split: 0.05 and 0.2 gave recall@10 within 0.01 of 0.1 (recall@1 0.37 to 0.42).
SPEAKER_BOOST = 0.1

# A query's embedding, made from the speakers (lowercased) the query names.
QueryVector = Callable[[frozenset[str]], Sequence[float]]


def hybrid_search(
    index: VectorIndex,
    tenant: str,
    text: str,
    vector: Sequence[float] | QueryVector,
    k: int,
    conditions: Sequence[Condition] = (),
    alpha: float | None = None,
    max_distance: float | None = None,
) -> list[Hit]:
    """The k best of the tenant's docs that meet every condition, by `alpha * cosine +
    (1 - alpha) * BM25 / best BM25` (see the module docstring), best first.

    `max_distance` (AMS's distance_threshold) keeps only docs whose vector is within that
    cosine distance of the query's: a keyword match counts only if the vector side found
    it among its candidates that close.

    `text` is the query as asked; `vector` its embedding, or a function that makes it from
    the speakers the query names (the keyword side runs first, and a query word that is the
    `speaker` of one of its candidates names a person of the conversation, which
    memkit.vectors.conversation.meaning_of leaves out of the vector; the service passes
    that). `alpha` is the weight of the vector side
    (AMS's `hybrid_alpha`): 1 ranks as semantic search, 0 as keyword search (each with the
    speaker boost), None means DEFAULT_ALPHA. Each hit's fields are the index's; its score
    is in [0, 1] (a boosted hit can reach 1 below another that does: ranks are by the
    unclipped sum).
    """
    if k <= 0:
        return []
    weight = DEFAULT_ALPHA if alpha is None else min(1.0, max(0.0, alpha))
    depth = max(k, CANDIDATES)
    asks_vector = weight > 0 or max_distance is not None
    keyword = index.keyword(tenant, text, depth, conditions) if weight < 1 else []
    asked = set(words(text))
    if callable(vector):
        named = {
            speaker
            for hit in keyword
            if names_speaker(asked, speaker := hit.fields.get("speaker"))
            and isinstance(speaker, str)
        }
        vector = vector(frozenset(named)) if asks_vector else []
    semantic = index.search(tenant, vector, depth, conditions) if asks_vector else []

    cosine = {hit.id: min(1.0, max(0.0, hit.score)) for hit in semantic}
    unseen = min(cosine.values(), default=0.0)
    best = max((hit.score for hit in keyword), default=0.0)
    bm25 = {hit.id: hit.score / best for hit in keyword} if best > 0 else {}
    fields = {hit.id: hit.fields for hit in keyword}
    fields.update((hit.id, hit.fields) for hit in semantic)

    scored = {
        doc_id: weight * cosine.get(doc_id, unseen)
        + (1 - weight) * bm25.get(doc_id, 0.0)
        + (SPEAKER_BOOST if names_speaker(asked, fields[doc_id].get("speaker")) else 0.0)
        for doc_id in fields
        if max_distance is None or 1.0 - cosine.get(doc_id, -1.0) <= max_distance
    }
    ranked = sorted(scored.items(), key=lambda item: (-item[1], item[0]))[:k]
    return [Hit(doc_id, min(1.0, score), fields[doc_id]) for doc_id, score in ranked]
