"""Retrieval on long conversations: does a question find the one message that answers it?

The conversations are generated (bench/conversations.py): 20 of them from one seed, each a
user and an assistant over 24 sessions, about 370 messages and 45 questions each. Numbers
0-9 are the DEV split, the one memkit.vectors.hybrid was tuned on; 10-19 are HELD-OUT, never
used for tuning, and the one reported.

Each message is one doc of a LocalVectorIndex (the local embedder's vector, the text for
BM25, the fields memkit's indexer gives a message); every search is filtered to the
conversation's user, as the service filters a user's search. For each question, recall@N is
whether its evidence message is among the first N hits, averaged over the questions:

    semantic   index.search with the embedding of the question as asked
    keyword    index.keyword (BM25) with the question as asked
    rrf        plain reciprocal rank fusion (equal weights, constant 60) of the first 10 of
               each: the issue's baseline
    hybrid     memkit's default: hybrid_search with the embedding of meaning_of(question)
               (memkit.vectors.conversation: no function words, no names), as the
               service searches

and, to show where the gain comes from (recall@10 only): semantic search with the embedding
of meaning_of(question); plain RRF of the first 10 of that search and of keyword; plain RRF
of the very lists hybrid fuses (100 each); hybrid_search with the embedding of the question
as asked (the fusion alone). Each doc carries what the indexer gives a message: its speaker
(none here: the generated turns have no speaker label) and the turn before it as context.

`python -m bench.retrieval` prints the HELD-OUT figures, `--dev` the DEV ones. Nothing is timed
(latency has its own benchmarks); docs/benchmarks.md has the figures and how long a run takes.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.conversations import Conversation, conversations
from bench.figures import report
from memkit.embeddings.local import LocalEmbedder
from memkit.models.domain import DEFAULT_NAMESPACE
from memkit.models.session import MemoryType
from memkit.vectors.conversation import context_of, meaning_of, speaker_of
from memkit.vectors.filters import Condition
from memkit.vectors.hybrid import CANDIDATES, hybrid_search
from memkit.vectors.keyword import reciprocal_rank_fusion
from memkit.vectors.local import LocalVectorIndex
from memkit.vectors.protocol import Hit, VectorDoc

SEED = 2024
SPLITS = {"dev": range(0, 10), "held_out": range(10, 20)}
TENANT = "bench"
AT = (1, 5, 10)
DEEPEST = max(AT)
TARGET_AT_10 = 0.70


@dataclass(frozen=True)
class Query:
    """A question as the searches see it."""

    text: str
    evidence_id: str
    vector: list[float]  # the embedding of the question as asked
    content_vector: list[float]  # the embedding of meaning_of(question)
    conditions: Sequence[Condition]


Method = Callable[[LocalVectorIndex, Query], list[Hit]]


def _semantic(index: LocalVectorIndex, query: Query) -> list[Hit]:
    return index.search(TENANT, query.vector, DEEPEST, query.conditions)


def _semantic_content(index: LocalVectorIndex, query: Query) -> list[Hit]:
    return index.search(TENANT, query.content_vector, DEEPEST, query.conditions)


def _keyword(index: LocalVectorIndex, query: Query) -> list[Hit]:
    return index.keyword(TENANT, query.text, DEEPEST, query.conditions)


def _rrf(index: LocalVectorIndex, query: Query) -> list[Hit]:
    rankings = [_semantic(index, query), _keyword(index, query)]
    return reciprocal_rank_fusion(rankings, DEEPEST)


def _rrf_content(index: LocalVectorIndex, query: Query) -> list[Hit]:
    rankings = [_semantic_content(index, query), _keyword(index, query)]
    return reciprocal_rank_fusion(rankings, DEEPEST)


def _rrf_hybrid_inputs(index: LocalVectorIndex, query: Query) -> list[Hit]:
    rankings = [
        index.search(TENANT, query.content_vector, CANDIDATES, query.conditions),
        index.keyword(TENANT, query.text, CANDIDATES, query.conditions),
    ]
    return reciprocal_rank_fusion(rankings, DEEPEST)


def _hybrid(index: LocalVectorIndex, query: Query) -> list[Hit]:
    return hybrid_search(index, TENANT, query.text, query.content_vector, DEEPEST, query.conditions)


def _hybrid_as_asked(index: LocalVectorIndex, query: Query) -> list[Hit]:
    return hybrid_search(index, TENANT, query.text, query.vector, DEEPEST, query.conditions)


# name -> (method, whether to print recall@1 and @5 too)
METHODS: dict[str, tuple[Method, bool]] = {
    "semantic": (_semantic, True),
    "keyword": (_keyword, True),
    "rrf": (_rrf, True),
    "hybrid": (_hybrid, True),
    "semantic_meaning": (_semantic_content, False),
    "rrf_meaning": (_rrf_content, False),
    "rrf_of_hybrid_candidates": (_rrf_hybrid_inputs, False),
    "hybrid_vector_as_asked": (_hybrid_as_asked, False),
}


def index_of(dialogues: Sequence[Conversation], embedder: LocalEmbedder) -> LocalVectorIndex:
    """One doc per message, with the fields memkit's indexer gives a message."""
    index = LocalVectorIndex(embedder.dimensions)
    for dialogue in dialogues:
        vectors = embedder.embed([message.text for message in dialogue.messages], "document")
        before = [None, *dialogue.messages[:-1]]
        docs = [
            VectorDoc(
                id=message.id,
                tenant=TENANT,
                vector=vectors[position],
                version=1,
                text=message.text,
                fields={
                    "tenant": TENANT,
                    "namespace": DEFAULT_NAMESPACE,
                    "user_id": user_of(dialogue),
                    "session_id": message.session_id,
                    "memory_type": MemoryType.MESSAGE.value,
                    "record_id": message.id,
                    "created_at": message.created_at,
                    "updated_at": message.created_at,
                    "speaker": speaker_of(message.text),
                },
                context=context_of(
                    previous.text
                    if previous is not None and previous.session_id == message.session_id
                    else None
                ),
            )
            for position, (message, previous) in enumerate(
                zip(dialogue.messages, before, strict=True)
            )
        ]
        failures = index.upsert(docs)
        if failures:
            raise RuntimeError(f"{len(failures)} docs not indexed: {next(iter(failures.values()))}")
    return index


def user_of(dialogue: Conversation) -> str:
    return f"user-{dialogue.id}"


def queries_of(dialogues: Sequence[Conversation], embedder: LocalEmbedder) -> list[Query]:
    queries: list[Query] = []
    for dialogue in dialogues:
        texts = [question.text for question in dialogue.questions]
        # As asked (a static model's document vector is the plain mean), and as the service
        # embeds a question (what meaning_of keeps of it).
        vectors = embedder.embed(texts, "document")
        content_vectors = embedder.embed([meaning_of(text) for text in texts], "query")
        conditions = [Condition("user_id", "eq", user_of(dialogue))]
        queries.extend(
            Query(question.text, question.evidence_id, vector, content, conditions)
            for question, vector, content in zip(
                dialogue.questions, vectors, content_vectors, strict=True
            )
        )
    return queries


def recalls(index: LocalVectorIndex, queries: Sequence[Query], method: Method) -> list[float]:
    """Recall at each of AT: the share of queries whose evidence is among the first N hits."""
    found = [0] * len(AT)
    for query in queries:
        ids = [hit.id for hit in method(index, query)]
        for position, depth in enumerate(AT):
            found[position] += query.evidence_id in ids[:depth]
    return [count / len(queries) for count in found]


def run(split: str) -> None:
    embedder = LocalEmbedder()
    dialogues = conversations(SEED, SPLITS[split])
    index = index_of(dialogues, embedder)
    queries = queries_of(dialogues, embedder)
    messages = sum(len(dialogue.messages) for dialogue in dialogues)
    prefix = f"retrieval.{split}"
    report(
        f"{prefix}.questions",
        len(queries),
        target=f"{len(dialogues)} conversations, {messages} messages, seed {SEED}",
    )
    at_10: dict[str, float] = {}
    for name, (method, every_depth) in METHODS.items():
        values = recalls(index, queries, method)
        at_10[name] = values[-1]
        for depth, value in zip(AT, values, strict=True):
            if every_depth or depth == DEEPEST:
                target = f"target {TARGET_AT_10}" if name == "hybrid" and depth == 10 else ""
                report(f"{prefix}.{name}.recall@{depth}", value, target=target)
    report(
        f"{prefix}.hybrid_over_rrf.recall@10",
        at_10["hybrid"] / at_10["rrf"],
        target="memkit's default over plain RRF",
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__)
    parser.add_argument(
        "--dev", action="store_true", help="the DEV split (the tuning one), not HELD-OUT"
    )
    arguments = parser.parse_args(argv)
    run("dev" if arguments.dev else "held_out")


if __name__ == "__main__":
    main()
