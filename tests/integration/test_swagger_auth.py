"""Swagger UI at /v1/docs as a user drives it on the local stack: the page loads its document
from the link it names, and its Authorize button sends a credential the gateway accepts
(the schemes of the document, as Swagger UI builds the header from them)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memkit_dev.local.auth import mint
from memkit_dev.local.stack import LocalStack
from tests.integration.conftest import small_stack

pytestmark = pytest.mark.integration

# Powertools' page points Swagger UI at its document: updateUrl(currentUrl.pathname + "...").
DOCUMENT_LINK = re.compile(r'updateUrl\(currentUrl\.pathname \+ "(?P<query>\?[^"]+)"\)')


def swagger_header(document: dict[str, object], scheme_name: str, credential: str) -> str:
    """The Authorization value Swagger UI sends for an http scheme of `document`."""
    schemes = document["components"]["securitySchemes"]  # type: ignore[index]
    scheme = schemes[scheme_name]
    assert scheme["type"] == "http"
    return f"{scheme['scheme'].capitalize()} {credential}"  # Swagger: "Bearer <value>"


def test_the_pages_json_link_answers_the_document_as_json(jwt_stack: LocalStack) -> None:
    page = httpx.get(f"{jwt_stack.url}/v1/docs", timeout=60)
    link = DOCUMENT_LINK.search(page.text)
    assert link is not None, "the page names no document link"

    linked = httpx.get(f"{jwt_stack.url}/v1/docs{link['query']}", timeout=60)
    document = httpx.get(f"{jwt_stack.url}/v1/openapi.json", timeout=60)

    assert linked.status_code == 200
    assert linked.headers["content-type"].startswith("application/json")
    assert linked.json() == document.json()


def test_a_jwt_given_to_swaggers_authorize_button_is_accepted(
    jwt_stack: LocalStack, dev_keys: Path
) -> None:
    document = httpx.get(f"{jwt_stack.url}/v1/openapi.json", timeout=60).json()
    token = mint(dev_keys, "ada", "default", ["memory:read", "memory:write"])
    operation = document["paths"]["/v1/working-memory/"]["get"]
    assert "security" not in operation  # the document's own: a JWT or an API key
    assert {"jwt": []} in document["security"]

    signed = httpx.get(
        f"{jwt_stack.url}/v1/working-memory/",
        headers={"Authorization": swagger_header(document, "jwt", token)},
        timeout=60,
    )
    anonymous = httpx.get(f"{jwt_stack.url}/v1/working-memory/", timeout=60)

    assert signed.status_code == 200
    assert anonymous.status_code == 401


@pytest.fixture(scope="module")
def apikey_stack() -> Iterator[LocalStack]:
    with LocalStack(small_stack(auth="apikey", engine="moto")) as running:
        yield running


def test_an_api_key_given_to_swaggers_authorize_button_is_accepted(
    apikey_stack: LocalStack,
) -> None:
    document = httpx.get(f"{apikey_stack.url}/v1/openapi.json", timeout=60).json()
    assert apikey_stack.dev_key is not None
    assert {"apiKey": []} in document["security"]

    keyed = httpx.get(
        f"{apikey_stack.url}/v1/working-memory",
        headers={"Authorization": swagger_header(document, "apiKey", apikey_stack.dev_key)},
        timeout=60,
    )
    raw = httpx.get(
        f"{apikey_stack.url}/v1/working-memory",
        headers={"Authorization": apikey_stack.dev_key},
        timeout=60,
    )

    assert keyed.status_code == 200
    assert raw.status_code in (401, 403)  # the key without Bearer is no credential
