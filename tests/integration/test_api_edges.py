"""Health, OpenAPI, Swagger UI, and requests no route or model accepts."""

from __future__ import annotations

import time

import pytest

import memkit
from tests.integration.conftest import Call

pytestmark = pytest.mark.integration


def test_health_answers_the_server_time_in_epoch_ms_and_the_version(api: Call) -> None:
    response = api("GET", "/v1/health")

    assert response.status == 200
    assert abs(response.body["now"] - time.time() * 1000) < 60_000
    assert response.body["version"] == memkit.__version__
    assert response.body["local"] is None  # only the local stack says what runs it


@pytest.fixture
def fresh_health() -> None:
    """The health check's memory of its last answer forgotten (module state of the function)."""
    from memkit.api.routes import health

    health._answered_at[0] = -health.STORAGE_CHECK_SECONDS


@pytest.mark.usefixtures("fresh_health")
def test_health_is_a_503_to_retry_when_the_table_does_not_answer(
    api: Call, dynamodb_table: str
) -> None:
    import boto3

    boto3.client("dynamodb", region_name="us-east-1").delete_table(TableName=dynamodb_table)

    response = api("GET", "/v1/health")

    assert response.status == 503
    assert response.body["code"] == "unavailable"
    assert response.body["detail"] == "the service is not available; retry later"
    assert int(response.headers["Retry-After"]) > 0


@pytest.mark.usefixtures("fresh_health")
def test_health_reads_the_table_at_most_once_in_its_interval(
    api: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memkit.store.base import Table

    reads: list[None] = []
    real = Table.reachable
    monkeypatch.setattr(Table, "reachable", lambda self: reads.append(real(self)))

    answers = [api("GET", "/v1/health").status for _ in range(3)]

    assert answers == [200, 200, 200]
    assert len(reads) == 1


def test_the_openapi_document_describes_every_route(api: Call) -> None:
    from memkit.handlers.api import app

    response = api("GET", "/v1/openapi.json")

    paths = response.body["paths"]
    documented = {(m.upper(), p) for p, ops in paths.items() for m in ops}
    served = {
        (r.method, r.openapi_path)
        for r in app._static_routes + app._dynamic_routes
        if r.include_in_schema
    }
    assert response.status == 200
    assert documented == served
    assert "ScratchpadView" in response.body["components"]["schemas"]


def test_swagger_ui_is_served_as_html(api: Call) -> None:
    response = api("GET", "/v1/docs")

    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/html")
    assert "swagger" in response.body.lower()


def test_an_unknown_route_is_404_with_the_error_body(api: Call) -> None:
    response = api("GET", "/v1/nothing-here")

    assert response.status == 404
    assert response.body["code"] == "not_found"


def test_a_body_that_is_not_json_is_400(api: Call) -> None:
    response = api("PUT", "/v1/working-memory/s1/scratchpad", raw_body="{not json")

    assert response.status == 400
    assert response.body["code"] == "bad_request"


def test_a_body_without_content_is_422_naming_content(api: Call) -> None:
    response = api("PUT", "/v1/working-memory/s1/scratchpad", body={"contents": "typo"})

    assert response.status == 422
    fields = {e["field"] for e in response.body["errors"]}
    assert "content" in fields


def test_an_id_with_control_characters_is_422(api: Call) -> None:
    response = api("GET", "/v1/working-memory/s1/scratchpad", query={"user_id": "a\nb"})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "user_id"


def test_with_auth_off_every_answer_says_no_credential_was_checked(api: Call) -> None:
    # The default settings: auth mode none (the local stack; never a deployment that faces
    # the internet), where every caller acts as an admin of the default tenant
    ok = api("GET", "/v1/working-memory/")
    refused = api("GET", "/v1/working-memory/s1")  # no such session: a 404
    invalid = api("GET", "/v1/working-memory/s1", query={"recent_messages_limit": "0"})
    health = api("GET", "/v1/health")  # public
    unrouted = api("GET", "/v1/nowhere")  # the resolver's 404

    assert (ok.status, refused.status, invalid.status) == (200, 404, 422)
    assert (health.status, unrouted.status) == (200, 404)
    for response in (ok, refused, invalid, health, unrouted):
        assert response.headers["x-memkit-warning"].startswith("unauthenticated")
