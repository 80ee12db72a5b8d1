"""LoCoMo, development split: does memkit's default search find the messages that answer a
question, measured through the HTTP API of the local stack?

The split (five LoCoMo conversations, ../shared/datasets/locomo-dev relative to the repo)
is ingested and asked exactly as its README says, all five conversations into one stack
(`make serve`'s, memkit_dev.local.stack, auth none: DynamoDB Local where Java 17+ is here,
else moto, or as MEMKIT_BENCH_ENGINE says; the loopback OpenSearch; the stream pump
indexing messages as they are appended):

- every conversation is one session (namespace `locomo`, user and session = the
  conversation id), its turns appended in order with POST /v1/working-memory/{id}/messages,
  100 a request, role `user`, content "<speaker>: <text>" (plus " [shares <caption>]"
  when the turn shares an image), created_at = the session's date plus one second per turn;
  a message's id is its dia_id made lowercase with ":" as "-" ("D1:3" -> "d1-3");
- the benchmark then waits until the index holds every message (the loopback OpenSearch's
  live message docs of namespace `locomo`), never a fixed sleep;
- every question outside category 5 (adversarial: no answer in the conversation) with
  evidence is sent to POST /v1/long-term-memory/search with memory_type message, that
  conversation's session and user, limit 10 and no search mode (the service's default);
  a hit is a returned message whose id maps back to an evidence dia_id. Evidence is read
  as written, except that "D8:6; D9:17" is two ids and "D:11:26" is "D11:26".

Figures: recall@1, @5, @10 per conversation and overall (a question counts if any of its
evidence messages is among the first k), the same for a plain BM25 baseline computed here
over the same message texts (memkit's own KeywordIndex, memkit.vectors.keyword: Okapi BM25,
k1 1.2, b 0.75, words as written, one index per conversation, the question as asked), the
search latency
(median and 95th percentile, timed at the HTTP client), the ingestion throughput (messages
over the time the appends took) and the time until every message was searchable.

Then the latency at scale: one more user ("scale") gets every conversation's turns again,
as many times as it takes to hold SCALE_MESSAGES messages (new sessions and ids), and each
question is asked again over that user's whole memory (user filter, no session), the
search latency median and 95th percentile reported (recall is not: the copies answer too).

    python -m bench.locomo [--engine auto|dynamodb-local|moto] [--dataset DIR]
                           [--vector-store opensearch|dynamodb]

`--vector-store dynamodb` runs the same on VectorStore dynamodb (the stack's vector table
behind its local stand-in for DynamoDB's vector index, which ranks exactly): the figures
are then prefixed `locomo.dynamodb.`, and "every message indexed" counts the vector index's
entries.

It skips (exit 0) when the dataset folder is absent. How long a run takes, and what it
measured, is in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import environment
from bench.figures import median, percentile, report

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "locomo-dev"
NAMESPACE = "locomo"
PER_REQUEST = 100
AT = (1, 5, 10)
DEEPEST = max(AT)
ADVERSARIAL = 5
SEARCHABLE_TIMEOUT = 1800.0
RETRIES = 5  # a 429/503 append is sent again (nothing of it was written), after a backoff
SCALE_USER = "scale"
SCALE_MESSAGES = 5_000  # the product's latency target holds at this many messages a user


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]  # message ids


@dataclass(frozen=True)
class Conversation:
    id: str
    messages: list[dict[str, Any]]  # as appended
    questions: list[Question]
    unanswerable: int  # questions outside category 5 with no evidence: not asked


def message_id(dia_id: str) -> str:
    """The message id of a LoCoMo dia_id ("D1:3" -> "d1-3")."""
    return dia_id.strip().lower().replace(":", "-")


def _evidence(raw: Sequence[str]) -> frozenset[str]:
    """The message ids a question's evidence names ("D8:6; D9:17" is two; "D:11:26" is
    "D11:26", a typo of the dataset)."""
    found = set()
    for entry in raw:
        for part in entry.split(";"):
            part = re.sub(r"^D:(\d+:\d+)$", r"D\1", part.strip())
            if part:
                found.add(message_id(part))
    return frozenset(found)


def _session_start(text: str) -> datetime:
    """A session's date ("1:56 pm on 8 May, 2023") as UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path) -> Conversation:
    raw = json.loads(path.read_text())
    numbers = sorted(
        int(match.group(1)) for key in raw if (match := re.fullmatch(r"session_(\d+)", key))
    )
    messages = []
    for number in numbers:
        start = _session_start(raw[f"session_{number}_date_time"])
        for turn, entry in enumerate(raw[f"session_{number}"]):
            content = f"{entry['speaker']}: {entry['text']}"
            if entry.get("blip_caption"):
                content += f" [shares {entry['blip_caption']}]"
            messages.append(
                {
                    "id": message_id(entry["dia_id"]),
                    "role": "user",
                    "content": content,
                    "created_at": (start + timedelta(seconds=turn)).isoformat(),
                }
            )
    asked = [q for q in raw["qa"] if q.get("category") != ADVERSARIAL]
    questions = [
        Question(str(q["question"]), evidence)
        for q in asked
        if (evidence := _evidence(q.get("evidence") or []))
    ]
    return Conversation(path.stem, messages, questions, len(asked) - len(questions))


def recall(ranked: Sequence[Sequence[str]], questions: Sequence[Question], depth: int) -> float:
    """Share of the questions with an evidence message among the first `depth` ids."""
    found = sum(1 for ids, q in zip(ranked, questions, strict=True) if q.evidence & {*ids[:depth]})
    return found / len(questions)


def bm25_rankings(conversation: Conversation) -> list[list[str]]:
    """The first DEEPEST message ids of plain Okapi BM25 (memkit's KeywordIndex with words as
    written: no stemming, no stop words) over the conversation's messages, for each of its
    questions as asked."""
    from memkit.vectors.keyword import KeywordIndex, plain_terms

    index = KeywordIndex(plain_terms)
    for message in conversation.messages:
        index.upsert(conversation.id, message["id"], message["content"], 1, {})
    return [
        [hit.id for hit in index.search(conversation.id, q.text, DEEPEST)]
        for q in conversation.questions
    ]


Session = tuple[str, str, list[dict[str, Any]]]  # session id, user id, messages


def sessions_of(conversations: Sequence[Conversation]) -> list[Session]:
    """Each conversation as one session of its own user, as the dataset's README says."""
    return [(c.id, c.id, c.messages) for c in conversations]


def scale_sessions(conversations: Sequence[Conversation]) -> list[Session]:
    """Copies of every conversation for SCALE_USER, SCALE_MESSAGES messages in all."""
    sessions: list[Session] = []
    held = 0
    copy = 0
    while held < SCALE_MESSAGES:
        for conversation in conversations:
            wanted = min(len(conversation.messages), SCALE_MESSAGES - held)
            if wanted <= 0:
                break
            session = f"{SCALE_USER}-{copy}-{conversation.id}"
            messages = [{**m, "id": f"{session}-{m['id']}"} for m in conversation.messages[:wanted]]
            sessions.append((session, SCALE_USER, messages))
            held += wanted
        copy += 1
    return sessions


def ingest(client: Any, url: str, sessions: Sequence[Session]) -> tuple[float, int]:
    """Append every session's messages, in order, 100 a request; (seconds, requests that
    had to be retried)."""
    retried = 0
    started = time.monotonic()
    for session_id, user_id, messages in sessions:
        for start in range(0, len(messages), PER_REQUEST):
            body = {"messages": messages[start : start + PER_REQUEST], "user_id": user_id}
            for attempt in range(RETRIES + 1):
                response = client.post(
                    f"{url}/v1/working-memory/{session_id}/messages",
                    params={"namespace": NAMESPACE},
                    json=body,
                )
                if response.status_code not in (429, 503) or attempt == RETRIES:
                    break
                retried += 1
                time.sleep(0.5 * 2**attempt)
            assert response.status_code == 201, (response.status_code, response.text)
    return time.monotonic() - started, retried


def _indexed_messages(stack: Any) -> int:
    """The live message docs of the namespace in the stack's vector index (the loopback
    OpenSearch's, or the vector table's vector index on the stand-in)."""
    from memkit.config import IndexSettings
    from memkit.vectors.dynamodb import scope_of

    if stack.vectors is not None:
        index = stack.vectors.index(stack.config.vector_table, IndexSettings().vector_index_name)
        scope = scope_of(0, "default", NAMESPACE, None).removesuffix("#U#")
        return sum(
            1
            for entry in list(index.entries.values())
            if entry.item["scope"]["S"].startswith(scope)
            and entry.item.get("f_memory_type") == {"S": "message"}
        )
    return sum(
        1
        for _, source in stack.opensearch.documents(IndexSettings().opensearch_index)
        if source.get("namespace") == NAMESPACE
        and source.get("memory_type") == "message"
        and not source.get("deleted")
    )


def until_indexed(stack: Any, total: int) -> float | None:
    """Seconds until the stack's vector index holds `total` live messages of the
    namespace; None if it did not within SEARCHABLE_TIMEOUT."""
    started = time.monotonic()
    while time.monotonic() - started < SEARCHABLE_TIMEOUT:
        held = _indexed_messages(stack)
        if held >= total:
            return time.monotonic() - started
        time.sleep(1.0)
    return None


def ask(
    client: Any,
    url: str,
    conversation: Conversation,
    latencies: list[float],
    user_id: str | None = None,
) -> list[list[str]]:
    """The message ids the default search returns for each question, best first (each
    request's time appended to `latencies`, in ms): within the conversation's session, or
    over all of `user_id`'s messages when given."""
    ranked = []
    for question in conversation.questions:
        scope = (
            {"user_id": user_id}
            if user_id
            else {"user_id": conversation.id, "session_id": conversation.id}
        )
        body = {
            "text": question.text,
            "namespace": NAMESPACE,
            **scope,
            "memory_type": {"eq": "message"},
            "limit": DEEPEST,
        }
        began = time.perf_counter()
        response = client.post(f"{url}/v1/long-term-memory/search", json=body)
        latencies.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, (response.status_code, response.text)
        ranked.append([hit["id"] for hit in response.json()["memories"]])
    return ranked


def report_recall(
    prefix: str,
    ranked: dict[str, list[list[str]]],
    conversations: Sequence[Conversation],
    note: Callable[[Conversation], str],
) -> None:
    """recall@k of `ranked` per conversation and over every question."""
    everything = [q for c in conversations for q in c.questions]
    for conversation in conversations:
        for depth in AT:
            value = recall(ranked[conversation.id], conversation.questions, depth)
            report(f"{prefix}.{conversation.id}.recall@{depth}", value, target=note(conversation))
    joined = [ids for c in conversations for ids in ranked[c.id]]
    for depth in AT:
        value = recall(joined, everything, depth)
        report(f"{prefix}.overall.recall@{depth}", value, target=f"{len(everything)} questions")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", choices=["auto", "dynamodb-local", "moto"])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--vector-store", choices=["opensearch", "dynamodb"], default="opensearch")
    args = parser.parse_args()
    name = "locomo" if args.vector_store == "opensearch" else "locomo.dynamodb"
    files = sorted(args.dataset.glob("*.json")) if args.dataset.is_dir() else []
    if not files:
        print(f"locomo: skipped, no LoCoMo conversations in {args.dataset}", flush=True)
        return 0
    environment.apply()
    import httpx

    from bench.dynamodb_requests import local_stack

    conversations = [load(path) for path in files]
    total = sum(len(c.messages) for c in conversations)
    asked = sum(len(c.questions) for c in conversations)
    report(
        "locomo.messages",
        total,
        target=f"{len(conversations)} conversations ({', '.join(c.id for c in conversations)})",
    )
    report(
        "locomo.questions",
        asked,
        target="outside category 5, with evidence; "
        f"{sum(c.unanswerable for c in conversations)} without evidence not asked",
    )

    def questions_of(conversation: Conversation) -> str:
        return f"{len(conversation.questions)} questions"

    stack_of = local_stack("locomo", args.engine, vector_store=args.vector_store)
    with stack_of as stack, httpx.Client(timeout=120) as client:
        elapsed, retried = ingest(client, stack.url, sessions_of(conversations))
        report(f"{name}.ingest_messages_per_second", total / elapsed, "msg/s", f"{elapsed:.0f} s")
        report(f"{name}.ingest_retried_requests", retried, "", "429/503 answers; target 0")
        searchable = until_indexed(stack, total)
        if searchable is None:
            print(f"locomo: not every message was indexed within {SEARCHABLE_TIMEOUT:.0f} s")
            return 1
        report(f"{name}.all_searchable_s", searchable, "s after the last append")
        latencies: list[float] = []
        memkit = {c.id: ask(client, stack.url, c, latencies) for c in conversations}
        report_recall(f"{name}.memkit", memkit, conversations, questions_of)
        report(
            f"{name}.search_ms",
            median(latencies),
            "ms median",
            f"{len(latencies)} searches, sequential, {total} messages in the stack",
        )
        report(f"{name}.search_p95_ms", percentile(latencies, 0.95), "ms")
        scaled = scale_sessions(conversations)
        ingest(client, stack.url, scaled)
        held = sum(len(messages) for _, _, messages in scaled)
        if until_indexed(stack, total + held) is None:
            print(f"locomo: the scale user's messages were not indexed in {SEARCHABLE_TIMEOUT} s")
            return 1
        at_scale: list[float] = []
        for conversation in conversations:
            ask(client, stack.url, conversation, at_scale, user_id=SCALE_USER)

    bm25 = {c.id: bm25_rankings(c) for c in conversations}
    report_recall(f"{name}.bm25", bm25, conversations, questions_of)
    report(
        f"{name}.search_ms_at_scale",
        median(at_scale),
        "ms median",
        f"target <= 60; {len(at_scale)} searches over one user's {held} messages, "
        f"{total + held} in the stack",
    )
    report(f"{name}.search_p95_ms_at_scale", percentile(at_scale, 0.95), "ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
