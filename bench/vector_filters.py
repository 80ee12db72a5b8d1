"""What the DynamoDB vector table's over-fetch costs in recall (VectorStore dynamodb).

DynamoDB's SearchVectors filters by equality only (memkit.vectors.dynamodb: the scope and the
INLINE_FILTER attributes); any other condition is applied to its hits afterwards, after asking
for OVER_FETCH x k of them (TopK at most 100), and once more for 100 when the filter left
fewer than k. A doc that meets the filter but ranks below what was fetched is missed. This
measures how often that costs the answer, on the LoCoMo development split (the messages of
bench/locomo.py, one tenant a conversation, each doc as the indexer makes it: the local
embedder's vector, the text, the turn before as context, the speaker, created_at), with a
date filter DynamoDB cannot evaluate:

    half   created_at on the evidence's side of the conversation's middle message (keeps ~50%)
    tenth  created_at within the 10% of the conversation's messages around its first
           evidence message (keeps ~10%)

and for each: recall@10 (a question counts when one of its evidence messages is among the
first 10) of a semantic search (k 10, the question's vector as the service makes it) and of
the default hybrid search (100 candidates a side), on the local exact index (the ceiling: it
filters before ranking, as OpenSearch does) and on the vector table behind its local stand-in
(which ranks exactly, so what is lost is the over-fetch's alone; DynamoDB's approximate
search may lose more) with the over-fetch at 1, 2, 3 (memkit's) and 5, with and without the
deeper second request; plus the SearchVectors requests a search took on average.

    python -m bench.vector_filters [--dataset DIR]

It skips (exit 0) when the dataset folder is absent; about two minutes on 2 shared cores.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.figures import report
from bench.locomo import DATASET, ROOT, Conversation, load
from memkit.embeddings.local import LocalEmbedder
from memkit.vectors.conversation import context_of, drop_function_words, meaning_of, speaker_of
from memkit.vectors.filters import Condition
from memkit.vectors.hybrid import hybrid_search
from memkit.vectors.local import LocalVectorIndex
from memkit.vectors.protocol import VectorDoc, VectorIndex

NAMESPACE = "locomo"
K = 10
SETTINGS = ((1, False), (1, True), (2, True), (3, False), (3, True), (5, True))


@dataclass(frozen=True)
class Case:
    tenant: str
    text: str
    vector: list[float]
    conditions: list[Condition]
    evidence: frozenset[str]


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def docs_of(conversation: Conversation, embedder: LocalEmbedder) -> list[VectorDoc]:
    """The conversation's messages as the indexer makes their docs."""
    texts = [m["content"] for m in conversation.messages]
    vectors = embedder.embed(texts, "document")
    docs = []
    previous: str | None = None
    for message, vector in zip(conversation.messages, vectors, strict=True):
        fields = {
            "namespace": NAMESPACE,
            "user_id": conversation.id,
            "session_id": conversation.id,
            "memory_type": "message",
            "kind": "message",
            "record_id": message["id"],
            "created_at": _epoch(message["created_at"]),
            "speaker": speaker_of(message["content"]),
        }
        docs.append(
            VectorDoc(
                message["id"],
                conversation.id,
                vector,
                1,
                message["content"],
                fields,
                context_of(previous),
            )
        )
        previous = message["content"]
    return docs


def date_filter(conversation: Conversation, evidence: frozenset[str], share: str) -> Condition:
    """A created_at condition that keeps the evidence and about half or a tenth of the
    conversation's messages."""
    times = [_epoch(m["created_at"]) for m in conversation.messages]
    ids = [m["id"] for m in conversation.messages]
    if share == "half":
        middle = times[len(times) // 2]
        later = any(times[ids.index(e)] >= middle for e in evidence if e in ids)
        return Condition("created_at", "gte" if later else "lt", middle)
    first = min(ids.index(e) for e in evidence if e in ids)
    width = max(1, len(times) // 20)
    low, high = max(0, first - width), min(len(times) - 1, first + width)
    return Condition("created_at", "between", [times[low], times[high]])


def cases(conversations: Sequence[Conversation], share: str, embedder: LocalEmbedder) -> list[Case]:
    found = []
    for conversation in conversations:
        ids = {m["id"] for m in conversation.messages}
        for question in conversation.questions:
            if not question.evidence & ids:
                continue
            scope = [
                Condition("namespace", "eq", NAMESPACE),
                Condition("user_id", "eq", conversation.id),
                Condition("session_id", "eq", conversation.id),
                Condition("memory_type", "eq", "message"),
            ]
            condition = date_filter(conversation, question.evidence, share)
            vector = embedder.embed([drop_function_words(question.text)], "query")[0]
            found.append(
                Case(
                    conversation.id,
                    question.text,
                    vector,
                    [*scope, condition],
                    question.evidence,
                )
            )
    return found


Search = Callable[[VectorIndex, Case], list[str]]


def semantic(index: VectorIndex, case: Case) -> list[str]:
    return [hit.id for hit in index.search(case.tenant, case.vector, K, case.conditions)]


def hybrid(embedder: LocalEmbedder) -> Search:
    def search(index: VectorIndex, case: Case) -> list[str]:
        def vector_of(speakers: frozenset[str]) -> list[float]:
            return embedder.embed([meaning_of(case.text, speakers)], "query")[0]

        hits = hybrid_search(index, case.tenant, case.text, vector_of, K, case.conditions)
        return [hit.id for hit in hits]

    return search


def recall(index: VectorIndex, found: Sequence[Case], search: Search) -> float:
    return sum(1 for case in found if case.evidence & {*search(index, case)}) / len(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    args = parser.parse_args()
    files = sorted(args.dataset.glob("*.json")) if args.dataset.is_dir() else []
    if not files:
        print(f"vector_filters: skipped, no LoCoMo conversations in {args.dataset}", flush=True)
        return 0
    from bench import environment
    from memkit.vectors.dynamodb import DynamoVectorIndex
    from memkit_dev.local.template import load_template
    from memkit_dev.local.vector_dynamodb import vector_table_on_moto

    environment.apply()
    embedder = LocalEmbedder()
    conversations = [load(path) for path in files]
    docs = [doc for conversation in conversations for doc in docs_of(conversation, embedder)]
    exact = LocalVectorIndex(embedder.dimensions)
    exact.upsert(docs)
    template = load_template(ROOT / "template.yaml")
    table = "bench-vectors"
    with vector_table_on_moto(template, table, embedder.dimensions) as (standin, client):

        def table_index(**options: Any) -> DynamoVectorIndex:
            # Nothing is written while it is searched: its texts are read once (moto reads
            # a GSI slowly, walking the table).
            options.setdefault("keyword_cache_seconds", math.inf)
            return DynamoVectorIndex(client, table, embedder.dimensions, **options)

        assert table_index().upsert(docs) == {}
        standin.settle()
        for share in ("half", "tenth"):
            found = cases(conversations, share, embedder)
            for mode, search in (("semantic", semantic), ("hybrid", hybrid(embedder))):
                name = f"vector_filters.{share}.{mode}"
                report(
                    f"{name}.exact.recall@10",
                    recall(exact, found, search),
                    "",
                    f"{len(found)} questions",
                )
                for over_fetch, deepen in SETTINGS:
                    index = table_index(over_fetch=over_fetch, deepen=deepen)
                    before = standin.searched
                    value = recall(index, found, search)
                    requests = (standin.searched - before) / len(found)
                    label = f"x{over_fetch}{'+100' if deepen else ''}"
                    report(
                        f"{name}.dynamodb.{label}.recall@10",
                        value,
                        "",
                        f"{requests:.2f} SearchVectors a search",
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
