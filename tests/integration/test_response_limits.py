"""Every answer fits what Lambda may return (6 MB, counted as the runtime writes the response:
the body's JSON escaped once more), through the real handler on moto: lists return fewer
items and a cursor, and what cannot be cut is a 413 naming what to ask less of, never an
answer Lambda would turn into a 5xx."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memkit.models.budget import LAMBDA_RESPONSE_LIMIT
from tests.conftest import LambdaContextStub
from tests.events import http_event

pytestmark = pytest.mark.integration

# Quotes are the costliest text: 2 bytes each in the body, 4 in Lambda's response.
QUOTES = '"' * 44_000


@pytest.fixture
def handler(dynamodb_table: str) -> Any:
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.wiring import api_services
    from memkit.store.dynamodb import DynamoStore

    settings = ApiSettings(table_name=dynamodb_table, region="us-east-1")
    services = api_services(DynamoStore(settings), settings)
    return make_lambda_handler(lambda: services)


def _send(handler: Any, method: str, path: str, **kw: Any) -> tuple[int, Any, int]:
    """(status, parsed body, the response's bytes as Lambda counts them)."""
    result = handler(http_event(method, path, **kw), LambdaContextStub())
    size = len(json.dumps(result, ensure_ascii=False).encode())
    return result["statusCode"], json.loads(result["body"]), size


def _big_messages(handler: Any, session: str, count: int) -> list[str]:
    ids = [f"m{n:03d}" for n in range(count)]
    for start in range(0, count, 5):
        batch = [
            {"id": i, "role": "user", "content": f"{i} {QUOTES}"} for i in ids[start : start + 5]
        ]
        status, body, _ = _send(
            handler, "POST", f"/v1/working-memory/{session}/messages", body={"messages": batch}
        )
        assert status in (200, 201), body
    return ids


def test_a_page_of_large_messages_stops_before_the_limit_and_its_cursor_gives_the_rest(
    handler: Any,
) -> None:
    ids = _big_messages(handler, "big", 45)  # about 8 MB in Lambda's count

    seen: list[str] = []
    sizes: list[int] = []
    pages = 0
    cursor = None
    while True:
        query = {"limit": "100", **({"cursor": cursor} if cursor else {})}
        status, body, size = _send(handler, "GET", "/v1/working-memory/big/messages", query=query)
        assert status == 200, body
        seen += [m["id"] for m in body["messages"]]
        sizes.append(size)
        pages += 1
        cursor = body.get("next_cursor")
        if not cursor:
            break

    assert seen == ids  # every message once, in order
    assert pages >= 2  # the first page held fewer than asked, with a cursor
    assert max(sizes) < LAMBDA_RESPONSE_LIMIT


def test_a_page_of_large_profiles_stops_before_the_limit(handler: Any) -> None:
    schema = {"type": "object", "description": QUOTES * 2}  # ~350 KB a profile in the response
    names = [f"p{n:02d}" for n in range(20)]
    for name in names:
        status, body, _ = _send(handler, "PUT", f"/v1/profiles/{name}", body={"schema": schema})
        assert status == 200, body

    status, first, size = _send(handler, "GET", "/v1/profiles", query={"limit": "100"})
    rest_status, rest, _ = _send(
        handler, "GET", "/v1/profiles", query={"limit": "100", "cursor": first["next_cursor"]}
    )

    assert (status, rest_status) == (200, 200)
    assert size < LAMBDA_RESPONSE_LIMIT
    listed = [p["name"] for p in first["profiles"] + rest["profiles"] if not p["builtin"]]
    assert listed == names


def test_a_document_at_every_limit_at_once_still_fits(handler: Any) -> None:
    # A session whose pending memories, data and scratchpad are each as large as allowed, in
    # quotes, and whose messages fill the document's own budget
    memories = [{"id": f"r{n}", "text": QUOTES[:40_000]} for n in range(12)]
    data = {"notes": QUOTES[:90_000]}
    status, body, _ = _send(
        handler, "PUT", "/v1/working-memory/full", body={"memories": memories, "data": data}
    )
    assert status == 200, body
    _send(handler, "PUT", "/v1/profiles/default", body={"max_tokens": 64_000})
    status, body, _ = _send(
        handler, "PUT", "/v1/working-memory/full/scratchpad", body={"content": QUOTES[:90_000]}
    )
    assert status == 200, body
    _big_messages(handler, "full", 30)

    status, document, size = _send(handler, "GET", "/v1/working-memory/full")

    assert status == 200
    assert size < LAMBDA_RESPONSE_LIMIT
    assert 0 < len(document["messages"]) < 30  # the newest that fit
    assert document["messages"][-1]["id"] == "m029"


def test_an_answer_past_the_limit_is_refused_with_what_to_ask_less_of() -> None:
    from memkit.api.guard import too_large_to_return

    small = {"statusCode": 200, "headers": {}, "body": json.dumps({"text": QUOTES})}
    huge = {"statusCode": 200, "headers": {}, "body": json.dumps({"text": QUOTES * 40})}

    refused = too_large_to_return(huge)

    assert too_large_to_return(small) is None
    assert refused is not None
    assert refused.status == 413
    assert refused.errors[0].field == "limit"
