"""Browsers on the local stack (`memkit serve --cors-origins`): the gateway applies the
template's CorsConfiguration as API Gateway does: it answers a preflight itself, and marks
the answers to an allowed origin; without origins, OPTIONS is a 404 as on AWS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memkit_dev.cli import main
from memkit_dev.local.auth import JwtSettings, mint
from memkit_dev.local.stack import LocalStack, LocalStackConfig
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

APP = "https://app.example.com"
ELSEWHERE = "https://evil.example.net"
PAD = "/v1/working-memory/cors-chat/scratchpad"


@pytest.fixture(scope="module")
def browser_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    config = LocalStackConfig(
        port=0,
        concurrency=1,
        template=ROOT / "template.yaml",
        engine="moto",
        cleanup_interval_seconds=0,
        auth="jwt",
        jwt=JwtSettings(data_dir=tmp_path_factory.mktemp("cors")),
        cors_allowed_origins=f"{APP},http://localhost:5173",
    )
    with LocalStack(config) as running:
        yield running


def _token(stack: LocalStack) -> str:
    assert stack.config.jwt is not None
    return mint(stack.config.jwt.data_dir, "ada", "default", ["memory:read", "memory:write"])


def _preflight(stack: LocalStack, path: str, origin: str, method: str = "PATCH") -> Any:
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization,content-type,if-match",
    }
    return httpx.options(f"{stack.url}{path}", headers=headers, timeout=60)


@pytest.mark.parametrize("path", [PAD, "/mcp", "/v1/no-such-route"])
def test_the_gateway_answers_a_preflight_itself_without_a_token(
    browser_stack: LocalStack, path: str
) -> None:
    # No route, no authorizer, no function: every path, even one no route serves.
    response = _preflight(browser_stack, path, APP)

    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == APP
    assert "PATCH" in response.headers["access-control-allow-methods"].split(",")
    allowed = set(response.headers["access-control-allow-headers"].split(","))
    assert {"authorization", "content-type", "if-match"} <= allowed
    assert response.headers["access-control-max-age"] == "600"
    assert "access-control-allow-credentials" not in response.headers


def test_an_answer_to_an_allowed_origin_lets_the_page_read_it(browser_stack: LocalStack) -> None:
    headers = {"Origin": APP, "Authorization": f"Bearer {_token(browser_stack)}"}

    written = httpx.put(
        f"{browser_stack.url}{PAD}", json={"content": "likes tea"}, headers=headers, timeout=60
    )
    refused = httpx.get(f"{browser_stack.url}{PAD}", headers={"Origin": APP}, timeout=60)

    assert written.status_code == 200
    assert written.headers["access-control-allow-origin"] == APP
    exposed = set(written.headers["access-control-expose-headers"].split(","))
    assert {"etag", "retry-after", "x-memkit-warning"} <= exposed
    # The gateway's own refusal (no token) is readable too, so the page can sign in again.
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == APP


def test_another_origin_gets_no_cors_headers(browser_stack: LocalStack) -> None:
    preflight = _preflight(browser_stack, PAD, ELSEWHERE)
    health = httpx.get(f"{browser_stack.url}/v1/health", headers={"Origin": ELSEWHERE}, timeout=60)

    assert preflight.status_code == 204
    assert "access-control-allow-origin" not in preflight.headers
    assert health.status_code == 200
    assert "access-control-allow-origin" not in health.headers


def test_without_allowed_origins_options_is_not_found(stack: LocalStack) -> None:
    # The default (CorsAllowedOrigins empty): no CORS configuration, and no route answers
    # OPTIONS, so API Gateway's 404.
    response = _preflight(stack, PAD, APP)

    assert response.status_code == 404
    assert response.json() == {"message": "Not Found"}
    assert "access-control-allow-origin" not in response.headers


@pytest.mark.parametrize(
    "origins", ["app.example.com", "https://app.example.com, http://localhost:5173"]
)
def test_serve_refuses_what_is_not_a_list_of_origins(
    origins: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["serve", "--cors-origins", origins, "--template", str(ROOT / "template.yaml")])

    assert status == 2
    assert "--cors-origins" in capsys.readouterr().err
