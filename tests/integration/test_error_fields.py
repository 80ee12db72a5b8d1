"""A 422 names each field as the client wrote it (a dotted path through the body) and says
why in words the client can act on, whatever union, filter map or validator the model uses."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.integration.conftest import Call

pytestmark = pytest.mark.integration

LTM = "/v1/long-term-memory"
TEXT_OPERATORS = "'eq', 'ne', 'any', 'all', 'none', 'startswith', 'in_', 'not_eq' or 'not_in'"
# What pydantic's own paths hold and a client's never do: union members' tags
# (dict[...], str, function-after[...], tagged-union[...]) and a bad key's marker.
VALIDATOR_PARTS = re.compile(r"\[key\]|dict\[|function-|tagged-union|literal\[|(^|\.)str($|\.)")

# (method, path, body, the field, its reason)
BAD_BODIES: list[tuple[str, str, dict[str, Any], str, str]] = [
    (
        "POST",
        f"{LTM}/search",
        {"text": "tea", "user_id": {"like": "b%"}},
        "user_id.like",
        f"'like' is not one of the keys allowed here: {TEXT_OPERATORS}",
    ),
    (
        "POST",
        f"{LTM}/search",
        {"text": "tea", "created_at": {"after": "2024-01-01T00:00:00Z"}},
        "created_at.after",
        "'after' is not one of the keys allowed here: "
        "'eq', 'ne', 'gt', 'gte', 'lt', 'lte' or 'between'",
    ),
    (
        "POST",
        f"{LTM}/search",
        {"text": "tea", "topics": {"contains": "drinks"}},
        "topics.contains",
        f"'contains' is not one of the keys allowed here: {TEXT_OPERATORS}",
    ),
    (
        "POST",
        f"{LTM}/search",
        {"text": "tea", "namespace": 5},
        "namespace",
        "Input should be a valid dictionary or a valid string",
    ),
    (
        "POST",
        "/v1/memory/prompt",
        {"query": "tea?", "long_term_search": {"user_id": {"like": "b%"}}},
        "long_term_search.user_id.like",
        f"'like' is not one of the keys allowed here: {TEXT_OPERATORS}",
    ),
    (
        "POST",
        f"{LTM}/",
        {"memories": [{"id": "r1", "text": "ok"}, {"id": "r2", "text": "   "}]},
        "memories.1.text",
        "must not be empty or only whitespace",
    ),
    (
        "PATCH",
        f"{LTM}/r1",
        {"text": None},
        "text",
        "must be a text (a record always has one)",
    ),
    (
        "POST",
        "/v1/working-memory/s1/messages",
        {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": " "}]},
        "messages.1.content",
        "must not be empty or only whitespace",
    ),
    (
        "PUT",
        "/v1/working-memory/s1",
        {"memories": [{"id": "m1", "text": "\n"}]},
        "memories.0.text",
        "must not be empty or only whitespace",
    ),
    (
        "PUT",
        "/v1/working-memory/s1",
        {"scratchpad": 5},
        "scratchpad",
        "Input should be a valid string or a valid dictionary",
    ),
    (
        "PATCH",
        "/v1/working-memory/s1/scratchpad",
        {"content": ["likes tea"]},
        "content",
        "Input should be a valid string or a valid dictionary",
    ),
    (
        "POST",
        "/v1/tools/call",
        {"name": "search_memory", "arguments": 5, "session_id": "s1"},
        "arguments",
        "Input should be a valid dictionary or a valid string",
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "field", "reason"),
    BAD_BODIES,
    ids=[f"{method} {path} {field}" for method, path, _, field, _ in BAD_BODIES],
)
def test_a_422_names_the_field_as_the_client_wrote_it_and_why(
    api: Call, method: str, path: str, body: dict[str, Any], field: str, reason: str
) -> None:
    response = api(method, path, body=body)

    assert response.status == 422, response.body
    assert response.body["code"] == "validation_error"
    assert response.body["errors"] == [{"field": field, "reason": reason}]


def test_no_field_path_carries_the_validators_own_parts(api: Call) -> None:
    # Every filter of a search wrong at once: each is reported, each at the client's path.
    body = {
        "text": "tea",
        "session_id": {"like": 1},
        "namespace": [],
        "user_id": {"eq": "u", "near": "v"},
        "entities": {"has": "x"},
        "memory_type": "semantic",
        "last_accessed": {"before": 1},
    }

    response = api("POST", f"{LTM}/search", body=body)

    fields = [error["field"] for error in response.body["errors"]]
    assert response.status == 422
    assert sorted(fields) == sorted(
        [
            "session_id.like",
            "namespace",
            "user_id.near",
            "entities.has",
            "memory_type",
            "last_accessed.before",
        ]
    )
    assert not [f for f in fields if VALIDATOR_PARTS.search(f)]
