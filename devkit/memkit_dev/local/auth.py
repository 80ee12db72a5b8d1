"""The local stack's JWT authorizer: what API Gateway's HTTP API JWT authorizer does, on one
machine, so `memkit serve --auth jwt` checks tokens as a deployment does.

A token is verified with PyJWT against a JSON Web Key Set (a file, a URL, or the local
development key pair): RS256 or ES256 only, signature, `iss`, `aud` and `exp` required,
`nbf` honoured, with a bounded clock skew. A token that fails is a 401
`{"message":"Unauthorized"}` before the function is invoked, as API Gateway answers. A token
that passes reaches the function as `requestContext.authorizer.jwt.claims`, each claim a
string as API Gateway passes them (a list becomes "[a b]").

Without `--jwks`, the stack makes (once) an ES256 key pair in its data folder and trusts it:
`memkit token` mints development tokens with it.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memkit.mcp_server.bearer import as_gateway_claim

ALGORITHMS = ["RS256", "ES256"]
CLOCK_SKEW_SECONDS = 60
DEV_ISSUER = "memkit-local"
DEV_AUDIENCE = "memkit"
DEV_KEY_FILE = "dev-jwt-key.pem"
DEV_KEY_ID = "memkit-local-dev"
DEV_TOKEN_SECONDS = 24 * 3600
DEV_TENANT_CLAIM = "custom:tenant"


class Unauthorized(Exception):
    """The token is missing, malformed, or does not verify (never says which to a client)."""


class Denied(Exception):
    """A Lambda authorizer said no: API Gateway answers 403 {"message":"Forbidden"}."""


class AuthorizerFailed(Exception):
    """A Lambda authorizer raised or timed out: API Gateway answers 500 and caches nothing."""


@dataclass(frozen=True)
class JwtSettings:
    """How the local gateway verifies tokens (`memkit serve --auth jwt ...`)."""

    jwks: str | None = None  # a file path or an https URL; None: the dev key pair
    issuer: str = DEV_ISSUER
    audience: str = DEV_AUDIENCE
    data_dir: Path | None = None  # where the dev key pair lives (None: in memory)


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
    """Verifies bearer tokens and builds the authorizer context API Gateway would send."""

    def __init__(self, settings: JwtSettings) -> None:
        import jwt

        self._settings = settings
        self._client: Any = None
        self._keys: dict[str, Any] = {}
        source = settings.jwks
        self._dev_key: Any = None
        if source is None:
            self._dev_key = _dev_key(settings.data_dir)
            self._keys = {DEV_KEY_ID: self._dev_key.public_key()}
        elif source.startswith(("https://", "http://")):
            self._client = jwt.PyJWKClient(source, cache_keys=True, lifespan=300)
        else:
            document = json.loads(Path(source).read_text(encoding="utf-8"))
            jwk_set = jwt.PyJWKSet.from_dict(document)
            self._keys = {key.key_id or str(n): key.key for n, key in enumerate(jwk_set.keys)}

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
            settings.audience,
        )

    def _key_for(self, token: str) -> Any:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthorized("not a token") from exc
        if self._client is not None:
            try:
                return self._client.get_signing_key_from_jwt(token).key
            except jwt.PyJWKClientError as exc:
                raise Unauthorized("no key for this token") from exc
        kid = header.get("kid")
        if kid in self._keys:
            return self._keys[kid]
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        raise Unauthorized("no key for this token")

    def claims(self, authorization: str | None) -> dict[str, Any]:
        """The verified claims of `Authorization: Bearer <token>`; Unauthorized otherwise."""
        import jwt

        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("no bearer token")
        token = token.strip()
        try:
            return dict(
                jwt.decode(
                    token,
                    self._key_for(token),
                    algorithms=ALGORITHMS,
                    audience=self._settings.audience,
                    issuer=self._settings.issuer,
                    leeway=CLOCK_SKEW_SECONDS,
                    options={"require": ["exp", "iss", "aud"]},
                )
            )
        except jwt.PyJWTError as exc:
            raise Unauthorized("the token does not verify") from exc

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


class LambdaKeyAuthorizer:
    """`memkit serve --auth apikey`: the template's ApiKeyAuthorizerFunction, run as Lambda
    runs it, in front of every route but the public ones. It gets the HTTP API's REQUEST
    authorizer event (payload 2.0, identity source the Authorization header) and answers a
    simple response; each answer is kept `cache_seconds` for the header's value, as API
    Gateway caches it. No header is a 401 without calling the function."""

    def __init__(self, function: Any, cache_seconds: float = 300.0) -> None:
        self._function = function
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, dict[str, Any] | None]] = {}

    def context(self, authorization: str | None) -> dict[str, Any]:
        if not authorization:
            raise Unauthorized("no Authorization header")
        cached = self._cache.get(authorization)
        if cached is not None and cached[0] > time.monotonic():
            answer = cached[1]
        else:
            answer = self._ask(authorization)
            self._cache[authorization] = (time.monotonic() + self._cache_seconds, answer)
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
