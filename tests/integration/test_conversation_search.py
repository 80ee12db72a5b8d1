"""A message is searched as it reads in its conversation: who said it and the turn before it
(memkit.vectors.conversation), through the real API handler and the real indexer on moto."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from memkit.embeddings.bedrock import TITAN_V2, TitanEmbedder
from memkit.models.memory import SearchRequest
from memkit.service.long_term import LongTermService
from memkit.store import keys
from tests.conftest import ApiResponse
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration

NS = {"namespace": "chat"}


def _ok(response: ApiResponse, status: int = 200) -> Any:
    assert response.status == status, response.body
    return response.body


def _append(world: MemoryWorld, session: str, *turns: tuple[str, str]) -> None:
    messages = [{"id": i, "role": "user", "content": c} for i, c in turns]
    body = {"user_id": "ada", "messages": messages}
    _ok(world.api("POST", f"/v1/working-memory/{session}/messages", query=NS, body=body), 201)


def _search(world: MemoryWorld, text: str, session: str, **extra: Any) -> list[str]:
    body = {
        "text": text,
        "namespace": {"eq": "chat"},
        "session_id": {"eq": session},
        "memory_type": {"eq": "message"},
        "limit": 10,
        **extra,
    }
    found = _ok(world.api("POST", "/v1/long-term-memory/search", body=body))
    return [hit["id"] for hit in found["memories"]]


def test_a_reply_is_found_by_the_words_of_the_turn_it_answers(world: MemoryWorld) -> None:
    # Given a turn and its reply, appended and indexed one request at a time (so the
    # indexer reads the turn before the reply back from the table)
    _append(world, "work", ("m1", "Maria: Congrats on the promotion!"))
    world.settle()
    _append(world, "work", ("m2", "John: Thanks! I'm an assistant manager now."))
    _append(world, "work", ("m3", "Maria: Lunch tomorrow?"))
    world.settle()

    # When a question uses the words of the first turn only
    found = _search(world, "promotion", "work", search_mode="keyword")

    # Then the reply is found through its context, after the turn that holds the words;
    # the message after the reply is not (its turn before says nothing of a promotion)
    assert found == ["m1", "m2"]
    # And what a hit shows is the message itself, never its context
    hits = _ok(
        world.api(
            "POST",
            "/v1/long-term-memory/search",
            body={"text": "promotion", "session_id": {"eq": "work"}, "search_mode": "keyword"},
        )
    )["memories"]
    assert [h["text"] for h in hits] == [
        "Maria: Congrats on the promotion!",
        "John: Thanks! I'm an assistant manager now.",
    ]


def _put(world: MemoryWorld, session: str, *turns: tuple[str, str]) -> None:
    messages = [{"id": i, "role": "user", "content": c} for i, c in turns]
    body = {"user_id": "ada", "messages": messages}
    _ok(world.api("PUT", f"/v1/working-memory/{session}", query=NS, body=body))


def _settled(world: MemoryWorld) -> None:
    """Deliver the stream until it is quiet (a removal brings the next turn back)."""
    for _ in range(5):
        if not world.settle():
            return
    raise AssertionError("the stream did not settle")


def _update_message(
    table: str, session: str, message_id: str, update: str, values: dict[str, Any]
) -> None:
    """Change a message's item in the table directly (what no API route does)."""
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=table,
        Key={
            "PK": {"S": keys.session_pk("default", "chat", session)},
            "SK": {"S": keys.message_sk(message_id)},
        },
        UpdateExpression=update,
        ExpressionAttributeValues=values,
    )


CHECKUP = (
    ("m1", "Maria: How did the check-up go?"),
    ("m2", "John: I'm seeing a cardiologist about my heart murmur."),
    ("m3", "Maria: Oh no, I hope it goes well."),
)


def test_a_removed_turns_words_are_not_found_through_its_reply(world: MemoryWorld) -> None:
    # Given a turn and the reply to it, indexed
    _put(world, "private", *CHECKUP)
    _settled(world)
    assert _search(world, "cardiologist", "private", search_mode="keyword") == ["m2", "m3"]

    # When the turn is deleted from the session (a PUT that leaves it out)
    _put(world, "private", CHECKUP[0], CHECKUP[2])
    _settled(world)

    # Then its words find nothing, not even through the reply it had; the reply is found
    # by its own words and now through the turn before it in the log
    assert _search(world, "cardiologist", "private", search_mode="keyword") == []
    assert _search(world, "hope", "private", search_mode="keyword") == ["m3"]
    assert _search(world, "check-up", "private", search_mode="keyword") == ["m1", "m3"]


def test_a_removed_turns_reply_is_touched_even_when_the_same_batch_changes_it_in_passing(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given a turn and its reply, indexed
    _put(world, "private", *CHECKUP)
    _settled(world)

    # When the turn is deleted and, before the stream is read, the reply is changed in a way
    # the index does not hold (the curator marks it extracted): one batch with both
    _put(world, "private", CHECKUP[0], CHECKUP[2])
    _update_message(dynamodb_table, "private", "m3", "SET extracted = :t", {":t": {"S": "t"}})
    _settled(world)

    # Then the deleted turn's words are not found through the reply either
    assert _search(world, "cardiologist", "private", search_mode="keyword") == []


def test_a_turn_the_index_does_not_hold_is_no_ones_context(world: MemoryWorld) -> None:
    # Given a message written while the session did not index messages, then one that is
    body = {
        "user_id": "ada",
        "index_messages": False,
        "messages": [{"id": "s1", "role": "user", "content": "my bank pin is zebra4471"}],
    }
    _ok(world.api("PUT", "/v1/working-memory/pins", query=NS, body=body))
    body["index_messages"] = True
    body["messages"] = [
        *body["messages"],
        {"id": "s2", "role": "user", "content": "anyway, see you tomorrow"},
    ]
    _ok(world.api("PUT", "/v1/working-memory/pins", query=NS, body=body))
    _settled(world)

    # Then its words are not found through the message after it (its removal would never
    # reach the indexer, which sees only indexed messages)
    assert _search(world, "zebra4471", "pins", search_mode="keyword") == []
    assert _search(world, "tomorrow", "pins", search_mode="keyword") == ["s2"]


def test_a_system_message_is_kept_but_never_found_nor_the_next_turns_context(
    world: MemoryWorld,
) -> None:
    # Given a session that starts with the assistant's instructions, then the user's turn
    messages = [
        {"id": "i1", "role": "system", "content": "You are a travel agent for Fjordline."},
        {"id": "i2", "role": "user", "content": "I want to sail to Bergen"},
    ]
    body = {"user_id": "ada", "messages": messages}
    _ok(world.api("PUT", "/v1/working-memory/agent", query=NS, body=body))
    _settled(world)

    # Then a search finds the user's turn, never the instructions, nor the turn through them
    assert _search(world, "fjordline", "agent", search_mode="keyword") == []
    assert _search(world, "bergen", "agent", search_mode="keyword") == ["i2"]
    # and the session keeps them, as a system message
    document = _ok(world.api("GET", "/v1/working-memory/agent", query=NS))
    assert [(m["id"], m["role"]) for m in document["messages"]] == [
        ("i1", "system"),
        ("i2", "user"),
    ]


def test_a_turn_whose_text_changes_gives_its_reply_the_new_context(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given a turn and its reply, indexed
    _put(world, "edit", ("e1", "Ada: my new flat is in Lisbon"), ("e2", "Bob: lovely!"))
    _settled(world)
    assert _search(world, "lisbon", "edit", search_mode="keyword") == ["e1", "e2"]

    # When the turn's text is changed in the table (no API route edits a message: an
    # operator's redaction)
    _update_message(
        dynamodb_table,
        "edit",
        "e1",
        "SET content = :c, written_us = written_us + :one",
        {":c": {"S": "Ada: my new flat is in Porto"}, ":one": {"N": "1"}},
    )
    _settled(world)

    # Then the reply's context follows
    assert _search(world, "lisbon", "edit", search_mode="keyword") == []
    assert _search(world, "porto", "edit", search_mode="keyword") == ["e1", "e2"]


def test_a_sessions_first_message_has_no_turn_before_it(world: MemoryWorld) -> None:
    _append(world, "one", ("a1", "Ada: the lighthouse keeper retired"))
    _append(world, "two", ("b1", "Bob: we should paint the fence"))
    world.settle()

    assert _search(world, "lighthouse", "two", search_mode="keyword") == []
    assert _search(world, "painting", "two", search_mode="keyword") == ["b1"]  # stemmed


def test_the_default_search_prefers_what_the_person_asked_about_said(world: MemoryWorld) -> None:
    # Given two speakers saying the same thing, and a turn that only names Caroline
    _append(
        world,
        "talk",
        ("t1", "Melanie: I signed up for a pottery class yesterday."),
        ("t2", "Caroline: I signed up for a pottery class yesterday."),
        ("t3", "Melanie: Caroline, you will love it."),
    )
    world.settle()

    # When each is asked about by name with the default search
    # Then what that person said comes first
    assert _search(world, "What class did Caroline sign up for?", "talk")[0] == "t2"
    assert _search(world, "What class did Melanie sign up for?", "talk")[0] == "t1"


def test_bedrock_embedders_are_given_the_same_question_text(world: MemoryWorld) -> None:
    # Given a conversation indexed (local vectors of 256 dimensions, as Titan's smallest)
    _append(
        world,
        "talk",
        ("t1", "Melanie: I signed up for a pottery class yesterday."),
        ("t2", "Caroline: I signed up for a pottery class yesterday."),
    )
    world.settle()
    bedrock = boto3.client("bedrock-runtime", region_name="us-east-1")
    titan = TitanEmbedder(bedrock, dimensions=256, workers=1)
    search = LongTermService(
        world.store.records, world.store.sessions, lambda: world.vector_index, lambda: titan
    )
    vector = [1.0 / 16] * 256
    raw = json.dumps({"embedding": vector, "inputTextTokenCount": 2}).encode()

    # When the default search asks Titan for the question's vector
    with Stubber(bedrock) as stub:
        stub.add_response(
            "invoke_model",
            {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"},
            {
                "modelId": TITAN_V2,
                # Then Titan is sent what the local model embeds: no function words, and
                # not the speaker the question names (Caroline speaks in this session)
                "body": json.dumps(
                    {
                        "inputText": "class sign",
                        "dimensions": 256,
                        "normalize": True,
                        "embeddingTypes": ["float"],
                    }
                ),
                "contentType": "application/json",
                "accept": "application/json",
            },
        )
        found = search.search(
            "default",
            SearchRequest(
                text="What class did Caroline sign up for?",
                session_id={"eq": "talk"},
                namespace={"eq": "chat"},
            ),
        )
        stub.assert_no_pending_responses()
    # And the fusion is the same: what Caroline said comes first
    assert found.memories[0].id == "t2"
