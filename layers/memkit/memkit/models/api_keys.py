"""API keys: what a key grants (its record), never the key itself.

A key belongs to one tenant, carries a subset of memkit's scopes and acts as one user, or as
none (a backend key with `memory:admin`, which names the user per request). The plain key is
shown once, when it is created (memkit.service.api_keys); the table keeps only its SHA-256.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# memkit's scopes (memkit.identity), in the order listings and the authorizer's context give them.
from memkit.identity import ADMIN, READ, SCOPES, WRITE

__all__ = ["ADMIN", "READ", "SCOPES", "WRITE"]

KeyStatus = Literal["active", "expired", "revoked"]


@dataclass(frozen=True)
class ApiKey:
    """A key's record. `key_id` is public (it is the key's visible prefix); `expires_at` is
    epoch seconds; `created_at`, `last_used` and `revoked_at` are ISO 8601 (UTC)."""

    key_id: str
    tenant: str
    scopes: tuple[str, ...]
    user_id: str | None
    created_at: str
    name: str = ""
    expires_at: int | None = None
    last_used: str | None = None
    revoked_at: str | None = None

    def status(self, now: float) -> KeyStatus:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def authorizer_context(self) -> dict[str, str]:
        """What the API reads from `requestContext.authorizer.lambda` for this key (strings
        only): the API-key authorizer's answer, and the MCP function's own."""
        return {
            "tenant": self.tenant,
            "user_id": self.user_id or "",
            "scopes": " ".join(self.scopes),
            "key_id": self.key_id,
        }


@dataclass(frozen=True)
class UserKeysRevoked:
    """What revoking a user's keys did: the keys this call revoked, the keys it could not
    (each kept changing under it: still live, for the next pass), and the newest revocation
    (ISO 8601) of the user's keys, this call's included, or None when none is revoked. API
    Gateway may accept a revoked key's cached answer until its cache lifetime after that."""

    revoked: int = 0
    failed: int = 0
    last_revoked_at: str | None = None


@dataclass(frozen=True)
class NewApiKey:
    """A key just created: the plain key (shown once, stored nowhere) and its record."""

    plain: str
    key: ApiKey

    def __repr__(self) -> str:  # a stray print or log of the object never shows the key
        return f"NewApiKey(key={self.key!r})"
