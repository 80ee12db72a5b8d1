"""The SDK's auth (memkit.client.auth) on httpx's MockTransport: SigV4 signatures that verify
over what is actually sent, and OAuth client credentials fetched, kept and renewed."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs

import boto3
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from memkit.client import ClientCredentials, MemkitClient, MemkitClientError, SigV4
from memkit.client.auth import region_of

API = "https://abc123.execute-api.eu-west-1.amazonaws.com"
CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-tok")
HEALTH = {"now": 1}


def session(credentials: Credentials | None = CREDENTIALS, region: str = "us-east-1") -> Any:
    """A boto3 session whose credential chain yields `credentials`."""
    made = boto3.Session(region_name=region)
    made._session.get_credentials = lambda: credentials  # type: ignore[method-assign]
    return made


def signature_verifies(request: httpx.Request, region: str) -> bool:
    """What the gateway checks: the signature recomputed over the request as it arrived."""
    authorization = request.headers["authorization"]
    signed_names = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    received = AWSRequest(
        method=request.method,
        url=str(request.url),
        data=request.content,
        headers={name: request.headers[name] for name in signed_names},
    )
    received.context["timestamp"] = request.headers["x-amz-date"]
    signer = SigV4Auth(CREDENTIALS, "execute-api", region)
    canonical = signer.canonical_request(received)
    expected = signer.signature(signer.string_to_sign(received, canonical), received)
    return authorization.endswith(f"Signature={expected}")


def test_sigv4_signs_method_path_query_and_body_for_the_apis_region() -> None:
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "ok", "created": ["a"], "duplicates": []})

    memkit = MemkitClient(API, auth=SigV4(session()), transport=httpx.MockTransport(gateway))

    memkit.create_memories([{"id": "a", "text": "Ada drinks tea"}], deduplicate=False)
    memkit.delete_memories(["a b", "ç"])

    create, delete = seen
    assert "/eu-west-1/execute-api/aws4_request" in create.headers["authorization"]
    assert create.headers["x-amz-security-token"] == "session-tok"
    assert signature_verifies(create, "eu-west-1")
    assert signature_verifies(delete, "eu-west-1")
    assert delete.url.params.get_list("memory_ids") == ["a b", "ç"]
    # A body changed after signing no longer verifies.
    tampered = httpx.Request("POST", create.url, headers=create.headers, content=b"{}")
    assert not signature_verifies(tampered, "eu-west-1")


def test_sigv4_signs_again_for_every_try() -> None:
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(429, json={"message": "Too Many Requests"})
        return httpx.Response(200, json=HEALTH)

    memkit = MemkitClient(
        API, auth=SigV4(session()), transport=httpx.MockTransport(gateway), sleep=lambda _: None
    )

    memkit.health()

    assert len(seen) == 2
    assert all(signature_verifies(request, "eu-west-1") for request in seen)


def test_sigv4_needs_credentials_and_a_region() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=HEALTH))
    custom_domain = "https://memory.example.com"

    with pytest.raises(MemkitClientError, match="no AWS credentials"):
        MemkitClient(API, auth=SigV4(session(None)), transport=transport).health()
    with pytest.raises(MemkitClientError, match="give the region"):
        MemkitClient(custom_domain, auth=SigV4(session(region="")), transport=transport).health()
    assert (
        MemkitClient(custom_domain, auth=SigV4(session(), region="us-west-2"), transport=transport)
        .health()
        .now
        == 1
    )
    assert region_of("abc.execute-api.cn-north-1.amazonaws.com.cn") == "cn-north-1"


class TokenEndpoint:
    """A Cognito token endpoint and the API behind it, answering on one transport."""

    def __init__(self) -> None:
        self.issued = 0
        self.token_requests: list[httpx.Request] = []
        self.api_tokens: list[str] = []
        self.revoked: set[str] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/oauth2/token":
            self.token_requests.append(request)
            self.issued += 1
            token = {"access_token": f"tok-{self.issued}", "expires_in": 3600}
            return httpx.Response(200, json=token)
        token = request.headers["authorization"].removeprefix("Bearer ")
        self.api_tokens.append(token)
        if token in self.revoked:
            return httpx.Response(401, json={"message": "Unauthorized"})
        return httpx.Response(200, json=HEALTH)


def test_client_credentials_fetch_a_token_keep_it_and_renew_it_before_it_expires() -> None:
    endpoint, now = TokenEndpoint(), [0.0]
    auth = ClientCredentials(
        "https://auth.example.com/oauth2/token",
        "client-1",
        "s3cret",
        scopes=["memkit/memory:read", "memkit/memory:write"],
        clock=lambda: now[0],
    )
    memkit = MemkitClient(API, auth=auth, transport=httpx.MockTransport(endpoint))

    memkit.health()
    memkit.health()
    now[0] = 3600 - 30  # within a minute of the expiry
    memkit.health()

    assert endpoint.api_tokens == ["tok-1", "tok-1", "tok-2"]
    first = endpoint.token_requests[0]
    assert (
        first.headers["authorization"] == "Basic " + base64.b64encode(b"client-1:s3cret").decode()
    )
    assert parse_qs(first.content.decode()) == {
        "grant_type": ["client_credentials"],
        "scope": ["memkit/memory:read memkit/memory:write"],
    }


def test_client_credentials_renew_a_revoked_token_once() -> None:
    endpoint = TokenEndpoint()
    auth = ClientCredentials("https://auth.example.com/oauth2/token", "c", "s")
    memkit = MemkitClient(API, auth=auth, transport=httpx.MockTransport(endpoint))
    memkit.health()
    endpoint.revoked.add("tok-1")

    memkit.health()

    assert endpoint.api_tokens == ["tok-1", "tok-1", "tok-2"]


def test_client_credentials_refused_is_an_error_without_the_secret() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": "invalid_client"})

    auth = ClientCredentials("https://auth.example.com/oauth2/token", "c", "hunter2")
    memkit = MemkitClient(API, auth=auth, transport=httpx.MockTransport(refuse))

    with pytest.raises(MemkitClientError) as raised:
        memkit.health()

    assert "refused the client credentials (400)" in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_a_token_and_an_auth_together_are_refused() -> None:
    with pytest.raises(ValueError, match="token or auth"):
        MemkitClient(API, token="t", auth=SigV4(session()))
