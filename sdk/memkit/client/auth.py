"""How the SDK proves who calls: a bearer token, OAuth client credentials, or SigV4.

Each is an `httpx.Auth`, applied to every request (retries included: a refreshed token or a
fresh signature each time). The SDK never says who the user is: the API reads the caller from
what the gateway verified, and a `user_id` the SDK passes is only checked against it.
"""

from __future__ import annotations

import base64
import re
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

import httpx

from memkit.client.errors import MemkitClientError

# A token is renewed this long before it expires (clock skew, time in flight).
EXPIRY_MARGIN_SECONDS = 60.0
EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
# The headers a SigV4 signature covers: what the gateway sees unchanged. Hop-by-hop and
# client-chosen headers (user-agent, accept-encoding) stay out, as botocore leaves them.
SIGNED_HEADERS = ("host", "content-type", "if-match")


class BearerToken(httpx.Auth):
    """`Authorization: Bearer <token>`: a JWT (`memkit token`, Cognito, your identity provider)
    or an API key (`mk_...`). `token` may be a function, called for every request (a token
    that renews itself)."""

    def __init__(self, token: str | Callable[[], str]) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._token() if callable(self._token) else self._token
        request.headers["Authorization"] = f"Bearer {token}"
        yield request


class ClientCredentials(httpx.Auth):
    """OAuth 2.0 client credentials (RFC 6749 §4.4), as the stack's Cognito user pool issues
    them (the `TokenUrl` output, docs/deploy.md): fetches an access token, keeps it until a
    minute before it expires, and fetches a new one once when the API answers 401."""

    requires_request_body = True
    requires_response_body = True

    def __init__(
        self,
        token_url: str,
        client_id: str,
        client_secret: str,
        scopes: tuple[str, ...] | list[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._token_url = token_url
        self._client_id = client_id
        self._client_secret = client_secret
        self._scopes = " ".join(scopes)
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires = 0.0

    def _token_request(self) -> httpx.Request:
        form = {"grant_type": "client_credentials"}
        if self._scopes:
            form["scope"] = self._scopes
        # client_secret_basic, what Cognito's confidential app clients take.
        pair = base64.b64encode(f"{self._client_id}:{self._client_secret}".encode()).decode()
        return httpx.Request(
            "POST", self._token_url, data=form, headers={"Authorization": f"Basic {pair}"}
        )

    def _store(self, response: httpx.Response) -> str:
        if response.status_code != 200:
            raise MemkitClientError(
                f"the token endpoint refused the client credentials ({response.status_code})"
            )
        answer = response.json()
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise MemkitClientError("the token endpoint answered without an access_token")
        lifetime = float(answer.get("expires_in") or 3600)
        with self._lock:
            self._token = token
            self._expires = self._clock() + lifetime - EXPIRY_MARGIN_SECONDS
        return token

    def _current(self) -> str | None:
        with self._lock:
            return self._token if self._token and self._clock() < self._expires else None

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._current()
        fresh = token is None
        if token is None:
            token = self._store((yield self._token_request()))
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401 and not fresh:
            # Revoked or expired early: one new token, one resend.
            token = self._store((yield self._token_request()))
            request.headers["Authorization"] = f"Bearer {token}"
            yield request


def region_of(host: str) -> str | None:
    """The region of an execute-api host (abc123.execute-api.eu-west-1.amazonaws.com)."""
    found = EXECUTE_API_HOST.search(host)
    return found.group(1) if found else None


class SigV4(httpx.Auth):
    """AWS Signature Version 4 for `AuthMode=iam` (service `execute-api`), signing each request
    with the credentials of a boto3 session (its default chain: environment, profile, role).

    The region comes from the API's execute-api host; give `region` for a custom domain."""

    requires_request_body = True

    def __init__(
        self, session: Any = None, region: str | None = None, service: str = "execute-api"
    ) -> None:
        if session is None:
            import boto3

            session = boto3.Session()
        self._session = session
        self._region = region
        self._service = service

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self._session.get_credentials()
        if credentials is None:
            raise MemkitClientError("SigV4: the boto3 session found no AWS credentials")
        region = self._region or region_of(request.url.host) or self._session.region_name
        if not region:
            raise MemkitClientError("SigV4: give the region (the API's host does not name one)")
        headers = {
            name: request.headers[name] for name in SIGNED_HEADERS if name in request.headers
        }
        signed = AWSRequest(
            method=request.method, url=str(request.url), data=request.content, headers=headers
        )
        SigV4Auth(credentials.get_frozen_credentials(), self._service, region).add_auth(signed)
        for name, value in signed.headers.items():
            request.headers[name] = value
        yield request
