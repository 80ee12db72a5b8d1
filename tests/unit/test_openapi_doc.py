"""docs/openapi.json is the document the code serves (API.md: it must match the code)."""

from __future__ import annotations

import json
from pathlib import Path

from memkit.api.app import openapi_json
from memkit.handlers.api import app

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_the_published_openapi_document_matches_the_code() -> None:
    published = json.loads(DOC.read_text(encoding="utf-8"))

    served = json.loads(openapi_json(app))

    assert published == served, "docs/openapi.json is stale: run `make docs`"


def test_every_route_that_reaches_storage_documents_429_and_503_with_retry_after() -> None:
    served = json.loads(openapi_json(app))

    # Every operation but the health check reads or writes DynamoDB, OpenSearch or Bedrock
    operations = [
        (f"{method.upper()} {path}", operation)
        for path, methods in served["paths"].items()
        if path != "/v1/health"
        for method, operation in methods.items()
    ]

    assert operations
    for name, operation in operations:
        for status in ("429", "503"):
            response = operation["responses"].get(status)
            assert response is not None, f"{name} does not document {status}"
            assert "Retry-After" in response.get("headers", {}), f"{name} {status}: Retry-After"


def test_every_operation_but_the_public_ones_asks_for_a_jwt_or_an_api_key() -> None:
    from memkit.api.scopes import PUBLIC
    from memkit.handlers.api import ROUTE_SCOPES

    served = json.loads(openapi_json(app))
    schemes = served["components"]["securitySchemes"]

    # Both are bearer schemes: an API key is sent as `Authorization: Bearer mk_...` too
    assert {name: (s["type"], s["scheme"]) for name, s in schemes.items()} == {
        "jwt": ("http", "bearer"),
        "apiKey": ("http", "bearer"),
    }
    assert all("memory:read" in s["description"] for s in schemes.values())
    assert served["security"] == [{"jwt": []}, {"apiKey": []}]
    for path, methods in served["paths"].items():
        for method, operation in methods.items():
            public = ROUTE_SCOPES[f"{method.upper()} {path}"] is PUBLIC
            assert operation.get("security") == ([] if public else None), f"{method} {path}"
    assert served["paths"]["/v1/health"]["get"]["security"] == []
