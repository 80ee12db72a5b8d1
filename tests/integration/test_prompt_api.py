"""Prompt hydration end to end on moto: the real API handler writes sessions, scratchpads and
long-term records, the real indexer handler indexes them from the real stream records, and
POST /v1/memory/prompt assembles the prompt from all of them (service/prompt.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memkit.service.windows import message_tokens
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration
PROMPT = "/v1/memory/prompt"
LONG_TERM = "## Long term memories related to the user's query"
PASSPORT = "My passport number ends in 4471"
TOPICS = ["garden", "budget", "kitchen", "holiday", "piano", "bicycle", "weather", "football"]


def _conversation(count: int, special: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """`count` messages, m0 oldest, a second apart, user and assistant in turn; each text is
    unique and none mentions a passport unless `special` says so."""
    start = datetime.now(UTC) - timedelta(hours=2)
    return [
        {
            "id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": (special or {}).get(i, f"note {i}: we went over the {TOPICS[i % 8]} plan"),
            "created_at": (start + timedelta(seconds=i)).isoformat(),
        }
        for i in range(count)
    ]


def _append(
    world: MemoryWorld, session_id: str, messages: list[dict[str, Any]], user_id: str = "ada"
) -> None:
    for start in range(0, len(messages), 100):
        response = world.api(
            "POST",
            f"/v1/working-memory/{session_id}/messages",
            body={"messages": messages[start : start + 100], "user_id": user_id},
        )
        assert response.status == 201, response.body


def _remember(world: MemoryWorld, *records: dict[str, Any]) -> None:
    response = world.api("POST", "/v1/long-term-memory/", body={"memories": list(records)})
    assert response.status == 200, response.body


def _prompt(world: MemoryWorld, **body: Any) -> dict[str, Any]:
    response = _post(world, body)
    assert response.status == 200, response.body
    return dict(response.body)


def _post(world: MemoryWorld, body: dict[str, Any]) -> Any:
    # agent-memory-client always sends optimize_query.
    return world.api("POST", PROMPT, query={"optimize_query": "false"}, body=body)


def _texts(prompt: dict[str, Any]) -> list[str]:
    return [m["content"]["text"] for m in prompt["messages"]]


def _long_term_lines(prompt: dict[str, Any]) -> list[str]:
    block = next(t for t in _texts(prompt) if t.startswith(LONG_TERM))
    return block.split("\n")[1:]


def _session(**fields: Any) -> dict[str, Any]:
    return {"session_id": "chat", "user_id": "ada", **fields}


# -- order and parts ---------------------------------------------------------------------------


def test_the_summary_comes_first_then_the_scratchpad_and_the_query_last(
    world: MemoryWorld,
) -> None:
    # Given a session with a summary and a scratchpad
    _append(world, "chat", _conversation(6))
    world.api("PATCH", "/v1/working-memory/chat", body={"context": "Ada plans a trip to Oslo."})
    world.api(
        "PUT", "/v1/working-memory/chat/scratchpad", body={"content": "- prefers window seats"}
    )
    world.settle()

    # When a prompt is hydrated from it
    prompt = _prompt(world, query="Which seat should I book?", session=_session())

    # Then the summary leads (AMS's wording), the scratchpad block follows, the query ends it
    messages = prompt["messages"]
    assert messages[0] == {
        "role": "system",
        "content": {
            "type": "text",
            "text": "## A summary of the conversation so far:\nAda plans a trip to Oslo.",
        },
    }
    assert messages[1]["role"] == "system"
    assert messages[1]["content"]["text"].startswith(
        "<working_memory>\n- prefers window seats\n</working_memory>\n"
    )
    assert messages[-1] == {
        "role": "user",
        "content": {"type": "text", "text": "Which seat should I book?"},
    }
    assert prompt["parts"]["summary"]["items"] == prompt["parts"]["scratchpad"]["items"] == 1


def test_a_session_whose_scratchpad_was_never_used_adds_no_block(world: MemoryWorld) -> None:
    _append(world, "chat", _conversation(4))
    world.settle()

    prompt = _prompt(world, query="hello again", session=_session())

    assert not any("<working_memory>" in text for text in _texts(prompt))
    assert prompt["parts"]["scratchpad"] == {
        "used": 0,
        "allowed": prompt["parts"]["scratchpad"]["allowed"],
        "items": 0,
        "dropped": 0,
        "truncated": False,
    }


def test_recall_brings_back_an_older_message_with_its_neighbours_and_no_recent_turn(
    world: MemoryWorld,
) -> None:
    # Given a long session that mentioned a passport long ago
    messages = _conversation(30, {5: PASSPORT})
    _append(world, "chat", messages)
    world.settle()

    # When the user asks about it, with the six newest messages as recent turns
    prompt = _prompt(
        world,
        query="What is my passport number?",
        session=_session(),
        recent_messages_limit=6,
        recall_k=3,
        message_range=1,
    )

    # Then the old message is back, between its neighbours, ahead of the recent turns
    texts = _texts(prompt)
    recent = [m["content"] for m in messages[-6:]]
    assert texts[-7:-1] == recent
    where = texts.index(PASSPORT)
    assert texts[where - 1 : where + 2] == [
        messages[4]["content"],
        PASSPORT,
        messages[6]["content"],
    ]
    heading = next(i for i, t in enumerate(texts) if t.startswith(LONG_TERM))
    recalled = texts[:heading]
    older = [m["content"] for m in messages[:-6]]
    assert recalled == [t for t in older if t in recalled]  # older ones only, by time
    # and nothing is said twice
    assert len(texts) == len(set(texts))
    assert prompt["parts"]["recalled"]["items"] == len(recalled) >= 3


def test_long_term_memories_are_the_users_own_from_outside_this_session(
    world: MemoryWorld,
) -> None:
    # Given Ada's records (one from this session), Bob's, Ada's words in another session and
    # in this one
    _remember(
        world,
        {"id": "tea", "text": "Ada drinks green tea every morning", "user_id": "ada"},
        {
            "id": "aisle",
            "text": "Ada wants an aisle seat and tea on the train",
            "user_id": "ada",
            "session_id": "chat",
        },
        {"id": "bob-tea", "text": "Bob drinks green tea every evening", "user_id": "bob"},
    )
    _append(world, "other", [{"id": "o1", "role": "user", "content": "My favourite tea is sencha"}])
    _append(world, "chat", [{"id": "c1", "role": "user", "content": "I take my tea with honey"}])
    world.settle()

    # When a prompt is hydrated with neither recent turns nor recall
    prompt = _prompt(
        world,
        query="What tea does Ada drink?",
        session=_session(),
        recent_messages_limit=0,
        recall_k=0,
    )

    # Then the long-term block lists Ada's memories, in AMS's form, and nothing else
    lines = _long_term_lines(prompt)
    assert sorted(lines) == sorted(
        [
            "- Ada drinks green tea every morning (ID: tea)",
            "- Ada wants an aisle seat and tea on the train (ID: aisle)",
            "- My favourite tea is sencha (ID: o1)",
        ]
    )
    assert {m["id"] for m in prompt["long_term_memories"]} == {"tea", "aisle", "o1"}
    assert prompt["parts"]["long_term"]["items"] == 3
    assert _texts(prompt)[-1] == "What tea does Ada drink?"


def test_the_callers_filters_choose_the_memories_and_the_query_is_their_text(
    world: MemoryWorld,
) -> None:
    # Given two users' memories
    _remember(
        world,
        {"id": "tea", "text": "Ada drinks green tea every morning", "user_id": "ada"},
        {"id": "cat", "text": "Bob has a grey cat called Pixel", "user_id": "bob"},
        {"id": "bob-tea", "text": "Bob drinks black tea", "user_id": "bob"},
    )
    world.settle()

    # When a prompt is hydrated from long-term memory alone (hydrate_memory_prompt's shape)
    prompt = _prompt(
        world,
        query="What is the name of the cat?",
        long_term_search={"user_id": {"eq": "bob"}, "limit": 1, "offset": 0, "text": "ignored"},
    )

    # Then the best of Bob's memories for the query is the only one, before the query
    assert [m["role"] for m in prompt["messages"]] == ["system", "user"]
    assert _long_term_lines(prompt) == ["- Bob has a grey cat called Pixel (ID: cat)"]


def test_a_callers_search_never_repeats_a_turn_already_in_the_prompt(
    world: MemoryWorld,
) -> None:
    # Given a short session, every message of it a recent turn
    _append(world, "chat", _conversation(6, {5: PASSPORT}))
    world.settle()

    # When the caller's own search asks for messages, this session's included
    prompt = _prompt(
        world,
        query="What is my passport number?",
        session=_session(),
        long_term_search={"memory_type": {"eq": "message"}},
        recall_k=0,
    )

    # Then the passport message is shown once, as a turn
    assert _texts(prompt).count(PASSPORT) == 1
    assert _long_term_lines(prompt) == ["No relevant long-term memories found."]


def test_no_memories_found_still_says_so_as_ams_does(world: MemoryWorld) -> None:
    prompt = _prompt(world, query="anything?", session=_session(session_id="fresh"))

    assert _texts(prompt) == [f"{LONG_TERM}\nNo relevant long-term memories found.", "anything?"]
    assert prompt["long_term_memories"] is None


def test_long_term_search_false_leaves_long_term_memory_out(world: MemoryWorld) -> None:
    _remember(world, {"id": "tea", "text": "Ada drinks green tea", "user_id": "ada"})
    world.settle()

    prompt = _prompt(world, query="tea?", session=_session(), long_term_search=False)

    assert _texts(prompt) == ["tea?"]
    assert prompt["parts"]["long_term"]["used"] == 0


# -- the budget --------------------------------------------------------------------------------


def test_a_small_budget_is_split_between_the_parts_and_respected(world: MemoryWorld) -> None:
    # Given a session with a long summary, a long scratchpad, many turns and memories
    messages = _conversation(80, {5: PASSPORT})
    _append(world, "chat", messages)
    world.api(
        "PATCH",
        "/v1/working-memory/chat",
        body={"context": " ".join(f"point {i} of the summary." for i in range(200))},
    )
    world.api(
        "PUT",
        "/v1/working-memory/chat/scratchpad",
        body={"content": "\n".join(f"- fact number {i}" for i in range(200))},
    )
    _remember(
        world,
        *[
            {
                "id": f"f{i}",
                "text": f"Ada's passport fact {i}: it was renewed at the consulate in the "
                f"year {2000 + i}, after a wait of {i + 2} weeks and two visits",
                "user_id": "ada",
            }
            for i in range(20)
        ],
    )
    world.settle()

    # When the prompt must fit 1,200 tokens
    prompt = _prompt(
        world,
        query="What is my passport number?",
        session=_session(),
        token_budget=1_200,
        recent_messages_limit=80,
    )

    # Then every part stays within its allowance, and the reported tokens are the messages'
    parts = prompt["parts"]
    assert prompt["token_budget"] == 1_200
    assert prompt["total_tokens"] <= 1_200
    assert prompt["total_tokens"] == sum(
        message_tokens(m["role"], m["content"]["text"]) for m in prompt["messages"]
    )
    assert prompt["total_tokens"] == sum(part["used"] for part in parts.values())
    for name, part in parts.items():
        assert part["used"] <= part["allowed"], name
    rest = 1_200 - parts["query"]["used"]
    assert parts["summary"]["allowed"] == int(rest * 0.15)
    assert parts["scratchpad"]["allowed"] == int(rest * 0.15)
    assert parts["recalled"]["allowed"] == int(rest * 0.15)
    assert parts["long_term"]["allowed"] == int(rest * 0.20)
    # the rest, and what the others left unused, is the recent turns'
    others = sum(parts[name]["used"] for name in ("summary", "scratchpad", "recalled", "long_term"))
    assert parts["recent"]["allowed"] == rest - others >= int(rest * 0.35)
    # the blocks were cut short, the oldest turns and the lowest-ranked memories left out
    texts = _texts(prompt)
    assert parts["summary"]["truncated"]
    assert texts[0].endswith(" […]")
    assert parts["scratchpad"]["truncated"]
    assert "get_working_memory" in texts[1]
    assert "</working_memory>\nThe working_memory block above" in texts[1]  # instructions kept
    assert parts["recent"]["dropped"] > 0
    assert texts[-2] == messages[-1]["content"]  # the newest turn is kept
    assert parts["long_term"]["dropped"] > 0


def test_context_window_max_arrives_as_a_string_and_sets_the_budget(world: MemoryWorld) -> None:
    # agent-memory-client sends it as a string; a quarter is left for the answer
    prompt = _prompt(world, query="hi", session=_session(context_window_max="4000"))
    by_model = _prompt(world, query="hi", session=_session(model_name="gpt-4"))
    default = _prompt(world, query="hi", session=_session())

    assert prompt["token_budget"] == 3_000
    assert by_model["token_budget"] == 8_192 - 2_048
    assert default["token_budget"] == 8_000


def test_a_prompt_naming_no_window_fits_the_window_the_sessions_writes_gave(
    world: MemoryWorld,
) -> None:
    # Given a session whose client gave its window on a write (as agent-memory-client's PUT)
    put = world.api(
        "PUT",
        "/v1/working-memory/chat",
        query={"context_window_max": "4000"},
        body={"user_id": "ada", "messages": _conversation(3)},
    )
    assert put.status == 200, put.body

    # When prompts name no window, then another, then a session that gave none
    own = _prompt(world, query="hi", session=_session())
    named = _prompt(world, query="hi", session=_session(model_name="gpt-4"))
    other = _prompt(world, query="hi", session=_session(session_id="other"))

    # Then the session's window sets the budget, unless the request names one
    assert own["token_budget"] == 3_000
    assert named["token_budget"] == 8_192 - 2_048
    assert other["token_budget"] == 8_000


def test_an_unknown_model_without_a_window_is_refused(world: MemoryWorld) -> None:
    response = _post(world, {"query": "hi", "session": _session(model_name="no-such-model")})

    assert response.status == 422
    assert [e["field"] for e in response.body["errors"]] == ["session.model_name"]


# -- options -----------------------------------------------------------------------------------


def _tool_conversation() -> list[dict[str, Any]]:
    start = datetime.now(UTC) - timedelta(minutes=5)
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
    }
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"role": "assistant", "content": "calling weather for Oslo", "tool_calls": [call]},
        {"role": "tool", "content": '{"celsius": 3}', "tool_call_id": "call_1"},
        {"role": "assistant", "content": "It is 3 degrees in Oslo."},
    ]
    return [
        {"id": f"t{i}", "created_at": (start + timedelta(seconds=i)).isoformat(), **turn}
        for i, turn in enumerate(turns)
    ]


def test_tool_calls_and_results_are_left_out_when_asked(world: MemoryWorld) -> None:
    _append(world, "chat", _tool_conversation())
    world.settle()

    dropped = _prompt(world, query="And tomorrow?", session=_session(), tool_calls="drop")
    kept = _prompt(world, query="And tomorrow?", session=_session())

    assert _texts(dropped)[-3:] == [
        "What is the weather in Oslo?",
        "It is 3 degrees in Oslo.",
        "And tomorrow?",
    ]
    assert "calling weather for Oslo" not in _texts(dropped)
    assert '{"celsius": 3}' not in _texts(dropped)
    # kept, a tool result is sent as an assistant message (AMS)
    assert [(m["role"], m["content"]["text"]) for m in kept["messages"][-4:-2]] == [
        ("assistant", "calling weather for Oslo"),
        ("assistant", '{"celsius": 3}'),
    ]


def test_a_system_message_stays_a_system_message_in_its_place(world: MemoryWorld) -> None:
    # Given a conversation with the assistant's instructions as system and developer messages
    start = datetime.now(UTC) - timedelta(minutes=5)
    turns = [
        ("system", "You are a travel agent."),
        ("user", "I want to fly to Oslo in May."),
        ("assistant", "Oslo in May it is."),
        ("developer", "Answer in one sentence."),
    ]
    _append(
        world,
        "chat",
        [
            {
                "id": f"i{i}",
                "role": role,
                "content": text,
                "created_at": (start + timedelta(seconds=i)).isoformat(),
            }
            for i, (role, text) in enumerate(turns)
        ],
    )
    world.settle()

    # When the next turn's prompt is hydrated
    prompt = _prompt(world, query="Which airline?", session=_session(), long_term_search=False)

    # Then the instructions come back as system messages where they were said, never as
    # something the assistant said
    assert [(m["role"], m["content"]["text"]) for m in prompt["messages"]] == [
        ("system", "You are a travel agent."),
        ("user", "I want to fly to Oslo in May."),
        ("assistant", "Oslo in May it is."),
        ("system", "Answer in one sentence."),
        ("user", "Which airline?"),
    ]


def test_a_system_message_is_never_one_of_the_users_memories(world: MemoryWorld) -> None:
    # Given Ada's other session, which starts with the assistant's instructions
    _append(
        world,
        "other",
        [
            {"id": "o1", "role": "system", "content": "You are a travel agent for trips to Oslo"},
            {"id": "o2", "role": "user", "content": "I love the night train to Oslo"},
        ],
    )
    world.settle()

    # When this session's prompt asks about Oslo
    prompt = _prompt(world, query="Trips to Oslo?", session=_session(), recall_k=0)

    # Then Ada's own words are among her memories, the instructions are not
    assert _long_term_lines(prompt) == ["- I love the night train to Oslo (ID: o2)"]


@pytest.mark.parametrize("position", ["prepend", "append", "interleave"])
def test_recalled_messages_go_where_the_caller_asks(world: MemoryWorld, position: str) -> None:
    # Given a session that mentioned a passport long ago
    messages = _conversation(20, {3: PASSPORT})
    _append(world, "chat", messages)
    world.settle()

    # When the prompt recalls the best older message, placed as asked
    prompt = _prompt(
        world,
        query="What is my passport number?",
        session=_session(),
        recent_messages_limit=4,
        recall_k=1,
        message_range=0,
        recalled_position=position,
    )

    texts = _texts(prompt)
    recent = [m["content"] for m in messages[-4:]]
    heading = next(i for i, t in enumerate(texts) if t.startswith(LONG_TERM))
    recalled = texts.index(PASSPORT)
    first_recent = texts.index(recent[0])
    assert prompt["parts"]["recalled"]["items"] == 1
    if position == "prepend":  # before the long-term memories
        assert recalled < heading < first_recent
    elif position == "append":  # after the recent turns, right before the query
        assert heading < first_recent
        assert texts[-2] == PASSPORT
    else:  # among the recent turns by time: it is older than all of them
        assert heading < recalled == first_recent - 1
    assert texts[-1] == "What is my passport number?"


# -- refusals and edges ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [{"query": "q"}, {"query": "q", "long_term_search": False}, {"query": "q", "session": None}],
)
def test_neither_a_session_nor_a_search_is_a_400(world: MemoryWorld, body: dict[str, Any]) -> None:
    response = _post(world, body)

    assert response.status == 400
    assert response.body["detail"] == "either session or long_term_search must be given"
    assert [e["field"] for e in response.body["errors"]] == ["session", "long_term_search"]


def test_a_filter_problem_is_named_by_its_field(world: MemoryWorld) -> None:
    response = _post(world, {"query": "q", "long_term_search": {"limit": 0}})

    assert response.status == 422
    assert [e["field"] for e in response.body["errors"]] == ["long_term_search.limit"]


def test_a_missing_session_is_an_empty_one(world: MemoryWorld) -> None:
    prompt = _prompt(world, query="first words", session=_session(session_id="nobody-yet"))

    assert _texts(prompt)[-1] == "first words"
    assert prompt["parts"]["recent"]["items"] == 0
    assert world.api("GET", "/v1/working-memory/nobody-yet").status == 404  # nothing created


def test_another_users_session_is_refused(world: MemoryWorld) -> None:
    _append(world, "chat", _conversation(2), user_id="ada")
    world.settle()

    response = _post(world, {"query": "q", "session": _session(user_id="mallory")})

    assert response.status == 403
