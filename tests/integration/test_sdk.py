"""The Python SDK (memkit.client) against the local stack with bearer tokens checked (auth
jwt, as `make serve` runs it): what each call gives back, batching, pagination, ETags, the
API deciding who may do what, and the tool helpers with the calls model SDKs return."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from anthropic.types import ToolParam
from botocore.validate import ParamValidator
from openai.types.chat import ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from memkit.client import (
    AsyncMemkitClient,
    ConflictError,
    MemkitClient,
    NotFoundError,
    PermissionDeniedError,
    UnprocessableEntityError,
    tool_result_messages,
)
from memkit.models.session import Message, SessionWrite
from memkit_dev.local.auth import mint
from memkit_dev.local.stack import LocalStack
from tests.unit.test_sdk_tools import (
    anthropic_call,
    bedrock_answer,
    openai_chat_call,
    openai_responses_call,
)

pytestmark = pytest.mark.integration
READ_WRITE = ["memory:read", "memory:write"]


# Session messages are not indexed here (nothing below searches them): less work. A table of
# its own: a stack that finds another module's items in moto rebuilds its index on start.
JWT_STACK_OPTIONS = {"concurrency": 2, "index_messages": False, "table_name": "memkit-sdk"}


class Counting(httpx.HTTPTransport):
    """A real transport that counts the requests it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


def connect(
    jwt_stack: LocalStack, dev_keys: Path, user: str, *scopes: str, **options: Any
) -> MemkitClient:
    token = mint(dev_keys, user, "default", list(scopes or READ_WRITE))
    return MemkitClient(jwt_stack.url, token=token, **options)


@pytest.fixture(scope="module")
def ada(jwt_stack: LocalStack, dev_keys: Path) -> Iterator[MemkitClient]:
    with connect(jwt_stack, dev_keys, "ada") as client:
        yield client


def test_an_append_of_201_messages_is_three_requests_idempotent_and_pages_back_in_order(
    jwt_stack: LocalStack, dev_keys: Path
) -> None:
    transport = Counting()
    messages = [{"id": f"m{i:03}", "role": "user", "content": f"turn {i}"} for i in range(201)]

    with connect(jwt_stack, dev_keys, "ada", transport=transport) as memkit:
        first = memkit.append_messages("long-chat", messages, user_id="ada")
        again = memkit.append_messages("long-chat", messages[:120], user_id="ada")
        sent_by_appends = len(transport.sent)
        pages = memkit.iter_messages("long-chat", page_size=100)
        oldest = next(pages)
        read_after_one = len(transport.sent)
        rest = list(pages)
        newest = list(memkit.iter_messages("long-chat", order="desc", page_size=40))

    assert (first.created, len(first.appended), first.message_count) == (True, 201, 201)
    assert (again.appended, len(again.already_stored)) == ([], 120)
    assert sent_by_appends == 3 + 2
    assert read_after_one - sent_by_appends == 1  # pages are fetched as they are read
    assert [m.id for m in [oldest, *rest]] == [m["id"] for m in messages]
    assert [m.id for m in newest] == [m["id"] for m in reversed(messages)]


def test_sessions_are_listed_newest_first_a_page_at_a_time(ada: MemkitClient) -> None:
    for n in range(5):
        ada.append_messages(f"chat-{n}", [{"role": "user", "content": "hi"}], namespace="lists")

    listed = list(ada.iter_sessions(namespace="lists", page_size=2))
    page = ada.list_sessions(namespace="lists", limit=2)

    assert listed == [f"chat-{n}" for n in reversed(range(5))]
    assert (page.sessions, page.total) == (["chat-4", "chat-3"], 5)


def test_a_session_document_is_written_read_changed_and_deleted(ada: MemkitClient) -> None:
    document = SessionWrite(
        user_id="ada",
        data={"topic": "tea"},
        messages=[Message(role="user", content="I like green tea")],
    )

    written = ada.put_session("doc", document)
    resent = ada.put_session("doc", document)  # the same message id: nothing new
    patched = ada.patch_session("doc", {"title": "Tea", "data": {"mood": "good"}}, if_match=2)
    read = ada.get_session("doc", recent_messages_limit=1)
    ada.delete_session("doc")

    assert [m.content for m in written.messages] == ["I like green tea"]
    assert resent.message_count == 1
    assert (patched.title, patched.data) == ("Tea", {"topic": "tea", "mood": "good"})
    assert (read.version, read.messages[0].id) == (3, written.messages[0].id)
    with pytest.raises(NotFoundError):
        ada.get_session("doc")


def test_a_window_given_on_a_write_becomes_the_sessions(ada: MemkitClient) -> None:
    hello = [{"role": "user", "content": "hi"}]

    put = ada.put_session("windowed", {"user_id": "ada", "messages": hello}, model_name="gpt-4")
    kept = ada.append_messages("windowed", [{"role": "user", "content": "still there?"}])
    kept_view = ada.get_session("windowed")
    ada.append_messages("windowed", [{"role": "user", "content": "bye"}], context_window_max=3000)
    changed = ada.get_session("windowed")

    assert put.context_window_max == 8192  # gpt-4's window
    assert kept.message_count == 2
    assert kept_view.context_window_max == 8192  # a write that gives none keeps it
    assert changed.context_window_max == 3000


def test_the_api_decides_who_may_read_and_says_why(
    jwt_stack: LocalStack, dev_keys: Path, ada: MemkitClient
) -> None:
    ada.append_messages("ada-secret", [{"role": "user", "content": "secret"}], user_id="ada")

    with connect(jwt_stack, dev_keys, "bob") as bob:
        with pytest.raises(PermissionDeniedError) as other_session:
            bob.get_session("ada-secret")
        with pytest.raises(PermissionDeniedError) as naming_ada:
            bob.list_sessions(user_id="ada")
        with pytest.raises(UnprocessableEntityError) as invalid:
            bob.append_messages("b", [{"role": "user", "content": "   "}])

    assert (other_session.value.status, other_session.value.code) == (403, "forbidden")
    assert naming_ada.value.status == 403
    assert [e.field for e in invalid.value.errors] == ["messages.0.content"]


def test_a_scratchpad_write_with_a_stale_etag_is_refused_and_edit_reapplies_its_change(
    jwt_stack: LocalStack, dev_keys: Path, ada: MemkitClient
) -> None:
    first = ada.update_scratchpad("- likes tea", "pad-chat", user_id="ada")
    with pytest.raises(ConflictError):
        ada.replace_scratchpad("lost", "pad-chat", if_match=first.version + 1)
    other = connect(jwt_stack, dev_keys, "ada")
    seen: list[str | None] = []

    def add_chess(content: Any) -> str:
        seen.append(content)
        if len(seen) == 1:  # someone else writes between this read and its write
            other.update_scratchpad("- likes go", "pad-chat")
        return f"{content}\n- likes chess"

    edited = ada.edit_scratchpad(add_chess, "pad-chat")
    other.close()

    assert seen == ["- likes tea", "- likes tea\n- likes go"]
    assert edited.content == "- likes tea\n- likes go\n- likes chess"
    assert edited.version == first.version + 2
    assert ada.get_scratchpad("pad-chat").version == edited.version
    assert "- likes chess" in ada.render_scratchpad("pad-chat")


def test_a_users_scratchpad_is_shared_by_sessions_and_checked_by_its_schema(
    jwt_stack: LocalStack, dev_keys: Path, ada: MemkitClient
) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "likes": {"type": "array"}},
    }
    with connect(jwt_stack, dev_keys, "admin", "memory:admin", *READ_WRITE) as admin:
        admin.put_profile("prefs", {"scope": "user", "schema": schema})

    ada.update_scratchpad({"name": "Ada", "likes": ["tea"]}, user_id="ada", profile="prefs")
    ada.update_scratchpad({"likes": ["chess"]}, "any-chat", user_id="ada", profile="prefs")
    with pytest.raises(UnprocessableEntityError) as wrong:
        ada.update_scratchpad({"name": 42}, user_id="ada", profile="prefs")

    pad = ada.get_scratchpad(user_id="ada", profile="prefs")
    assert pad.content == {"name": "Ada", "likes": ["tea", "chess"]}
    assert (pad.scope, pad.json_schema) == ("user", schema)
    assert wrong.value.code == "schema_violation"
    assert [e.field for e in wrong.value.errors] == ["content.name"]


def test_records_are_created_in_batches_listed_searched_edited_and_deleted(
    jwt_stack: LocalStack, dev_keys: Path
) -> None:
    transport = Counting()
    records = [
        {"text": f"note {n}: Ada visited city number {n}", "user_id": "ada", "topics": ["trips"]}
        for n in range(101)
    ]
    with connect(jwt_stack, dev_keys, "ada", transport=transport, namespace="records") as memkit:
        ack = memkit.create_memories(records)
        creates = len(transport.sent)
        memkit.wait_until_indexed(ack.created)
        listed = list(memkit.iter_memories(topics={"any": ["trips"]}, limit=50))
        found = memkit.search_memories("city number 7", user_id={"eq": "ada"}, limit=3)
        searched_before = len(transport.sent)
        every_hit = list(memkit.iter_search("visited city", user_id={"eq": "ada"}, limit=40))
        search_pages = len(transport.sent) - searched_before
        edited = memkit.edit_memory(ack.created[0], {"text": "Ada lives in Lisbon"})
        sent_before_delete = len(transport.sent)
        memkit.delete_memories(ack.created)
        deletes = len(transport.sent) - sent_before_delete
        with pytest.raises(NotFoundError):
            memkit.get_memory(ack.created[1])

    assert (len(ack.created), ack.duplicates, creates) == (101, [], 2)
    assert sorted(hit.id for hit in listed) == sorted(ack.created)
    assert all(hit.namespace == "records" for hit in listed)
    assert "note 7:" in found.memories[0].text
    # Pages of a search are searches of their own: each hit comes once, ranks may move.
    searched = [hit.id for hit in every_hit]
    assert len(searched) == len(set(searched)) >= 95
    assert set(searched) <= set(ack.created)
    assert search_pages == 3
    assert edited.text == "Ada lives in Lisbon"
    assert deletes == 2


def test_a_fact_superseded_retired_restored_and_erased_through_the_client(
    jwt_stack: LocalStack, dev_keys: Path
) -> None:
    with connect(jwt_stack, dev_keys, "ada", namespace="truth") as memkit:
        # Given Ada's home in a slot, then her move into the same slot
        home = {"user_id": "ada", "key": "home_city", "valid_from": "2024-01-01T00:00:00Z"}
        memkit.create_memories([{"id": "paris", "text": "Ada lives in Paris", **home}])
        moved = {**home, "valid_from": "2026-03-01T00:00:00Z"}
        memkit.create_memories([{"id": "berlin", "text": "Ada lives in Berlin", **moved}])
        memkit.wait_until_indexed(["paris", "berlin"])
        now = memkit.search_memories("where does Ada live", user_id={"eq": "ada"})
        then = memkit.search_memories(
            "where does Ada live", user_id={"eq": "ada"}, as_of="2025-01-01T00:00:00Z"
        )
        # When Berlin is retired, Paris restored, then Berlin erased
        retired = memkit.retire_memory("berlin")
        restored = memkit.restore_memory("paris", 1)
        versions = list(memkit.iter_memory_history("paris"))
        memkit.delete_memories(["berlin"], erase=True)
        with pytest.raises(NotFoundError):
            memkit.memory_history("berlin")

    assert [hit.id for hit in now.memories] == ["berlin"]
    assert [hit.id for hit in then.memories] == ["paris"]
    assert retired.retired_at is not None
    assert restored.retired_at is None
    assert restored.text == "Ada lives in Paris"
    assert [v.change for v in versions] == ["restore", "supersede", "create"]
    assert versions[0].by == "token:ada"
    assert versions[0].via == "rest"


def test_profiles_and_a_message_page_by_cursor_and_a_conditional_clear(
    jwt_stack: LocalStack, dev_keys: Path, ada: MemkitClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMKIT_URL", jwt_stack.url)
    monkeypatch.setenv("MEMKIT_TOKEN", mint(dev_keys, "boss", "default", ["memory:admin"]))
    with MemkitClient.from_env(namespace="profiles") as admin:
        for name in ("a-notes", "b-notes", "c-notes"):
            admin.put_profile(name, {"template": f"# {name}"})
        listed = [p.name for p in admin.iter_profiles(page_size=2)]
        one = admin.get_profile("b-notes")
        admin.delete_profile("b-notes", if_match=one.version)
        with pytest.raises(NotFoundError):
            admin.get_profile("b-notes")
    ada.append_messages("paged", [{"role": "user", "content": f"m{n}"} for n in range(5)])
    first = ada.list_messages("paged", limit=3, order="desc")
    second = ada.list_messages("paged", limit=3, order="desc", cursor=first.next_cursor)
    pad = ada.update_scratchpad("note", "paged")
    cleared = ada.clear_scratchpad("paged", if_match=pad.version)
    by_name = ada.call_tool("get_working_memory", {}, session_id="paged")

    assert [p for p in listed if p.endswith("-notes")] == ["a-notes", "b-notes", "c-notes"]
    assert one.template == "# b-notes"
    assert [m.content for m in first.messages + second.messages] == ["m4", "m3", "m2", "m1", "m0"]
    assert second.next_cursor is None
    assert (cleared.content, cleared.version) == (None, pad.version + 1)
    assert by_name.model_dump().keys() == {"result"}


def test_a_hydrated_prompt_holds_the_scratchpad_and_the_users_memories(ada: MemkitClient) -> None:
    ack = ada.create_memories([{"text": "Ada is allergic to peanuts", "user_id": "ada"}])
    ada.wait_until_indexed(ack.created)
    ada.update_scratchpad("- flies to Oslo on Monday", "trip", user_id="ada")

    prompt = ada.memory_prompt(
        "What snacks should I pack?", session={"session_id": "trip", "user_id": "ada"}
    )

    text = "\n".join(m.content.text for m in prompt.messages)
    assert "flies to Oslo on Monday" in text
    assert "allergic to peanuts" in text
    assert prompt.messages[-1].content.text == "What snacks should I pack?"
    assert prompt.total_tokens <= prompt.token_budget


def test_a_system_message_comes_back_as_one_in_the_hydrated_prompt(ada: MemkitClient) -> None:
    ada.append_messages(
        "agent",
        [
            {"role": "system", "content": "You are a travel agent."},
            {"role": "user", "content": "I fly to Oslo on Monday"},
        ],
        user_id="ada",
    )

    prompt = ada.memory_prompt(
        "Which seat?", session={"session_id": "agent", "user_id": "ada"}, long_term_search=False
    )

    assert [(m.role, m.content.text) for m in prompt.messages] == [
        ("system", "You are a travel agent."),
        ("user", "I fly to Oslo on Monday"),
        ("user", "Which seat?"),
    ]


def test_the_tool_definitions_fit_each_model_sdk(ada: MemkitClient) -> None:
    chat = ada.tools("openai", session_id="tools-chat")
    responses = ada.tools("openai-responses", session_id="tools-chat")
    anthropic = ada.tools("anthropic", session_id="tools-chat")
    bedrock = ada.tools("bedrock", session_id="tools-chat")

    for tool in chat:
        TypeAdapter(ChatCompletionToolParam).validate_python(tool)
    for tool in responses:
        TypeAdapter(FunctionToolParam).validate_python(tool)
    for tool in anthropic:
        TypeAdapter(ToolParam).validate_python(tool)
    model = boto3.client("bedrock-runtime", region_name="us-east-1").meta.service_model
    converse = model.operation_model("Converse").input_shape
    request = {"modelId": "m", "messages": [], "toolConfig": {"tools": bedrock}}
    assert not ParamValidator().validate(request, converse).has_errors()
    names = {"get_working_memory", "update_working_memory", "clear_working_memory"}
    names |= {"search_memory", "add_memory"}
    assert {t["name"] for t in responses} == names
    assert {t["function"]["name"] for t in chat} == names


def test_each_sdks_tool_call_runs_and_answers_in_its_own_shape(ada: MemkitClient) -> None:
    ack = ada.create_memories([{"text": "Ada drinks green tea every morning", "user_id": "ada"}])
    ada.wait_until_indexed(ack.created)
    ada.append_messages("tool-chat", [{"role": "user", "content": "hi"}], user_id="ada")
    bedrock_call = bedrock_answer()["output"]["message"]["content"][0]
    calls = [openai_chat_call(), openai_responses_call(), anthropic_call(), bedrock_call]

    outcomes = [ada.run_tool_call(call, session_id="tool-chat") for call in calls]
    refused = ada.run_tool_call(
        {"type": "tool_use", "id": "toolu_9", "name": "search_memory", "input": {}},
        session_id="tool-chat",
    )

    for outcome in outcomes:
        assert outcome.ok
        assert outcome.result[0]["text"] == "Ada drinks green tea every morning"
    assert [o.to_message().get("tool_call_id") for o in outcomes[:1]] == ["call_1"]
    assert outcomes[1].to_message()["call_id"] == "call_2"
    assert tool_result_messages(outcomes[3:])[0]["content"][0]["toolResult"]["status"] == "success"
    assert not refused.ok
    assert refused.error is not None
    assert 'missing argument "query"' in refused.error
    assert refused.to_message()["is_error"] is True


@pytest.mark.anyio
async def test_the_async_client_does_the_same_calls(jwt_stack: LocalStack, dev_keys: Path) -> None:
    token = mint(dev_keys, "ada", "default", READ_WRITE)
    messages = [{"role": "user", "content": f"async turn {n}"} for n in range(150)]

    async with AsyncMemkitClient(jwt_stack.url, token=token) as memkit:
        appended = await memkit.append_messages("async-chat", messages, user_id="ada")
        read = [m.content async for m in memkit.iter_messages("async-chat", page_size=60)]
        edited = await memkit.edit_scratchpad(lambda c: "- async", "async-chat")
        outcome = await memkit.run_tool_call(anthropic_call(), session_id="async-chat")

    assert len(appended.appended) == 150
    assert read == [m["content"] for m in messages]
    assert edited.content == "- async"
    assert outcome.ok
