"""AWS's own Bedrock AgentCore Memory clients, pointed at memkit (docs/agentcore.md).

boto3's `bedrock-agentcore` client (and `bedrock-agentcore-control`, which creates memories)
signs every request with SigV4 for the service `bedrock-agentcore`. memkit's gateway checks
something else, depending on the stack's AuthMode:

- `iam`: SigV4 for the service `execute-api` in the API's region (API Gateway's AWS_IAM).
  `configure_session(session, sigv4=True)` keeps the session's credentials and signature and
  changes only its scope: service `execute-api`, region the API's (from its execute-api
  host, else `region=`, else the client's).
- `jwt` and `apikey`: `Authorization: Bearer <token>` (a JWT, or a memkit key `mk_...`).
  `configure_session(session, token=...)` sends the token instead of a signature, so no AWS
  credentials are needed; `token` may be a function, called for every call (a token that
  renews itself).

The endpoint is boto3's own configuration, so an agent switches by configuration only:
`AWS_ENDPOINT_URL_BEDROCK_AGENTCORE` and `AWS_ENDPOINT_URL_BEDROCK_AGENTCORE_CONTROL` (or
a `services` section of the shared config file), or `endpoint_url=` on a client. The hooks are
boto3 event handlers (`before-call`, one of the events boto3 documents for extensions),
registered on a session for the clients it creates afterwards (for one client:
`AgentCoreAuth(token=...).register(client.meta.events)`):

    session = configure_session(boto3.Session(), token=os.environ["MEMKIT_TOKEN"])
    memory = MemoryClient(boto3_session=session)    # bedrock_agentcore.memory

`configure_from_env(session)` does the same as the environment says (MEMKIT_TOKEN, or
MEMKIT_AUTH=sigv4), and nothing without them: one agent, AWS's AgentCore Memory or memkit
by its environment alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from memkit.client.auth import region_of

# The boto3 clients the hooks apply to: the data plane and the control plane (its
# CreateMemory, GetMemory... are served by memkit too).
SERVICES = ("bedrock-agentcore", "bedrock-agentcore-control")
EXECUTE_API = "execute-api"
_HOOK_ID = "memkit-agentcore-auth"


class _HasEvents(Protocol):  # a boto3.Session
    @property
    def events(self) -> Any: ...


SessionT = TypeVar("SessionT", bound=_HasEvents)


class AgentCoreAuth:
    """A `before-call` handler that makes a bedrock-agentcore request acceptable to memkit's
    gateway: a bearer token in place of the signature, or SigV4 scoped to execute-api."""

    def __init__(
        self,
        *,
        token: str | Callable[[], str] | None = None,
        sigv4: bool = False,
        region: str | None = None,
    ) -> None:
        if (token is not None) == sigv4:
            raise ValueError("give token= (AuthMode jwt or apikey) or sigv4=True (iam), not both")
        if token is not None and not callable(token) and not token.strip():
            raise ValueError("token is empty")
        self._token = token
        self._region = region

    def __call__(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if self._token is not None:
            token = self._token() if callable(self._token) else self._token
            params["headers"]["Authorization"] = f"Bearer {token}"
            # botocore's auth type `none`: the request goes out unsigned, with the token.
            context["auth_type"] = "none"
            return
        host = urlsplit(params.get("url") or "").hostname or ""
        signing = context.setdefault("signing", {})
        signing["signing_name"] = EXECUTE_API
        signing["region"] = self._region or region_of(host) or context.get("client_region")

    def register(self, events: Any) -> None:
        """Handle the calls of every SERVICES client `events` (a session's or a client's
        event system) emits, replacing a handler registered before."""
        for service in SERVICES:
            name = f"before-call.{service}"
            events.unregister(name, unique_id=f"{_HOOK_ID}-{service}")
            events.register(name, self, unique_id=f"{_HOOK_ID}-{service}")


def configure_session(
    session: SessionT,
    *,
    token: str | Callable[[], str] | None = None,
    sigv4: bool = False,
    region: str | None = None,
) -> SessionT:
    """`session` (a boto3.Session), its bedrock-agentcore clients created from now on made to
    call memkit: with `token` (AuthMode jwt or apikey) or `sigv4=True` (iam; `region` when
    the API's host does not name it, e.g. a custom domain). Returns the session."""
    AgentCoreAuth(token=token, sigv4=sigv4, region=region).register(session.events)
    return session


def configure_from_env(session: SessionT, environ: Mapping[str, str] | None = None) -> SessionT:
    """`session` configured as the environment says: MEMKIT_TOKEN set: that token (AuthMode
    jwt or apikey); MEMKIT_AUTH=sigv4: SigV4 for execute-api (MEMKIT_REGION when the API's
    host does not name its region); neither: unchanged, so its clients call AWS's own
    AgentCore Memory, or wherever AWS_ENDPOINT_URL_BEDROCK_AGENTCORE points, as AWS signs."""
    environ = os.environ if environ is None else environ
    token = environ.get("MEMKIT_TOKEN", "").strip()
    mode = environ.get("MEMKIT_AUTH", "").strip().lower()
    if mode not in ("", "sigv4", "token"):
        raise ValueError(f"MEMKIT_AUTH={mode!r}: expected sigv4 or token")
    if mode == "sigv4":
        return configure_session(session, sigv4=True, region=environ.get("MEMKIT_REGION") or None)
    if token:
        return configure_session(session, token=token)
    if mode == "token":
        raise ValueError("MEMKIT_AUTH=token needs MEMKIT_TOKEN")
    return session
