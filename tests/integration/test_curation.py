"""Background curation on moto: the real curator handler reads the real stream records of
session writes and queues jobs on an SQS queue (moto); the real worker handler runs them
with a real provider (the local model, or Bedrock Converse on botocore's Stubber)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from memkit.agentcore.wing import strategy
from memkit.handlers.curator import make_lambda_handler as make_curator_handler
from memkit.handlers.worker import make_lambda_handler as make_worker_handler
from memkit.jobs.curation import Curator, Job, Policy, Queueing
from memkit.service.long_term import LongTermService
from memkit.service.windows import message_tokens
from memkit_dev.local.event_filter import passes
from memkit_dev.local.template import load_template
from tests.conftest import LambdaContextStub
from tests.integration.memory_world import ROOT, MemoryWorld, StreamReader

pytestmark = pytest.mark.integration
SESSION = "/v1/working-memory/chat-1"
# A small window, so a few messages pass the threshold.
POLICY = Policy(window_tokens=200, threshold=0.7, keep=0.4, quiet_seconds=0)


def _curator_filters() -> list[str]:
    template = load_template(ROOT / "template.yaml")
    resource = template["Resources"].get("CuratorFunction")
    if resource is None:  # the template's curator: the one filter it declares
        return ['{"dynamodb": {"NewImage": {"kind": {"S": ["session", "record"]}}}}']
    events = resource["Properties"]["Events"]
    mapping = next(e["Properties"] for e in events.values() if e["Type"] == "DynamoDB")
    return [f["Pattern"] for f in mapping["FilterCriteria"]["Filters"]]


@dataclass
class Curation:
    world: MemoryWorld
    reader: StreamReader
    queue_url: str
    sqs: Any
    model: Any
    policy: Policy = POLICY

    def curate(self) -> list[Job]:
        """Deliver session writes to the curator; the jobs it queued."""
        filters = _curator_filters()
        records = [r for r in self.reader.read() if passes(filters, r)]
        sent: list[Job] = []
        store = self.world.store

        def send(job: Job) -> None:
            sent.append(job)
            self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=job.to_json())

        handler = make_curator_handler(
            lambda: Queueing(store.curation, store.sessions, send, self.policy)
        )
        if records:
            assert handler({"Records": records}, LambdaContextStub()) == {"batchItemFailures": []}
        return sent

    def work(self, model: Any | None = None) -> dict[str, Any]:
        """Run every queued job through the worker handler, as the SQS event source would."""
        store = self.world.store
        long_term = LongTermService(
            store.records,
            store.sessions,
            lambda: self.world.vector_index,
            lambda: self.world.embedder,
        )
        chosen = model or self.model
        # As production wires it: an AgentCore memory's sessions run its strategies.
        strategies = [strategy(store, long_term, chosen)]
        curator = Curator(
            store.curation, store.sessions, long_term, chosen, self.policy, strategies=strategies
        )
        handler = make_worker_handler(lambda: curator)
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:  # the event source invokes nothing for an empty queue
            return {"batchItemFailures": []}
        event = {
            "Records": [
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": m.get("Attributes", {}),
                    "messageAttributes": {},
                    "md5OfBody": m["MD5OfBody"],
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:work",
                    "awsRegion": "us-east-1",
                }
                for m in messages
            ]
        }
        response = dict(handler(event, LambdaContextStub()))
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
        return response


@pytest.fixture
def curation(world: MemoryWorld, dynamodb_table: str) -> Curation:
    from memkit.llm.local import LocalModel

    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="work", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    return Curation(world, StreamReader(dynamodb_table), url, sqs, LocalModel())


@pytest.fixture
def server_window(curation: Curation) -> Curation:
    """Curation with the server's default window (summary_window_tokens, 16,000 tokens)."""
    curation.policy = Policy(quiet_seconds=0)
    return curation


def _titled(world: MemoryWorld) -> None:
    """A session that has its title already (so only extraction is queued)."""
    body = {"user_id": "ada", "messages": [], "title": "Moving"}
    assert world.api("PUT", SESSION, body=body).status == 200


def _say(world: MemoryWorld, *texts: str, role: str = "user", start: int = 0) -> None:
    messages = [
        {"id": f"m{start + i:03d}", "role": role if i % 2 == 0 else "assistant", "content": t}
        for i, t in enumerate(texts)
    ]
    response = world.api(
        "POST", f"{SESSION}/messages", body={"messages": messages, "user_id": "ada"}
    )
    assert response.status == 201, response.body


LONG = [
    f"Message number {i}: we talked about the garden, the roses, the tomatoes and the weather "
    f"in Lisbon for a while, and the plan for week {i}."
    for i in range(30)
]


def test_a_session_past_its_window_is_summarised_and_keeps_its_newest_messages(
    curation: Curation,
) -> None:
    world = curation.world
    _say(world, *LONG)

    queued = curation.curate()
    response = curation.work()
    document = world.api("GET", SESSION).body
    log = world.api("GET", f"{SESSION}/messages", query={"limit": 100}).body

    assert "summarize" in [job.kind for job in queued]
    assert response == {"batchItemFailures": []}
    assert document["context"]  # the older messages, folded
    assert 0 < len(document["messages"]) < len(LONG)
    assert document["messages"][-1]["id"] == "m029"  # the newest stay in view
    assert sum(m["content"] in document["context"] for m in document["messages"]) == 0
    assert len(log["messages"]) == len(LONG)  # the log keeps every message


def test_a_summary_job_run_twice_changes_nothing_more(curation: Curation) -> None:
    world = curation.world
    _say(world, *LONG)
    queued = curation.curate()
    curation.work()
    first = world.api("GET", SESSION).body

    for job in queued:  # the queue delivers it again
        curation.sqs.send_message(QueueUrl=curation.queue_url, MessageBody=job.to_json())
    curation.work()
    second = world.api("GET", SESSION).body

    assert second["context"] == first["context"]
    assert [m["id"] for m in second["messages"]] == [m["id"] for m in first["messages"]]


def test_a_short_session_gets_a_title_and_no_summary(curation: Curation) -> None:
    world = curation.world
    _say(world, "Can you help me plan a trip to Oslo in May?", "Of course! What do you like?")

    queued = curation.curate()
    curation.work()
    document = world.api("GET", SESSION).body

    assert sorted(job.kind for job in queued) == ["extract", "title"]
    assert document["title"] == "Can you help me plan a trip to Oslo in May?"
    assert document["context"] is None


def test_the_workers_own_writes_queue_nothing(curation: Curation) -> None:
    world = curation.world
    _say(world, *LONG)
    curation.curate()
    curation.work()

    again = curation.curate()  # the summary and title writes come back on the stream

    assert again == []


def test_extraction_waits_for_the_session_to_be_quiet(curation: Curation) -> None:
    world = curation.world
    _titled(world)
    _say(world, "I moved to Lisbon last week.", "Nice!")
    first = curation.curate()
    _say(world, "My sister lives in Porto.", "Good to know.", start=2)  # before the job runs

    # the first job finds a newer write: it asks the model nothing (no answer is stubbed)
    response = curation.work(model=_converse_model([]))

    assert [job.kind for job in first] == ["extract"]
    assert response == {"batchItemFailures": []}
    log = world.api("GET", f"{SESSION}/messages", query={"limit": 100}).body
    assert {m["discrete_memory_extracted"] for m in log["messages"]} == {"f"}


# -- the session's own window (a write's context_window_max or model_name, as on AMS) ---------

# 120 messages of about 70 tokens (8,500 in all): past 70% of a 2,000-token window, well
# within 70% of the server's 16,000.
TURNS = [
    {
        "id": f"t{i:03d}",
        "role": "user" if i % 2 == 0 else "assistant",
        "content": f"Turn {i:03d}: we planned the garden in Lisbon, the roses, the tomatoes, "
        "the basil and the watering schedule for the hot weeks of the summer, and what we "
        "might plant next spring on the small sunny balcony by the old kitchen window upstairs.",
    }
    for i in range(120)
]


def _put(world: MemoryWorld, messages: list[dict[str, Any]], **query: Any) -> dict[str, Any]:
    body = {"user_id": "ada", "messages": messages, "title": "Garden"}
    response = world.api("PUT", SESSION, query=query, body=body)
    assert response.status == 200, response.body
    return dict(response.body)


def _tokens(document: dict[str, Any]) -> int:
    return sum(message_tokens(m["role"], m["content"]) for m in document["messages"])


def test_a_put_with_a_context_window_is_summarised_against_it(server_window: Curation) -> None:
    world = server_window.world
    assert 8_000 < sum(message_tokens(t["role"], t["content"]) for t in TURNS) < 9_000

    put = _put(world, TURNS, context_window_max=2000)
    queued = server_window.curate()
    response = server_window.work()
    document = world.api("GET", SESSION).body

    assert put["context_window_max"] == 2000
    assert "summarize" in [job.kind for job in queued]
    assert response == {"batchItemFailures": []}
    assert document["context"]  # the older turns, folded into the running summary
    assert document["messages"][-1]["id"] == "t119"  # the newest stay in view
    assert 0 < _tokens(document) <= 0.4 * 2000  # the view keeps 40% of the session's window
    assert document["message_count"] == len(TURNS)  # the log keeps every message
    assert document["context_window_max"] == 2000


def test_a_session_that_gave_no_window_is_summarised_against_the_servers(
    server_window: Curation,
) -> None:
    world = server_window.world

    put = _put(world, TURNS)
    queued = server_window.curate()
    server_window.work()
    document = world.api("GET", SESSION).body

    assert put["context_window_max"] is None
    assert "summarize" not in [job.kind for job in queued]
    assert document["context"] is None
    assert [m["id"] for m in document["messages"]] == [t["id"] for t in TURNS]


def test_a_later_put_with_a_smaller_window_summarises_the_same_messages(
    server_window: Curation,
) -> None:
    world = server_window.world
    _put(world, TURNS)
    server_window.curate()
    server_window.work()

    _put(world, TURNS, context_window_max=2000)  # no new message: only the window changes
    queued = server_window.curate()
    server_window.work()
    document = world.api("GET", SESSION).body

    assert [job.kind for job in queued] == ["summarize"]
    assert document["context"]
    assert 0 < _tokens(document) <= 0.4 * 2000


def test_a_patch_of_the_window_summarises_and_null_gives_back_the_servers(
    server_window: Curation,
) -> None:
    world = server_window.world
    _put(world, TURNS, context_window_max=2000)
    server_window.curate()
    server_window.work()

    reset = world.api("PATCH", SESSION, body={"context_window_max": None})
    after_reset = server_window.curate()
    _put(world, TURNS)  # every message back in view (8,500 tokens), none new
    shrunk = world.api("PATCH", SESSION, body={"context_window_max": 1000})
    after_shrink = server_window.curate()
    server_window.work()
    document = world.api("GET", SESSION).body

    assert reset.status == 200, reset.body
    assert reset.body["context_window_max"] is None
    assert "summarize" not in [job.kind for job in after_reset]  # within 70% of 16,000
    assert shrunk.status == 200, shrunk.body
    assert [job.kind for job in after_shrink] == ["summarize"]
    assert document["context_window_max"] == 1000
    assert 0 < _tokens(document) <= 0.4 * 1000


def test_a_write_without_a_window_keeps_the_sessions(server_window: Curation) -> None:
    world = server_window.world
    _put(world, TURNS[:2], model_name="gpt-4")  # an 8,192-token window

    _put(world, TURNS[:4])  # agent-memory-client's data helpers send none
    appended = world.api("POST", f"{SESSION}/messages", body={"messages": TURNS[4:6]})
    shown = world.api("GET", SESSION).body["context_window_max"]
    world.api(
        "POST",
        f"{SESSION}/messages",
        query={"context_window_max": 3000},
        body={"messages": TURNS[6:8]},
    )
    changed = world.api("GET", SESSION).body["context_window_max"]

    assert appended.status == 201, appended.body
    assert shown == 8192
    assert changed == 3000


# -- extraction with Bedrock Converse (botocore's Stubber, real shapes) -------------------------


def _converse_answer(text: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 120, "outputTokens": 40, "totalTokens": 160},
        "metrics": {"latencyMs": 420},
    }


def _converse_model(answers: list[str]) -> Any:
    from memkit.llm.bedrock import ConverseModel

    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    stubber = Stubber(client)
    for answer in answers:
        stubber.add_response("converse", _converse_answer(answer))
    stubber.activate()
    model = ConverseModel(client, "amazon.nova-lite-v1:0", sleep=lambda _: None)
    model._stubber = stubber  # type: ignore[attr-defined]  # kept alive with the model
    return model


def test_extracted_facts_become_records_and_the_messages_are_marked(curation: Curation) -> None:
    world = curation.world
    _titled(world)
    _say(world, "I moved to Lisbon last week. I work as a nurse.", "Congratulations!")
    curation.curate()
    facts = json.dumps(
        {
            "memories": [
                {
                    "text": "Ada works as a nurse",
                    "memory_type": "semantic",
                    "topics": ["work"],
                    "entities": ["Ada"],
                    "source_ids": ["m000"],
                },
                {
                    "text": "Ada moved to Lisbon",
                    "memory_type": "episodic",
                    "topics": ["home"],
                    "entities": ["Ada", "Lisbon"],
                    "event_date": "2026-11-16T00:00:00Z",
                    "source_ids": ["m000"],
                },
            ]
        }
    )

    response = curation.work(model=_converse_model([facts]))
    world.settle()
    found = world.api(
        "POST",
        "/v1/long-term-memory/search",
        body={"text": "", "user_id": {"eq": "ada"}, "memory_type": {"ne": "message"}},
    ).body
    log = world.api("GET", f"{SESSION}/messages", query={"limit": 100}).body

    assert response == {"batchItemFailures": []}
    texts = {m["text"]: m for m in found["memories"]}
    assert set(texts) == {"Ada works as a nurse", "Ada moved to Lisbon"}
    assert texts["Ada moved to Lisbon"]["event_date"].startswith("2026-11-16")
    assert texts["Ada works as a nurse"]["extracted_from"] == ["m000"]
    assert texts["Ada works as a nurse"]["session_id"] == "chat-1"
    assert {m["discrete_memory_extracted"] for m in log["messages"]} == {"t"}


_TURN = re.compile(r'<turn id="([^"]+)"[^>]*>\n(.*?)\n</turn>', re.DOTALL)
_SENTENCE = re.compile(r"[^.!?]+[.!?]")


def _credulous_model() -> Any:
    """A Converse model whose Bedrock believes everything it is shown: each sentence of three
    words or more in a turn of the conversation comes back as a memory from that turn (what
    a model may do with whatever it is given as the user's conversation). The model runs for
    real; only the endpoint is answered, from the request, before anything is sent."""
    from memkit.llm.bedrock import ConverseModel

    client = boto3.client("bedrock-runtime", region_name="us-east-1")

    class Answered:
        status_code = 200

    def answer(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        body = json.loads(params["body"])
        if "curate long-term memory" not in body["system"][0]["text"]:
            return Answered(), {**_converse_answer("no"), "ResponseMetadata": {}}
        shown = body["messages"][0]["content"][0]["text"]
        memories = [
            {"text": sentence.strip(), "memory_type": "semantic", "source_ids": [turn_id]}
            for turn_id, content in _TURN.findall(shown)
            for sentence in _SENTENCE.findall(content)
            if len(sentence.split()) >= 3
        ]
        found = json.dumps({"memories": memories})
        return Answered(), {**_converse_answer(found), "ResponseMetadata": {}}

    client.meta.events.register("before-call.bedrock-runtime.Converse", answer)
    return ConverseModel(client, "amazon.nova-lite-v1:0", sleep=lambda _: None)


def _post(world: MemoryWorld, *turns: tuple[str, str, str]) -> None:
    messages = [{"id": i, "role": role, "content": text} for i, role, text in turns]
    body = {"messages": messages, "user_id": "ada"}
    response = world.api("POST", f"{SESSION}/messages", body=body)
    assert response.status == 201, response.body


def _extract_credulously(curation: Curation, *turns: tuple[str, str, str]) -> dict[str, Any]:
    """Post `turns` (id, role, text) to a titled session, then run the extraction they call
    for with a model that believes whatever it is shown; the worker's answer."""
    world = curation.world
    _titled(world)
    _post(world, *turns)
    curation.curate()
    response = curation.work(model=_credulous_model())
    world.settle()
    return response


def _records(world: MemoryWorld) -> dict[str, dict[str, Any]]:
    found = world.api(
        "POST",
        "/v1/long-term-memory/search",
        body={"text": "", "user_id": {"eq": "ada"}, "memory_type": {"ne": "message"}},
    ).body
    return {m["text"]: m for m in found["memories"]}


def test_a_system_message_is_never_mined_for_facts_about_the_user(curation: Curation) -> None:
    # Given a conversation that starts with the assistant's instructions, when curation
    # extracts memories with a model that believes whatever it is shown
    world = curation.world
    response = _extract_credulously(
        curation,
        ("s0", "system", "You are a travel agent. The user is a vegetarian."),
        ("m1", "user", "I live in Bergen with my two cats."),
        ("m2", "assistant", "Hi!"),
    )

    # Then what the user said is remembered, and nothing of the instructions
    assert response == {"batchItemFailures": []}
    records = _records(world)
    assert set(records) == {"I live in Bergen with my two cats."}
    assert records["I live in Bergen with my two cats."]["extracted_from"] == ["m1"]
    # and every message, the instructions included, is marked read
    log = world.api("GET", f"{SESSION}/messages", query={"limit": 100}).body
    assert {m["id"]: m["discrete_memory_extracted"] for m in log["messages"]} == {
        "s0": "t",
        "m1": "t",
        "m2": "t",
    }


def test_a_session_whose_only_facts_are_instructions_gives_no_memories(
    curation: Curation,
) -> None:
    # Given a session where only the developer's instructions state anything, when
    # curation extracts memories with a model that believes whatever it is shown
    world = curation.world
    response = _extract_credulously(
        curation,
        ("s0", "developer", "You are a travel agent. The user is a vegetarian."),
        ("s1", "system", "Always answer in Norwegian."),
    )

    # Then no memory is made of them, and they are marked read
    assert response == {"batchItemFailures": []}
    assert _records(world) == {}
    log = world.api("GET", f"{SESSION}/messages", query={"limit": 100}).body
    assert {m["discrete_memory_extracted"] for m in log["messages"]} == {"t"}


def test_a_throttled_model_fails_the_job_for_the_queue_to_retry(curation: Curation) -> None:
    from memkit.llm.bedrock import ConverseModel

    world = curation.world
    _titled(world)
    _say(world, "I moved to Lisbon last week.", "Nice!")
    curation.curate()
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    model = ConverseModel(client, "amazon.nova-lite-v1:0", max_attempts=2, sleep=lambda _: None)

    with Stubber(client) as stub:
        for _ in range(2):
            stub.add_client_error("converse", "ThrottlingException", "Too many requests", 429)
        response = curation.work(model=model)

    assert len(response["batchItemFailures"]) == 1
    log = world.api("GET", f"{SESSION}/messages", query={"limit": 100}).body
    assert {m["discrete_memory_extracted"] for m in log["messages"]} == {"f"}


def test_a_record_created_without_topics_is_described(curation: Curation) -> None:
    world = curation.world
    body = {
        "memories": [
            {
                "id": "r1",
                "text": "Ada and Bruno flew to Oslo for the Nordic "
                "Data Conference; Ada presented her work on sleep research.",
            }
        ]
    }
    assert world.api("POST", "/v1/long-term-memory/", body=body).status == 200
    tagged = {"memories": [{"id": "r2", "text": "Ada likes tea", "topics": ["drinks"]}]}
    assert world.api("POST", "/v1/long-term-memory/", body=tagged).status == 200

    queued = curation.curate()
    response = curation.work()
    record = world.api("GET", "/v1/long-term-memory/r1").body

    assert [(job.kind, job.record_id) for job in queued] == [("describe", "r1")]
    assert response == {"batchItemFailures": []}
    assert record["topics"] or record["entities"]


def test_an_extraction_cut_short_is_asked_again_in_halves(curation: Curation) -> None:
    world = curation.world
    _titled(world)
    _say(world, "I work as a nurse.", "I moved to Lisbon last week.")
    curation.curate()
    cut = '{"memories": [{"text": "Ada works as a nurse", "memory_type": "semantic"}, {"te'
    nurse = json.dumps({"memories": [{"text": "Ada works as a nurse", "memory_type": "semantic"}]})
    moved = json.dumps({"memories": [{"text": "Ada moved to Lisbon", "memory_type": "episodic"}]})
    model = _converse_model([])
    model._stubber.add_response("converse", {**_converse_answer(cut), "stopReason": "max_tokens"})
    model._stubber.add_response("converse", _converse_answer(nurse))
    model._stubber.add_response("converse", _converse_answer(moved))

    response = curation.work(model=model)
    world.settle()
    found = world.api(
        "POST",
        "/v1/long-term-memory/search",
        body={"text": "", "user_id": {"eq": "ada"}, "memory_type": {"ne": "message"}},
    ).body

    assert response == {"batchItemFailures": []}
    assert {m["text"] for m in found["memories"]} == {"Ada works as a nurse", "Ada moved to Lisbon"}


def _decisions(*decisions: tuple[int, str, list[str]]) -> str:
    """A curate answer: per fact (its number), the action and the memories it names."""
    return json.dumps(
        {"decisions": [{"fact": f, "action": a, "memories": m} for f, a, m in decisions]}
    )


def _current(world: MemoryWorld) -> dict[str, dict[str, Any]]:
    """Ada's current long-term memories (not messages), by text."""
    found = world.api(
        "POST",
        "/v1/long-term-memory/search",
        body={"text": "", "user_id": {"eq": "ada"}, "memory_type": {"ne": "message"}},
    ).body
    return {m["text"]: m for m in found["memories"]}


def _curate_one(
    curation: Curation, stored: dict[str, Any], said: str, fact: str, decision: str
) -> dict[str, Any]:
    """Ada has `stored`; she says `said`; the model finds `fact` in it and decides, shown
    `stored` as the one candidate (m1), `decision` (a recorded Converse answer). The
    worker's answer."""
    world = curation.world
    body = {"memories": [{"user_id": "ada", "topics": ["home"], **stored}]}
    assert world.api("POST", "/v1/long-term-memory/", body=body).status == 200
    world.settle()
    _titled(world)
    _say(world, said, "Noted!")
    curation.curate()
    found = {"text": fact, "memory_type": "semantic", "topics": ["news"], "source_ids": ["m000"]}
    answers = [json.dumps({"memories": [found]}), decision]
    response = curation.work(model=_converse_model(answers))
    world.settle()
    return response


def test_a_contradicting_fact_supersedes_the_one_it_contradicts(curation: Curation) -> None:
    world = curation.world
    paris = {"id": "paris", "text": "Ada lives in Paris", "key": "home_city"}

    response = _curate_one(
        curation,
        paris,
        "I moved to Berlin last month.",
        "Ada lives in Berlin",
        _decisions((1, "supersede", ["m1"])),
    )

    assert response == {"batchItemFailures": []}
    current = _current(world)
    assert set(current) == {"Ada lives in Berlin"}  # Paris is no longer current ...
    berlin = current["Ada lives in Berlin"]
    assert berlin["supersedes"] == ["paris"]
    assert berlin["key"] == "home_city"  # ... and Berlin holds its slot
    assert berlin["extracted_from"] == ["m000"]
    old = world.api("GET", "/v1/long-term-memory/paris").body  # kept, retired, linked
    assert old["superseded_by"] == berlin["id"]
    assert old["retired_at"] is not None
    assert old["valid_until"] is not None
    history = world.api("GET", "/v1/long-term-memory/paris/history").body
    assert [v["change"] for v in history["versions"]][:1] == ["supersede"]
    assert history["versions"][0]["by"] == "memkit"


def test_a_refining_fact_supersedes_the_vaguer_one(curation: Curation) -> None:
    world = curation.world
    coffee = {"id": "coffee", "text": "Ada likes coffee"}

    response = _curate_one(
        curation,
        coffee,
        "Black coffee, no sugar, that's how I like it.",
        "Ada likes her coffee black without sugar",
        _decisions((1, "supersede", ["m1"])),
    )

    assert response == {"batchItemFailures": []}
    assert set(_current(world)) == {"Ada likes her coffee black without sugar"}
    assert world.api("GET", "/v1/long-term-memory/coffee").body["superseded_by"]


def test_an_unrelated_fact_is_added_beside_the_candidate(curation: Curation) -> None:
    world = curation.world
    nurse = {"id": "nurse", "text": "Ada works as a nurse in Lisbon"}

    response = _curate_one(
        curation,
        nurse,
        "We adopted a cat called Miso.",
        "Ada has a cat called Miso",
        _decisions((1, "add", [])),
    )

    assert response == {"batchItemFailures": []}
    assert set(_current(world)) == {"Ada works as a nurse in Lisbon", "Ada has a cat called Miso"}
    assert world.api("GET", "/v1/long-term-memory/nurse").body["superseded_by"] is None


def test_a_known_fact_is_skipped_and_its_memory_gains_the_evidence(curation: Curation) -> None:
    world = curation.world
    nurse = {"id": "nurse", "text": "Ada works as a nurse in Lisbon"}

    response = _curate_one(
        curation,
        nurse,
        "I'm a nurse here in Lisbon.",
        "Ada is a nurse in Lisbon",
        _decisions((1, "skip", ["m1"])),
    )

    assert response == {"batchItemFailures": []}
    current = _current(world)
    assert set(current) == {"Ada works as a nurse in Lisbon"}  # one record, holding both
    assert sorted(current["Ada works as a nurse in Lisbon"]["topics"]) == ["home", "news"]
    assert current["Ada works as a nurse in Lisbon"]["extracted_from"] == ["m000"]


def test_one_answer_decides_each_fact_against_its_own_candidates(curation: Curation) -> None:
    world = curation.world
    paris = {"id": "paris", "text": "Ada lives in Paris", "user_id": "ada", "topics": ["home"]}
    assert world.api("POST", "/v1/long-term-memory/", body={"memories": [paris]}).status == 200
    world.settle()
    _titled(world)
    _say(world, "I moved to Berlin, and we adopted a cat.", "Lovely!")
    curation.curate()
    facts = [
        {"text": "Ada lives in Berlin", "source_ids": ["m000"]},
        {"text": "Ada has a cat", "source_ids": ["m000"]},
    ]
    # Paris is shown with each fact: m1 with the first, m2 with the second. A decision that
    # names another fact's memory (m1 for fact 2) names nothing of its own: an add.
    decided = _decisions((1, "supersede", ["m1"]), (2, "supersede", ["m1"]))

    response = curation.work(model=_converse_model([json.dumps({"memories": facts}), decided]))
    world.settle()

    assert response == {"batchItemFailures": []}
    assert set(_current(world)) == {"Ada lives in Berlin", "Ada has a cat"}


def test_an_unusable_curation_answer_fails_the_job_and_keeps_the_turns_unread(
    curation: Curation,
) -> None:
    world = curation.world
    paris = {"id": "paris", "text": "Ada lives in Paris", "user_id": "ada", "topics": ["home"]}
    assert world.api("POST", "/v1/long-term-memory/", body={"memories": [paris]}).status == 200
    world.settle()
    _titled(world)
    _say(world, "I moved to Berlin.", "Lovely!")
    curation.curate()
    facts = json.dumps({"memories": [{"text": "Ada lives in Berlin", "source_ids": ["m000"]}]})

    response = curation.work(model=_converse_model([facts, "I would rather not say."]))
    world.settle()

    assert len(response["batchItemFailures"]) == 1  # retried by the queue
    assert set(_current(world)) == {"Ada lives in Paris"}
    log = world.api("GET", f"{SESSION}/messages", query={"limit": 100}).body
    assert {m.get("discrete_memory_extracted") for m in log["messages"]} != {"t"}


# -- AgentCore: a memory's strategies run on its events (docs/agentcore.md "Extraction") -----


def _agentcore_memory(world: MemoryWorld) -> dict[str, str]:
    """A memory with a strategy of each kind memkit runs; its id and strategy ids by name."""
    strategies = [
        {"semanticMemoryStrategy": {"name": "facts", "namespaces": ["/users/{actorId}/facts"]}},
        {"userPreferenceMemoryStrategy": {"name": "prefs"}},
        {"episodicMemoryStrategy": {"name": "episodes"}},
        {
            "summaryMemoryStrategy": {
                "name": "sums",
                "namespaces": ["/summaries/{actorId}/{sessionId}"],
            }
        },
    ]
    body = {"name": "agent", "eventExpiryDuration": 30, "memoryStrategies": strategies}
    made = world.api("POST", "/memories/create", body=body)
    assert made.status == 202, made.body
    memory = made.body["memory"]
    return {"id": memory["id"], **{s["name"]: s["strategyId"] for s in memory["strategies"]}}


def _event(world: MemoryWorld, memory: str, *turns: tuple[str, str], **extra: Any) -> None:
    payload = [{"conversational": {"content": {"text": t}, "role": r}} for r, t in turns]
    body = {
        "actorId": "ada",
        "sessionId": "s1",
        "eventTimestamp": 1_780_000_000,
        "payload": payload,
        **extra,
    }
    made = world.api("POST", f"/memories/{memory}/events", body=body)
    assert made.status == 201, made.body


def _retrieve(world: MemoryWorld, memory: str, namespace: str) -> list[dict[str, Any]]:
    body = {"namespace": namespace, "searchCriteria": {"searchQuery": "Ada", "topK": 10}}
    found = world.api("POST", f"/memories/{memory}/retrieve", body=body)
    assert found.status == 200, found.body
    return list(found.body["memoryRecordSummaries"])


def test_an_agentcore_memory_s_strategies_mine_its_events_into_their_namespaces(
    curation: Curation,
) -> None:
    world = curation.world
    memory = _agentcore_memory(world)
    _event(world, memory["id"], ("USER", "My PIN is 9911."), extractionMode="SKIP")
    _event(
        world,
        memory["id"],
        ("USER", "I moved to Lisbon last week. I work as a nurse. I prefer tea to coffee."),
        ("ASSISTANT", "Congratulations on the move!"),
    )
    jobs = curation.curate()
    facts = {
        "memories": [
            {"text": "Ada works as a nurse", "memory_type": "semantic"},
            {
                "text": "Ada moved to Lisbon",
                "memory_type": "episodic",
                "event_date": "2026-05-10T00:00:00Z",
            },
        ]
    }
    prefs = {"memories": [{"text": "Ada prefers tea to coffee", "memory_type": "semantic"}]}
    summary = "Ada moved to Lisbon and works as a nurse; she prefers tea."
    # (then the session's title, memkit's own curation of every session)
    model = _converse_model([json.dumps(facts), json.dumps(prefs), summary, "Moving"])

    # When the worker runs the extraction job the event queued
    response = curation.work(model=model)
    world.settle()

    # Then each strategy's records are in its namespace, with its strategy id
    assert [job.kind for job in jobs].count("extract") >= 1
    assert response == {"batchItemFailures": []}
    in_facts = _retrieve(world, memory["id"], "/users/ada/facts")
    assert [r["content"]["text"] for r in in_facts] == ["Ada works as a nurse"]
    assert in_facts[0]["memoryStrategyId"] == memory["facts"]
    prefs_space = f"/strategies/{memory['prefs']}/actors/ada"
    assert [r["content"]["text"] for r in _retrieve(world, memory["id"], prefs_space)] == [
        "Ada prefers tea to coffee"
    ]
    episodes = f"/strategies/{memory['episodes']}/actors/ada/sessions/s1"
    assert [r["content"]["text"] for r in _retrieve(world, memory["id"], episodes)] == [
        "Ada moved to Lisbon"
    ]
    summaries = _retrieve(world, memory["id"], "/summaries/ada/s1")
    assert [r["content"]["text"] for r in summaries] == [summary]
    assert summaries[0]["memoryStrategyId"] == memory["sums"]
    # and every message of the session, the SKIP event's too, has been read
    log = world.api(
        "GET", "/v1/working-memory/s1/messages", query={"limit": 100, "namespace": memory["id"]}
    ).body
    assert {m["discrete_memory_extracted"] for m in log["messages"]} == {"t"}


def test_an_agentcore_extraction_run_again_writes_no_second_record(curation: Curation) -> None:
    world = curation.world
    memory = _agentcore_memory(world)
    _event(world, memory["id"], ("USER", "I work as a nurse."))
    curation.curate()
    facts = json.dumps({"memories": [{"text": "Ada works as a nurse", "memory_type": "semantic"}]})
    prefs = json.dumps({"memories": []})
    curation.work(model=_converse_model([facts, prefs, "Ada is a nurse."]))
    world.settle()

    # When a later event says it again and the model finds the same fact
    _event(world, memory["id"], ("USER", "As I said, I work as a nurse."))
    curation.curate()
    again = json.dumps({"memories": [{"text": "Ada works as a nurse.", "memory_type": "semantic"}]})
    answers = [again, prefs, "Ada is a nurse, she says.", "Work"]  # the last: a title
    response = curation.work(model=_converse_model(answers))
    world.settle()

    # Then the namespace holds it once, and the session's summary is one record, updated
    assert response == {"batchItemFailures": []}
    assert [r["content"]["text"] for r in _retrieve(world, memory["id"], "/users/ada/facts")] == [
        "Ada works as a nurse"
    ]
    assert [r["content"]["text"] for r in _retrieve(world, memory["id"], "/summaries/ada/s1")] == [
        "Ada is a nurse, she says."
    ]


def test_an_agentcore_fact_that_contradicts_one_supersedes_it_and_retrieval_sees_the_new(
    curation: Curation,
) -> None:
    world = curation.world
    memory = _agentcore_memory(world)
    _event(world, memory["id"], ("USER", "I live in Paris."))
    curation.curate()
    paris = json.dumps({"memories": [{"text": "Ada lives in Paris", "memory_type": "semantic"}]})
    none = json.dumps({"memories": []})
    curation.work(model=_converse_model([paris, none, "Ada lives in Paris."]))
    world.settle()
    (old,) = _retrieve(world, memory["id"], "/users/ada/facts")

    # When a later event says she moved, and the model (shown Paris as m1) supersedes it
    _event(world, memory["id"], ("USER", "I moved to Berlin last month."))
    curation.curate()
    berlin = json.dumps({"memories": [{"text": "Ada lives in Berlin", "memory_type": "semantic"}]})
    answers = [berlin, _decisions((1, "supersede", ["m1"])), none, "Ada moved to Berlin.", "Home"]
    response = curation.work(model=_converse_model(answers))
    world.settle()

    # Then retrieval and listing return Berlin only; Paris is kept, superseded by it
    assert response == {"batchItemFailures": []}
    found = _retrieve(world, memory["id"], "/users/ada/facts")
    assert [r["content"]["text"] for r in found] == ["Ada lives in Berlin"]
    listed = world.api(
        "POST", f"/memories/{memory['id']}/memoryRecords", body={"namespace": "/users/ada/facts"}
    )
    assert [r["content"]["text"] for r in listed.body["memoryRecordSummaries"]] == [
        "Ada lives in Berlin"
    ]
    kept = world.api(
        "GET", f"/v1/long-term-memory/{old['memoryRecordId']}", query={"namespace": memory["id"]}
    )
    assert kept.status == 200, kept.body
    assert kept.body["superseded_by"] == found[0]["memoryRecordId"]
