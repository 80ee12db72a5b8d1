"""The MCP route's own authorizer: with AuthMode jwt or apikey, `POST /mcp` has no authorizer
at the gateway and the MCP function verifies the bearer credential itself.

Why: an MCP client learns where to get a token from the `401` it is first answered, whose
`WWW-Authenticate: Bearer resource_metadata="..."` names the RFC 9728 metadata. An HTTP API's
authorizer answers its own `401` before any function runs and cannot add that header, so the
route the MCP clients call is verified here, with the rules API Gateway applies to every other
route, and its answer is the same request context API Gateway would have passed
(`requestContext.authorizer`): `memkit.identity` reads the caller from it unchanged.

- jwt: the token's signature by a key of the issuer's key set (found through
  `<issuer>/.well-known/openid-configuration`, as API Gateway finds it, or a key set the
  settings give), an asymmetric algorithm, `iss` the issuer, `aud` (or, without one,
  `client_id`) one of the audiences, `exp` required, `nbf` and `iat` not in the future, one
  minute of clock skew. The claims pass on as API Gateway passes them: every one a string.
- apikey: the key looked up by its hash, as the API-key authorizer does
  (memkit.service.api_keys); its record is the context.

A credential that fails is `Unauthenticated` (a 401 that never says why to the client).
Keys the issuer does not serve (its endpoint down) are `IssuerUnavailable`, a 503 the client
may retry; a key set once fetched keeps serving while a refresh fails.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memkit.errors import MemkitError, Misconfigured, Unauthenticated

if TYPE_CHECKING:
    from memkit.service.api_keys import ApiKeyService

# Asymmetric signatures only: a shared-secret algorithm (HS256) would let anyone who holds
# the public key set sign tokens. API Gateway accepts RSA; ES256 serves the local dev keys.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
CLOCK_SKEW_SECONDS = 60
FETCH_TIMEOUT_SECONDS = 3.0
MAX_DOCUMENT_BYTES = 512 * 1024
# API Gateway keeps an issuer's keys for up to two hours; a token signed by a key the set does
# not hold makes one refetch, at most once a minute (unknown key ids cannot flood the issuer).
KEYS_MAX_AGE_SECONDS = 3600
UNKNOWN_KEY_COOLDOWN_SECONDS = 60
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})

Fetch = Callable[[str], Any]


class IssuerUnavailable(MemkitError):
    """The token issuer's keys could not be fetched: no decision (the client may retry)."""

    status = 503
    code = "unavailable"


def bearer_token(authorization: str | None) -> str:
    """The token of an Authorization header: `Bearer <token>`, or the token alone (the forms
    API Gateway's JWT authorizer takes)."""
    value = (authorization or "").strip()
    scheme, _, rest = value.partition(" ")
    token = rest.strip() if scheme.lower() == "bearer" else value
    if not token or " " in token:
        raise Unauthenticated("a bearer token is required")
    return token


def as_gateway_claim(value: Any) -> str:
    """A claim as API Gateway's JWT authorizer passes it to the function: a string (a list
    becomes "[a b]", a number its digits)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + " ".join(as_gateway_claim(item) for item in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _fetchable(url: str) -> str:
    """`url` if keys may be fetched from it: https, or http on loopback (a local issuer)."""
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK):
        return url
    raise IssuerUnavailable("the token issuer's key set is not at an https URL")


def fetch_json(url: str) -> Any:
    """The JSON document at `url` (IssuerUnavailable when it cannot be had)."""
    request = urllib.request.Request(  # noqa: S310 (the scheme is checked: https or loopback)
        _fetchable(url), headers={"accept": "application/json", "user-agent": "memkit"}
    )
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS) as response:  # noqa: S310
            body = response.read(MAX_DOCUMENT_BYTES + 1)
    except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts, a bad URL
        raise IssuerUnavailable("the token issuer's keys could not be fetched") from exc
    if len(body) > MAX_DOCUMENT_BYTES:
        raise IssuerUnavailable("the token issuer's key set is too large")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise IssuerUnavailable("the token issuer's key set is not JSON") from exc


class KeySet:
    """An issuer's signing keys by key id: a static set (JSON text), or fetched (a key set
    URL, or discovered from the issuer) and kept for KEYS_MAX_AGE_SECONDS."""

    def __init__(
        self,
        issuer: str,
        source: str | None = None,
        fetch: Fetch = fetch_json,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._issuer = issuer
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str | None, Any] = {}
        self._fetched_at: float | None = None
        self._failed = False
        self._url: str | None = None
        text = (source or "").strip()
        if text.startswith("{"):
            try:
                self._keys = self._parse(json.loads(text))
            except (ValueError, IssuerUnavailable) as exc:
                raise Misconfigured("MEMKIT_JWT_JWKS is not a JSON key set") from exc
            self._static = True
        else:
            self._url = text or None
            self._static = False

    def _parse(self, document: Any) -> dict[str | None, Any]:
        import jwt

        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise IssuerUnavailable("the token issuer's key set has no keys")
        keys: dict[str | None, Any] = {}
        for entry in document["keys"]:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except jwt.PyJWTError:  # a key type or curve this verifier does not use
                continue
            keys[key.key_id] = key
        return keys

    def _key_set_url(self) -> str:
        if self._url is None:
            discovery = f"{self._issuer.rstrip('/')}/.well-known/openid-configuration"
            document = self._fetch(discovery)
            found = document.get("jwks_uri") if isinstance(document, dict) else None
            if not isinstance(found, str) or not found:
                raise IssuerUnavailable("the token issuer's discovery names no jwks_uri")
            self._url = found
        return self._url

    def _refresh(self, unknown_key: bool) -> None:
        now = self._clock()
        if self._fetched_at is not None:
            # Held keys serve for their age; an unknown key id, or a fetch that failed, is
            # tried again after the cooldown (a down issuer is not asked on every request).
            recent = UNKNOWN_KEY_COOLDOWN_SECONDS if unknown_key or self._failed else None
            if now - self._fetched_at < (recent or KEYS_MAX_AGE_SECONDS):
                if self._failed and not self._keys:
                    raise IssuerUnavailable("the token issuer's keys could not be fetched")
                return
        self._fetched_at = now
        try:
            self._keys = self._parse(self._fetch(self._key_set_url()))
            self._failed = False
        except IssuerUnavailable:
            self._failed = True
            if not self._keys:
                raise

    def key(self, kid: Any) -> Any:
        """The PyJWK whose id is `kid` (a token without one: the set's only key)."""
        if not self._static:
            with self._lock:
                self._refresh(unknown_key=False)
                if self._find(kid) is None:
                    self._refresh(unknown_key=True)
        found = self._find(kid)
        if found is None:
            raise Unauthenticated("the token is not signed by a key of its issuer")
        return found

    def _find(self, kid: Any) -> Any:
        if isinstance(kid, str) and kid in self._keys:
            return self._keys[kid]
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return None


class JwtVerifier:
    """Verifies a bearer JWT as API Gateway's JWT authorizer does and answers the request
    context it would pass (`{"jwt": {"claims": {...}, "scopes": None}}`)."""

    def __init__(self, issuer: str, audiences: Sequence[str], keys: KeySet) -> None:
        self._issuer = issuer
        self._audiences = frozenset(audiences)
        self._keys = keys

    def claims(self, authorization: str | None) -> dict[str, Any]:
        import jwt

        token = bearer_token(authorization)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthenticated("the bearer token is not a JWT") from exc
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise Unauthenticated("the token is not signed with an accepted algorithm")
        key = self._keys.key(header.get("kid"))
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                issuer=self._issuer,
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iss"], "verify_aud": False},
            )
        except jwt.PyJWTError as exc:
            raise Unauthenticated("the token does not verify") from exc
        if not isinstance(claims, dict) or not self._for_us(claims):
            raise Unauthenticated("the token is not for this API")
        return claims

    def _for_us(self, claims: dict[str, Any]) -> bool:
        # API Gateway: `aud` must name an audience; without `aud`, `client_id` must (Cognito's
        # access tokens carry the app client in `client_id`).
        audience = claims.get("aud")
        if audience is not None:
            named = [audience] if isinstance(audience, str) else audience
            return isinstance(named, list) and any(
                isinstance(one, str) and one in self._audiences for one in named
            )
        client = claims.get("client_id")
        return isinstance(client, str) and client in self._audiences

    def authorizer(self, authorization: str | None) -> dict[str, Any]:
        """`requestContext.authorizer` for a request carrying `authorization`."""
        claims = self.claims(authorization)
        strings = {name: as_gateway_claim(value) for name, value in claims.items()}
        return {"jwt": {"claims": strings, "scopes": None}}


class KeyVerifier:
    """Looks an API key up as memkit's Lambda authorizer does and answers its context
    (`{"lambda": {"tenant", "user_id", "scopes", "key_id"}}`)."""

    def __init__(self, keys: ApiKeyService) -> None:
        self._keys = keys

    def authorizer(self, authorization: str | None) -> dict[str, Any]:
        check = self._keys.check(authorization)  # StoreUnavailable, Throttled: no decision
        if check.key is None:
            raise Unauthenticated("the API key is not valid")
        with contextlib.suppress(MemkitError):  # bookkeeping: never a reason to refuse
            self._keys.record_use(check)
        return {"lambda": check.key.authorizer_context()}
