"""The local stack's authorizers: what API Gateway's HTTP API JWT authorizer, its AWS_IAM
authorization and memkit's API-key Lambda authorizer do, on one machine, so `memkit serve
--auth jwt|iam|apikey` checks callers as a deployment does.

A token is verified against a JSON Web Key Set (a file, a URL, or the local development key
pair) by the MCP function's verifier (memkit.mcp_server.bearer), which applies API Gateway's
rules: an asymmetric signature by a key of the set, `iss`, `aud` (or, without one, Cognito's
`client_id`) one of the audiences, `exp` required, `nbf` and `iat` honoured, with a bounded
clock skew. So REST and MCP answer a token alike. A token that fails is a 401
`{"message":"Unauthorized"}` before the function is invoked, as API Gateway answers; a key
set that cannot be fetched a 503. A token that passes reaches the function as
`requestContext.authorizer.jwt.claims`, each claim a string as API Gateway passes them (a
list becomes "[a b]").

Without `--jwks`, the stack makes (once) an ES256 key pair in its data folder and trusts it:
`memkit token` mints development tokens with it.

With `--auth iam` the gateway verifies SigV4 for service `execute-api` in the stack's region
(memkit_dev.local.sigv4) against the access keys of the principals it knows, and passes the
principal as `requestContext.authorizer.iam`, as API Gateway does. Without a credentials file
the stack makes (once) a development IAM user, `arn:aws:iam::123456789012:user/memkit-dev`,
with an access key kept in its data folder; the start banner prints it. No IAM policy is
evaluated: every principal it knows may call every route (on AWS, execute-api:Invoke decides).
"""

from __future__ import annotations

import json
import secrets
import string
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from werkzeug.wrappers import Request

from memkit.config import audiences
from memkit.errors import Unauthenticated
from memkit.mcp_server.bearer import IssuerUnavailable, JwtVerifier, KeySet, as_gateway_claim
from memkit_dev.local.sigv4 import SigningKey, verify

DEV_ISSUER = "memkit-local"
DEV_AUDIENCE = "memkit"
DEV_KEY_FILE = "dev-jwt-key.pem"
DEV_KEY_ID = "memkit-local-dev"
DEV_TOKEN_SECONDS = 24 * 3600
DEV_TENANT_CLAIM = "custom:tenant"
DEV_IAM_FILE = "dev-iam-credentials.json"
DEV_ACCOUNT_ID = "123456789012"
DEV_IAM_USER = "memkit-dev"
EXECUTE_API = "execute-api"
# The template's parameter that sets the API-key authorizer's cache (and the functions' view
# of it, MEMKIT_API_KEY_CACHE_SECONDS).
KEY_CACHE_PARAMETER = "ApiKeyCacheSeconds"


class Unauthorized(Exception):
    """The token is missing, malformed, or does not verify (never says which to a client)."""


class Denied(Exception):
    """A Lambda authorizer said no: API Gateway answers 403 {"message":"Forbidden"}."""


class AuthorizerFailed(Exception):
    """A Lambda authorizer raised or timed out: API Gateway answers 500 and caches nothing."""


class KeysUnavailable(Exception):
    """The issuer's key set could not be fetched: no decision (503, as the MCP function
    answers; the client may retry)."""


@dataclass(frozen=True)
class JwtSettings:
    """How the local gateway verifies tokens (`memkit serve --auth jwt ...`)."""

    jwks: str | None = None  # a file path or an https URL; None: the dev key pair
    issuer: str = DEV_ISSUER
    audience: str = DEV_AUDIENCE  # comma-separated, as the template's JwtAudience
    data_dir: Path | None = None  # where the dev key pair lives (None: in memory)
    # What the issuer puts before memkit's scopes (the template's JwtScopePrefix; the dev
    # tokens' are bare): the functions count only those scopes (MEMKIT_SCOPE_PREFIX).
    scope_prefix: str = ""


def _dev_key(data_dir: Path | None) -> Any:
    """The development key pair (ES256), made once and kept in `data_dir` when given."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    path = data_dir / DEV_KEY_FILE if data_dir is not None else None
    if path is not None and path.is_file():
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        path.touch(mode=0o600)
        path.write_bytes(pem)
    return key


def _signed(
    key: Any,
    subject: str,
    tenant: str,
    scopes: list[str],
    seconds: int,
    issuer: str,
    audience: str,
) -> str:
    import jwt

    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        DEV_TENANT_CLAIM: tenant,
        "scope": " ".join(scopes),
        "iat": now,
        "nbf": now,
        "exp": now + seconds,
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": DEV_KEY_ID})


def mint(
    data_dir: Path | None,
    subject: str,
    tenant: str,
    scopes: list[str],
    seconds: int = DEV_TOKEN_SECONDS,
    issuer: str = DEV_ISSUER,
    audience: str = DEV_AUDIENCE,
) -> str:
    """A development token signed by the local key pair kept in `data_dir` (`memkit token`)."""
    return _signed(_dev_key(data_dir), subject, tenant, scopes, seconds, issuer, audience)


class JwtAuthorizer:
    """Verifies bearer tokens and builds the authorizer context API Gateway would send.

    The checks are the MCP function's own (memkit.mcp_server.bearer.JwtVerifier, the rules
    of API Gateway's JWT authorizer), over the key set the stack hands that function, so a
    token gets the same answer from every route: `aud` one of the audiences or, without
    `aud`, `client_id` (a Cognito access token's), a signature by a key of the set in the
    algorithm the key is for (an RS256 token against an EC key is refused, never an
    error), `exp` required, `iat` and `nbf` not in the future."""

    def __init__(self, settings: JwtSettings) -> None:
        self._settings = settings
        self._dev_key: Any = None
        if settings.jwks is None:
            self._dev_key = _dev_key(settings.data_dir)
        keys = KeySet(settings.issuer, self.key_set())
        self._verifier = JwtVerifier(settings.issuer, audiences(settings.audience), keys)

    def dev_token(self, subject: str, tenant: str, scopes: list[str]) -> str | None:
        """A development token this authorizer accepts (None: it trusts an outside key set)."""
        if self._dev_key is None:
            return None
        settings = self._settings
        return _signed(
            self._dev_key,
            subject,
            tenant,
            scopes,
            DEV_TOKEN_SECONDS,
            settings.issuer,
            audiences(settings.audience)[0],
        )

    def claims(self, authorization: str | None) -> dict[str, Any]:
        """The verified claims of `Authorization: Bearer <token>` (or the token alone, as API
        Gateway takes it); Unauthorized otherwise, KeysUnavailable when the key set cannot
        be fetched."""
        try:
            return self._verifier.claims(authorization)
        except Unauthenticated as exc:
            raise Unauthorized("the token does not verify") from exc
        except IssuerUnavailable as exc:
            raise KeysUnavailable("the key set could not be fetched") from exc

    def context(self, authorization: str | None) -> dict[str, Any]:
        """`requestContext.authorizer` for a request, as the HTTP API's JWT authorizer
        passes it: every claim a string."""
        claims = self.claims(authorization)
        strings = {name: as_gateway_claim(value) for name, value in claims.items()}
        return {"jwt": {"claims": strings, "scopes": None}}

    def key_set(self) -> str:
        """Where the MCP function finds the keys this authorizer trusts (MEMKIT_JWT_JWKS): the
        key set URL, or the key set as JSON (a file's, or the dev key pair's public key)."""
        import jwt

        source = self._settings.jwks
        if source is not None and source.startswith(("https://", "http://")):
            return source
        if source is not None:
            return Path(source).read_text(encoding="utf-8")
        public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self._dev_key.public_key()))
        public.update({"kid": DEV_KEY_ID, "use": "sig", "alg": "ES256"})
        return json.dumps({"keys": [public]})


def key_cache_seconds(template: dict[str, Any], seconds: int | None = None) -> int:
    """How long the gateway keeps an API key's answer: the template's ApiKeyCacheSeconds set
    to `seconds` (None: its default), within the parameter's MinValue and MaxValue as
    CloudFormation checks it (ValueError otherwise)."""
    parameter = template["Parameters"][KEY_CACHE_PARAMETER]
    value = int(parameter["Default"]) if seconds is None else seconds
    low, high = int(parameter["MinValue"]), int(parameter["MaxValue"])
    if not low <= value <= high:
        raise ValueError(f"{value}: {KEY_CACHE_PARAMETER} is {low} to {high} seconds")
    return value


class LambdaKeyAuthorizer:
    """`memkit serve --auth apikey`: the template's ApiKeyAuthorizerFunction, run as Lambda
    runs it, in front of every route but the public ones. It gets the HTTP API's REQUEST
    authorizer event (payload 2.0, identity source the Authorization header) and answers a
    simple response; each answer is kept `cache_seconds` (the template's ApiKeyCacheSeconds:
    key_cache_seconds) for the header's value, as API Gateway caches it, 0 keeping none.
    `clock` (monotonic seconds) ages the answers. No header is a 401 without calling the
    function."""

    def __init__(
        self,
        function: Any,
        cache_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._function = function
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._cache: dict[str, tuple[float, dict[str, Any] | None]] = {}

    def context(self, authorization: str | None) -> dict[str, Any]:
        if not authorization:
            raise Unauthorized("no Authorization header")
        cached = self._cache.get(authorization)
        if cached is not None and cached[0] > self._clock():
            answer = cached[1]
        else:
            answer = self._ask(authorization)
            if self._cache_seconds > 0:  # API Gateway: a TTL of 0 turns caching off
                self._cache[authorization] = (self._clock() + self._cache_seconds, answer)
        if answer is None:
            raise Denied("the authorizer said no")
        return {"lambda": answer}

    def _ask(self, authorization: str) -> dict[str, Any] | None:
        event = {
            "version": "2.0",
            "type": "REQUEST",
            "routeArn": "arn:aws:execute-api:us-east-1:123456789012:local/$default",
            "identitySource": [authorization],
            "headers": {"authorization": authorization},
            "requestContext": {"apiId": "local", "stage": "$default"},
        }
        try:
            result = self._function.invoke(event, 5.0).result(timeout=30)
        except Exception as exc:  # the function raised or did not answer
            raise AuthorizerFailed("the authorizer failed") from exc
        if not isinstance(result, dict) or result.get("isAuthorized") is not True:
            return None
        context = result.get("context")
        return dict(context) if isinstance(context, dict) else {}


def _random(alphabet: str, size: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(size))


@dataclass(frozen=True)
class IamPrincipal:
    """An AWS principal the local gateway knows (`--auth iam`): its access key, and what API
    Gateway says of it in `requestContext.authorizer.iam`. `user_id` is the principal's
    unique id (`AIDA...` for an IAM user, `AROA...:session` for an assumed role)."""

    access_key_id: str
    secret_access_key: str
    account_id: str
    user_arn: str
    user_id: str
    session_token: str | None = None

    @classmethod
    def user(cls, account_id: str, name: str) -> IamPrincipal:
        """A new IAM user `name` of `account_id` with a fresh long-term access key."""
        upper = string.ascii_uppercase + string.digits
        return cls(
            access_key_id="AKIA" + _random(upper, 16),
            secret_access_key=_random(string.ascii_letters + string.digits + "+/", 40),
            account_id=account_id,
            user_arn=f"arn:aws:iam::{account_id}:user/{name}",
            user_id="AIDA" + _random(upper, 17),
        )

    @classmethod
    def of(cls, entry: Any) -> IamPrincipal:
        """A principal from a credentials file's entry (the fields above, by name)."""
        if not isinstance(entry, dict):
            raise ValueError("each principal is an object")
        known = {name: entry[name] for name in cls.__dataclass_fields__ if name in entry}
        try:
            return cls(**known)
        except TypeError as exc:
            raise ValueError(f"a principal needs {sorted(cls.__dataclass_fields__)}") from exc

    def iam_context(self) -> dict[str, Any]:
        """`requestContext.authorizer.iam` as API Gateway passes it for this principal."""
        return {
            "accessKey": self.access_key_id,
            "accountId": self.account_id,
            "callerId": self.user_id,
            "cognitoIdentity": None,
            "principalOrgId": None,
            "userArn": self.user_arn,
            "userId": self.user_id,
        }


def load_principals(path: Path) -> list[IamPrincipal]:
    """The principals of a credentials file: `{"principals": [{...}, ...]}`."""
    document = json.loads(path.read_text(encoding="utf-8"))
    entries = document.get("principals") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f'{path}: expected {{"principals": [...]}} with at least one')
    return [IamPrincipal.of(entry) for entry in entries]


def dev_principal(data_dir: Path | None) -> IamPrincipal:
    """The development IAM user (memkit-dev of account 123456789012), made once and kept in
    `data_dir` when given, so its access key survives restarts."""
    path = data_dir / DEV_IAM_FILE if data_dir is not None else None
    if path is not None and path.is_file():
        return load_principals(path)[0]
    principal = IamPrincipal.user(DEV_ACCOUNT_ID, DEV_IAM_USER)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        document = {"principals": [asdict(principal)]}
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return principal


class IamAuthorizer:
    """API Gateway's AWS_IAM authorization: SigV4 for `execute-api` in `region`, verified
    against the principals' keys; a request that fails is refused with
    memkit_dev.local.sigv4.SignatureRejected (the gateway answers 403 with AWS's message)."""

    def __init__(self, principals: Sequence[IamPrincipal], region: str) -> None:
        if not principals:
            raise ValueError("the IAM authorizer needs at least one principal")
        self.principals = list(principals)
        self._region = region
        self._by_key = {principal.access_key_id: principal for principal in principals}

    def _key(self, access_key: str) -> SigningKey | None:
        principal = self._by_key.get(access_key)
        if principal is None:
            return None
        return SigningKey(
            principal.access_key_id, principal.secret_access_key, principal.session_token
        )

    def request_context(self, request: Request, body: bytes) -> dict[str, Any]:
        """`requestContext.authorizer` for a request whose SigV4 signature verifies."""
        key = verify(request, body, service=EXECUTE_API, region=self._region, key_for=self._key)
        return {"iam": self._by_key[key.access_key].iam_context()}
