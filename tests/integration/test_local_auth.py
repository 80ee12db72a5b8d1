"""The local stack's JWT authorizer (`memkit serve --auth jwt`): tokens verified as API
Gateway's JWT authorizer verifies them, the claims reaching the function, and development
tokens from `memkit token`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from memkit_dev.local.auth import DEV_KEY_ID, JwtAuthorizer, JwtSettings, Unauthorized, mint
from memkit_dev.local.stack import LocalStack, LocalStackConfig
from tests.conftest import ROOT
from tests.mcp_requests import initialize

pytestmark = pytest.mark.integration


def _config(**auth: Any) -> LocalStackConfig:
    """A small local stack on moto (one API environment, no cleanup timer) with `auth`."""
    return LocalStackConfig(
        port=0,
        concurrency=1,
        template=ROOT / "template.yaml",
        engine="moto",
        cleanup_interval_seconds=0,
        **auth,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    data = tmp_path_factory.mktemp("auth")
    with LocalStack(_config(auth="jwt", jwt=JwtSettings(data_dir=data))) as running:
        yield running


def _call(stack: LocalStack, token: str | None, method: str, path: str, **kw: Any) -> Any:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, f"{stack.url}{path}", headers=headers, timeout=60, **kw)


def _token(stack: LocalStack, user: str, *scopes: str, tenant: str = "default") -> str:
    """A token signed by the key pair the stack trusts (kept in its JWT settings' folder)."""
    assert stack.config.jwt is not None
    return mint(stack.config.jwt.data_dir, user, tenant, list(scopes))


def test_a_data_route_needs_a_token_and_public_routes_do_not(stack: LocalStack) -> None:
    assert _call(stack, None, "GET", "/v1/working-memory/").status_code == 401
    assert _call(stack, "not-a-token", "GET", "/v1/working-memory/").status_code == 401
    health = _call(stack, None, "GET", "/v1/health")
    assert health.status_code == 200
    assert "x-memkit-warning" not in health.headers  # identity is verified here
    assert _call(stack, None, "GET", "/v1/openapi.json").status_code == 200


def test_the_claims_decide_who_calls_and_what_they_may_do(stack: LocalStack) -> None:
    ada = _token(stack, "ada", "memory:read", "memory:write")
    bob = _token(stack, "bob", "memory:read", "memory:write")
    reader = _token(stack, "ada", "memory:read")
    message = {"messages": [{"id": "m1", "role": "user", "content": "ada's secret"}]}

    written = _call(stack, ada, "POST", "/v1/working-memory/ada-chat/messages", json=message)
    as_bob = _call(stack, bob, "GET", "/v1/working-memory/ada-chat")
    bob_lists = _call(stack, bob, "GET", "/v1/working-memory/").json()
    read_only = _call(stack, reader, "POST", "/v1/working-memory/ada-chat/messages", json=message)

    assert written.status_code == 201
    assert as_bob.status_code == 403
    assert bob_lists["sessions"] == []
    assert read_only.status_code == 403
    assert "memory:write" in read_only.json()["detail"]
    assert "x-memkit-warning" not in written.headers


def test_tokens_that_api_gateway_would_refuse_are_401(stack: LocalStack) -> None:
    key = ec.generate_private_key(ec.SECP256R1())  # not the key the stack trusts
    now = int(time.time())
    good = {"iss": "memkit-local", "aud": "memkit", "sub": "ada", "exp": now + 600}
    forged = jwt.encode(good, key, algorithm="ES256", headers={"kid": DEV_KEY_ID})
    assert _call(stack, forged, "GET", "/v1/working-memory/").status_code == 401

    assert stack.config.jwt is not None
    authorizer = JwtAuthorizer(JwtSettings(data_dir=stack.config.jwt.data_dir))
    assert authorizer.claims(f"Bearer {_token(stack, 'ada')}")["sub"] == "ada"
    for wrong in (
        {"aud": "someone-else"},
        {"iss": "elsewhere"},
        {"exp": now - 3600},  # expired beyond the clock skew
        {"nbf": now + 3600},  # not valid yet
    ):
        claims = {**good, **wrong}
        token = jwt.encode(claims, authorizer._dev_key, algorithm="ES256")
        with pytest.raises(Unauthorized):
            authorizer.claims(f"Bearer {token}")
    missing_exp = {k: v for k, v in good.items() if k != "exp"}
    with pytest.raises(Unauthorized):
        authorizer.claims(f"Bearer {jwt.encode(missing_exp, authorizer._dev_key, 'ES256')}")
    hs256 = jwt.encode(good, "a shared secret of thirty-two bytes!", algorithm="HS256")
    with pytest.raises(Unauthorized):  # only RS256 and ES256 (no algorithm confusion)
        authorizer.claims(f"Bearer {hs256}")


def test_a_key_set_file_is_trusted_as_the_gateway_trusts_an_issuers_jwks(
    tmp_path: Path,
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [{**public, "kid": "k1"}]}))
    settings = JwtSettings(jwks=str(tmp_path / "jwks.json"), issuer="https://idp", audience="api")
    claims = {"iss": "https://idp", "aud": "api", "sub": "u1", "exp": int(time.time()) + 60}
    token = jwt.encode({**claims, "scp": ["memory:read"]}, key, "ES256", headers={"kid": "k1"})

    context = JwtAuthorizer(settings).context(f"Bearer {token}")

    # Claims are strings, as API Gateway passes them (a list as "[a b]")
    assert context["jwt"]["claims"]["sub"] == "u1"
    assert context["jwt"]["claims"]["scp"] == "[memory:read]"


def test_memkit_token_mints_what_serve_accepts(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "memkit_dev.cli", "token", "--sub", "ada", "--admin"]
    minted = subprocess.run(
        [*command, "--data-dir", str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout.strip()

    claims = JwtAuthorizer(JwtSettings(data_dir=tmp_path)).claims(f"Bearer {minted}")

    assert claims["sub"] == "ada"
    assert claims["scope"] == "memory:read memory:write memory:admin"
    assert (tmp_path / "dev-jwt-key.pem").stat().st_mode & 0o077 == 0  # the key is private


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:get_working_memory is deprecated:DeprecationWarning")
async def test_agent_memory_client_calls_with_a_bearer_token(stack: LocalStack) -> None:
    from agent_memory_client import MemoryAPIClient, MemoryClientConfig
    from agent_memory_client.models import MemoryMessage, WorkingMemory

    # agent-memory-client 0.14.0 has no auth option: the token goes on its HTTP client
    ada = MemoryAPIClient(MemoryClientConfig(base_url=stack.url, default_namespace="ams"))
    ada._client.headers["Authorization"] = (
        f"Bearer {_token(stack, 'ada', 'memory:read', 'memory:write')}"
    )
    anonymous = MemoryAPIClient(MemoryClientConfig(base_url=stack.url, default_namespace="ams"))
    try:
        memory = WorkingMemory(
            session_id="ams-1",
            namespace="ams",
            messages=[MemoryMessage(role="user", content="hello")],
        )
        await ada.put_working_memory("ams-1", memory)
        read = await ada.get_working_memory("ams-1")
        with pytest.raises(Exception, match="401"):
            await anonymous.get_working_memory("ams-1")
    finally:
        await ada.close()
        await anonymous.close()

    assert [m.content for m in read.messages] == ["hello"]
    assert read.user_id == "ada"  # the token's user, though the client named none


def test_api_keys_are_checked_by_the_templates_authorizer_function() -> None:
    from memkit.config import ApiKeySettings
    from memkit.handlers.wiring import api_keys_for

    config = _config(auth="apikey")
    with LocalStack(config) as stack:
        assert stack.dev_key is not None
        dev = stack.dev_key
        # Given a second key, of a backend (admin) of another tenant, then revoked
        keys = api_keys_for(
            ApiKeySettings(table_name=config.table_name, dynamodb_endpoint=stack.dynamodb_endpoint)
        )
        other = keys.create("acme", ["memory:read", "memory:admin"], name="backend")

        written = _call(
            stack, dev, "PUT", "/v1/working-memory/k1/scratchpad", json={"content": "x"}
        )
        read = _call(stack, dev, "GET", "/v1/working-memory/k1")
        missing = _call(stack, None, "GET", "/v1/working-memory/k1")
        unknown = _call(stack, dev[:-4] + "AAAA", "GET", "/v1/working-memory/k1")
        across = _call(stack, other.plain, "GET", "/v1/working-memory/k1")
        keys.revoke("acme", other.key.key_id)

    # Then the dev key acts as user dev of tenant default; no key is 401 and a wrong one 403,
    # as API Gateway answers; another tenant's admin key does not see tenant default's session
    assert written.status_code == 200
    assert read.status_code == 200
    assert read.json()["user_id"] == "dev"
    assert (missing.status_code, unknown.status_code) == (401, 403)
    assert across.status_code == 404


class GatewayClock:
    """The local gateway's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _revoked_after_one_call(stack: LocalStack) -> tuple[Any, Any]:
    """A key of user ada: one request that lets it in (the gateway may keep that answer),
    then the key revoked as `memkit keys revoke` does; the request's answer and the keys."""
    from memkit.config import ApiKeySettings
    from memkit.handlers.wiring import api_keys_for

    keys = api_keys_for(
        ApiKeySettings(
            table_name=stack.config.table_name, dynamodb_endpoint=stack.dynamodb_endpoint
        )
    )
    ada = keys.create("default", ["memory:read", "memory:write"], user_id="ada", name="ada")
    before = _call(stack, ada.plain, "GET", "/v1/working-memory/")
    keys.revoke("default", ada.key.key_id)
    return before, ada.plain


def test_with_no_key_cache_a_revoked_key_is_refused_at_its_next_request() -> None:
    # Given the gateway told to keep no authorizer answer (ApiKeyCacheSeconds 0)
    with LocalStack(_config(auth="apikey", api_key_cache_seconds=0)) as stack:
        # When a key that was let in is revoked
        before, ada = _revoked_after_one_call(stack)
        after = _call(stack, ada, "GET", "/v1/working-memory/")

    # Then its next request asks the authorizer again, which refuses it, as API Gateway does
    assert before.status_code == 200
    assert after.status_code == 403


def test_a_revoked_key_works_until_the_gateways_cached_answer_expires() -> None:
    clock = GatewayClock()
    # Given the gateway keeping each key's answer 120 s, on a clock the test moves
    config = _config(auth="apikey", api_key_cache_seconds=120, gateway_clock=clock)
    with LocalStack(config) as stack:
        # When a key that was let in is revoked, then used within and after the 120 s
        before, ada = _revoked_after_one_call(stack)
        clock.now += 119
        cached = _call(stack, ada, "GET", "/v1/working-memory/")
        clock.now += 1
        expired = _call(stack, ada, "GET", "/v1/working-memory/")

    # Then the kept answer lets it in until it expires, and the authorizer refuses it then
    assert (before.status_code, cached.status_code) == (200, 200)
    assert expired.status_code == 403


@pytest.mark.parametrize("seconds", ["-1", "3601"])
def test_serve_refuses_a_key_cache_the_template_would_refuse(
    seconds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from memkit_dev.cli import main

    template = str(ROOT / "template.yaml")
    status = main(["serve", "--api-key-cache", seconds, "--template", template])

    assert status == 2
    assert "--api-key-cache" in capsys.readouterr().err


MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _both(stack: LocalStack, token: str) -> tuple[int, int]:
    """The status REST and MCP answer a token with."""
    answer = _call(stack, token, "GET", "/v1/working-memory/")
    rest = answer.status_code
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    mcp = httpx.post(
        f"{stack.url}/mcp", json=initialize(), headers=headers, timeout=120
    ).status_code
    return rest, mcp


def test_rest_and_mcp_answer_every_token_alike_never_a_500(stack: LocalStack) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    assert stack.config.jwt is not None
    signer = JwtAuthorizer(JwtSettings(data_dir=stack.config.jwt.data_dir))._dev_key
    now = int(time.time())
    good = {"iss": "memkit-local", "sub": "ada", "scope": "memory:read", "exp": now + 600}
    good["custom:tenant"] = "default"
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def es256(claims: dict[str, Any]) -> str:
        return jwt.encode(claims, signer, algorithm="ES256", headers={"kid": DEV_KEY_ID})

    # A Cognito access token: no aud, its app client in client_id (API Gateway reads it)
    assert _both(stack, es256({**good, "client_id": "memkit"})) == (200, 200)
    for refused in (
        jwt.encode({**good, "aud": "memkit"}, rsa_key, "RS256", headers={"kid": DEV_KEY_ID}),
        es256({**good, "client_id": "another-client"}),
        es256(good),  # neither aud nor client_id
        es256({**good, "aud": "memkit", "exp": now - 3600}),
        es256({**good, "aud": "memkit", "iss": "https://elsewhere.example.com"}),
    ):
        assert _both(stack, refused) == (401, 401)


def test_mcp_refuses_a_host_that_is_not_the_apis_with_421(stack: LocalStack) -> None:
    token = _token(stack, "ada", "memory:read")
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}

    own = httpx.post(f"{stack.url}/mcp", json=initialize(), headers=headers, timeout=120)
    foreign = httpx.post(
        f"{stack.url}/mcp",
        json=initialize(),
        headers={**headers, "host": "evil.example.com"},
        timeout=120,
    )

    assert own.status_code == 200
    assert foreign.status_code == 421
