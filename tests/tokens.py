"""Bearer tokens an identity provider would issue, for the functions that verify them
themselves (POST /mcp with AuthMode jwt: memkit.mcp_server.bearer): an RS256 key pair made
once per test process, its public key set, and tokens carrying the claims of the
`requestContext.authorizer` a test names (tests.events.jwt_authorizer)."""

from __future__ import annotations

import json
import time
from functools import lru_cache
from typing import Any

ISSUER = "https://idp.example.com"
AUDIENCE = "memkit-tests"
KEY_ID = "tests-rs256"


@lru_cache(maxsize=1)
def private_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def key_set(kid: str = KEY_ID, key: Any = None) -> dict[str, Any]:
    """The JSON Web Key Set publishing `key`'s public half (the tests' key by default)."""
    import jwt

    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk((key or private_key()).public_key()))
    public.update({"kid": kid, "use": "sig", "alg": "RS256"})
    return {"keys": [public]}


def sign(
    claims: dict[str, Any], kid: str = KEY_ID, key: Any = None, algorithm: str = "RS256"
) -> str:
    import jwt

    return jwt.encode(claims, key or private_key(), algorithm=algorithm, headers={"kid": kid})


def token(claims: dict[str, Any], seconds: int = 600, **overrides: Any) -> str:
    """A token of ISSUER for AUDIENCE with `claims`, valid for `seconds` (`overrides` replace
    or, as None, remove standard claims)."""
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "nbf": now, "exp": now + seconds}
    body.update(claims)
    for name, value in overrides.items():
        if value is None:
            body.pop(name, None)
        else:
            body[name] = value
    return sign(body)


def bearer_for(authorizer: dict[str, Any]) -> str:
    """`Authorization` for the caller a JWT authorizer context describes (its claims)."""
    return f"Bearer {token(dict(authorizer['jwt']['claims']))}"


def verifying_settings(**fields: Any) -> Any:
    """The MCP function's settings trusting ISSUER's tokens for AUDIENCE (its key set given
    as JSON, as the local stack gives its development keys)."""
    from memkit.config import McpSettings

    trust = {"oauth_issuer": ISSUER, "jwt_audience": AUDIENCE, "jwt_jwks": json.dumps(key_set())}
    return McpSettings(**{**trust, **fields})
