"""POST /mcp's own authorizer (memkit.mcp_server.bearer): a JWT is accepted exactly when API
Gateway's JWT authorizer would accept it, and the issuer's keys are fetched, kept and
refreshed without letting a client make the function hammer the issuer."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from memkit.errors import Misconfigured, Unauthenticated
from memkit.mcp_server.bearer import (
    UNKNOWN_KEY_COOLDOWN_SECONDS,
    IssuerUnavailable,
    JwtVerifier,
    KeySet,
    as_gateway_claim,
    fetch_json,
)
from tests.tokens import AUDIENCE, ISSUER, KEY_ID, key_set, sign, token

CLAIMS = {"sub": "ada", "custom:tenant": "acme", "scope": "memkit/memory:read"}


def _verifier(keys: dict[str, Any] | None = None, audiences: tuple[str, ...] = (AUDIENCE,)) -> Any:
    source = json.dumps(keys or key_set())
    return JwtVerifier(ISSUER, audiences, KeySet(ISSUER, source))


def test_a_token_of_the_issuer_for_the_audience_passes_its_claims_as_the_gateway_does() -> None:
    sent = token({**CLAIMS, "groups": ["a", "b"], "admin": True})

    context = _verifier().authorizer(f"Bearer {sent}")
    bare = _verifier().authorizer(sent)  # the gateway takes the token alone too

    claims = context["jwt"]["claims"]
    assert claims["sub"] == "ada"
    assert claims["custom:tenant"] == "acme"
    assert claims["groups"] == "[a b]"  # as API Gateway passes a list claim
    assert claims["admin"] == "true"
    assert isinstance(claims["exp"], str)
    assert claims["exp"].isdigit()
    assert context["jwt"]["scopes"] is None
    assert bare == context


def _other_key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hs256(claims: dict[str, Any], secret: bytes) -> str:
    # Signed by hand: PyJWT itself refuses a public key as an HMAC secret.
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": KEY_ID}).encode())
    body = _b64(json.dumps(claims).encode())
    mac = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(mac)}"


def _forged(kind: str) -> str:
    now = int(time.time())
    claims = {**CLAIMS, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    if kind == "another key, same kid":
        return sign(claims, key=_other_key())
    if kind == "HS256 with the public key as secret":  # the classic algorithm confusion
        return _hs256(claims, json.dumps(key_set()["keys"][0]).encode())
    if kind == "alg none":
        return jwt.encode(claims, None, algorithm="none", headers={"kid": KEY_ID})
    if kind == "unknown kid":
        return sign(claims, kid="rotated-away")
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    ["another key, same kid", "HS256 with the public key as secret", "alg none", "unknown kid"],
)
def test_a_token_not_signed_by_the_issuers_key_is_refused(kind: str) -> None:
    with pytest.raises(Unauthenticated):
        _verifier().claims(f"Bearer {_forged(kind)}")


def _at_now(overrides: dict[str, Any]) -> dict[str, Any]:
    """Time claims given as seconds from now (made when the test runs, not when collected)."""
    now = int(time.time())
    times = ("exp", "nbf", "iat")
    return {k: now + v if k in times and isinstance(v, int) else v for k, v in overrides.items()}


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"iss": "https://evil.example.com"}, "another issuer"),
        ({"aud": "another-api"}, "another audience"),
        ({"aud": ["x", "y"]}, "none of its audiences"),
        ({"aud": None}, "no audience and no client_id"),
        ({"exp": -120}, "expired beyond the skew"),
        ({"exp": None}, "no expiry"),
        ({"nbf": 600}, "not yet valid"),
        ({"iat": 600}, "issued in the future"),
        ({"aud": None, "client_id": "another-client"}, "another client"),
    ],
)
def test_a_token_the_gateway_would_refuse_is_refused(overrides: dict[str, Any], why: str) -> None:
    with pytest.raises(Unauthenticated):
        _verifier().claims(f"Bearer {token(CLAIMS, **_at_now(overrides))}")


@pytest.mark.parametrize(
    "overrides",
    [
        {"aud": ["another-api", AUDIENCE]},  # one of its audiences is ours
        {"aud": None, "client_id": AUDIENCE},  # a Cognito access token: its app client
        {"exp": -30},  # within the minute of clock skew
    ],
    ids=["audience list", "cognito client_id", "clock skew"],
)
def test_a_token_the_gateway_would_accept_is_accepted(overrides: dict[str, Any]) -> None:
    assert _verifier().claims(f"Bearer {token(CLAIMS, **_at_now(overrides))}")["sub"] == "ada"


@pytest.mark.parametrize(
    "header", [None, "", "Bearer", "Bearer  ", "Basic YWRhOnB3", "Bearer a b", "Bearer not.a.jwt"]
)
def test_a_missing_or_malformed_credential_is_unauthenticated(header: str | None) -> None:
    with pytest.raises(Unauthenticated):
        _verifier().claims(header)


def test_an_es256_key_of_the_set_verifies_and_a_token_without_kid_uses_the_only_key() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    keys = {"keys": [{**public, "kid": "ec", "use": "sig"}]}
    now = int(time.time())
    claims = {**CLAIMS, "iss": ISSUER, "aud": AUDIENCE, "exp": now + 60}

    with_kid = jwt.encode(claims, key, algorithm="ES256", headers={"kid": "ec"})
    without = jwt.encode(claims, key, algorithm="ES256")

    assert _verifier(keys).claims(with_kid)["sub"] == "ada"
    assert _verifier(keys).claims(without)["sub"] == "ada"
    with pytest.raises(Unauthenticated):  # an RSA token against an EC-only set
        _verifier(keys).claims(token(CLAIMS))


def test_a_static_key_set_that_is_not_json_is_a_misconfiguration() -> None:
    with pytest.raises(Misconfigured):
        KeySet(ISSUER, "{not json")


def test_claims_become_strings_as_api_gateway_passes_them() -> None:
    assert [as_gateway_claim(v) for v in ("a", 7, 1.5, False, ["x", 2], {"k": 1})] == [
        "a",
        "7",
        "1.5",
        "false",
        "[x 2]",
        '{"k":1}',
    ]


# -- the issuer's keys: discovery, caching, rotation, outages --------------------------------


class Issuer:
    """A fake identity provider: its discovery document and key set, counted."""

    def __init__(self) -> None:
        self.keys = key_set()
        self.fetched: list[str] = []
        self.down = False

    def fetch(self, url: str) -> Any:
        self.fetched.append(url)
        if self.down:
            raise IssuerUnavailable("down")
        if url == f"{ISSUER}/.well-known/openid-configuration":
            return {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/keys"}
        if url == f"{ISSUER}/keys":
            return self.keys
        raise AssertionError(url)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _fetching(issuer: Issuer, clock: Clock) -> JwtVerifier:
    return JwtVerifier(ISSUER, [AUDIENCE], KeySet(ISSUER, None, issuer.fetch, clock))


def test_keys_are_discovered_from_the_issuer_once_and_kept() -> None:
    issuer, clock = Issuer(), Clock()
    verifier = _fetching(issuer, clock)

    for _ in range(3):
        verifier.claims(token(CLAIMS))

    assert issuer.fetched == [f"{ISSUER}/.well-known/openid-configuration", f"{ISSUER}/keys"]


def test_a_rotated_key_is_fetched_but_unknown_key_ids_refetch_at_most_once_a_cooldown() -> None:
    issuer, clock = Issuer(), Clock()
    verifier = _fetching(issuer, clock)
    verifier.claims(token(CLAIMS))
    new_key = _other_key()
    issuer.keys = {"keys": key_set()["keys"] + key_set("next", new_key)["keys"]}
    now = int(time.time())
    rotated = sign({**CLAIMS, "iss": ISSUER, "aud": AUDIENCE, "exp": now + 60}, "next", new_key)

    # Within the cooldown after the first fetch, an unknown kid does not reach the issuer
    with pytest.raises(Unauthenticated):
        verifier.claims(rotated)
    assert len(issuer.fetched) == 2
    # After it, one refetch finds the new key; a flood of unknown kids costs one fetch
    clock.now += UNKNOWN_KEY_COOLDOWN_SECONDS
    assert verifier.claims(rotated)["sub"] == "ada"
    for n in range(20):
        with pytest.raises(Unauthenticated):
            verifier.claims(sign({**CLAIMS, "iss": ISSUER, "aud": AUDIENCE}, f"junk{n}"))
    assert len(issuer.fetched) == 3


def test_a_down_issuer_is_a_503_not_a_401_and_held_keys_keep_serving() -> None:
    issuer, clock = Issuer(), Clock()
    issuer.down = True
    cold = _fetching(issuer, clock)
    with pytest.raises(IssuerUnavailable) as refused:
        cold.claims(token(CLAIMS))
    with pytest.raises(IssuerUnavailable):  # within the cooldown: not asked again, still 503
        cold.claims(token(CLAIMS))
    assert refused.value.status == 503
    assert len(issuer.fetched) == 1

    issuer.down = False
    warm = _fetching(issuer, clock)
    warm.claims(token(CLAIMS))
    issuer.down = True
    clock.now += 2 * 3600  # the keys are old: a refresh is tried, fails, the keys serve on
    assert warm.claims(token(CLAIMS))["sub"] == "ada"


@pytest.fixture
def idp() -> Iterator[str]:
    """An identity provider on loopback: discovery and the key set over real HTTP."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            base = f"http://127.0.0.1:{self.server.server_port}"  # type: ignore[attr-defined]
            documents = {
                "/.well-known/openid-configuration": {"issuer": base, "jwks_uri": f"{base}/jwks"},
                "/jwks": key_set(),
            }
            body = json.dumps(documents.get(self.path, {})).encode()
            self.send_response(200 if self.path in documents else 404)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_discovery_over_http_finds_the_keys_and_a_missing_document_is_unavailable(
    idp: str,
) -> None:
    verifier = JwtVerifier(idp, [AUDIENCE], KeySet(idp))
    elsewhere = JwtVerifier(f"{idp}/nowhere", [AUDIENCE], KeySet(f"{idp}/nowhere"))

    assert verifier.claims(token(CLAIMS, iss=idp))["sub"] == "ada"
    with pytest.raises(IssuerUnavailable):
        elsewhere.claims(token(CLAIMS, iss=f"{idp}/nowhere"))


def test_keys_are_fetched_over_https_only_but_on_loopback() -> None:
    with pytest.raises(IssuerUnavailable):
        fetch_json("http://idp.example.com/jwks")
    with pytest.raises(IssuerUnavailable):
        fetch_json("file:///etc/passwd")
