"""API keys: their format, and creating, listing, revoking and checking them.

A key reads `mk_<key id>_<secret>`: the key id is 8 random characters of [a-z0-9], public
(listings and logs show it, and it tells which key a leaked string is); the secret is
`secrets.token_urlsafe(32)`, 256 random bits. The table keeps the SHA-256 of the whole key
and never the key: a plain hash is right for a secret of that entropy (no guessing attack
gets near it, so a salt or a slow KDF would add nothing), and an unsalted hash is what lets
the authorizer find a key with one GetItem instead of trying candidates. A request that
presents a key is checked by that lookup alone, so no code compares secrets.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from memkit.errors import FieldProblem, NotFound, ValidationFailed, VersionConflict
from memkit.ids import MAX_ID_LENGTH, STORED_ID_PATTERN, id_problem
from memkit.models.api_keys import ADMIN, SCOPES, ApiKey, NewApiKey
from memkit.store.apikeys import ApiKeyTable
from memkit.times import now_iso

PREFIX = "mk_"
KEY_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
KEY_ID_LENGTH = 8
SECRET_BYTES = 32  # token_urlsafe: 43 characters
KEY_PATTERN = re.compile(r"mk_([a-z0-9]{8})_[A-Za-z0-9_-]{43}")
# The scheme is case-insensitive (RFC 9110); anything longer than a key and its scheme is
# not one (and is refused before a regular expression reads it).
BEARER = re.compile(r"bearer +(\S+)", re.IGNORECASE)
MAX_HEADER = 128
MAX_EXPIRES_DAYS = 3650
# A key id is drawn again when it is taken in the tenant (odds ~1e-12 a key among 1,000).
CREATE_ATTEMPTS = 3

Reason = Literal["allowed", "missing", "malformed", "unknown", "expired", "revoked", "unreadable"]


def new_key() -> tuple[str, str]:
    """A new key and its key id."""
    key_id = "".join(secrets.choice(KEY_ID_ALPHABET) for _ in range(KEY_ID_LENGTH))
    return f"{PREFIX}{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}", key_id


def key_hash(plain: str) -> str:
    """The SHA-256 of a key, lowercase hex: what the table stores and looks a key up by."""
    return hashlib.sha256(plain.encode()).hexdigest()


@dataclass(frozen=True)
class Presented:
    """A well-formed key a request presents: its public id and its hash (the key itself is
    not kept)."""

    key_id: str
    key_hash: str


def presented_key(authorization: str | None) -> Presented | None:
    """The key in an `Authorization: Bearer mk_...` header value, or None when it holds
    none of memkit's form."""
    if authorization is None or len(authorization) > MAX_HEADER:
        return None
    bearer = BEARER.fullmatch(authorization.strip())
    found = KEY_PATTERN.fullmatch(bearer.group(1)) if bearer else None
    if bearer is None or found is None:
        return None
    return Presented(key_id=found.group(1), key_hash=key_hash(bearer.group(1)))


@dataclass(frozen=True)
class Check:
    """What checking a presented key found: the key when it is allowed (`reason`
    "allowed"), else why not. `key_id` is the presented key's public id, when it had one."""

    reason: Reason
    key: ApiKey | None = None
    key_id: str | None = None
    presented: Presented | None = None

    @property
    def allowed(self) -> bool:
        return self.key is not None


class ApiKeyService:
    """API keys of every tenant, in memkit's table."""

    def __init__(
        self,
        table: ApiKeyTable,
        clock: Callable[[], float] = time.time,
        last_used_seconds: int = 3600,
    ) -> None:
        self._table = table
        self._clock = clock
        self._last_used_seconds = last_used_seconds

    # -- the authorizer ----------------------------------------------------------------------

    def check(self, authorization: str | None) -> Check:
        """Whether the header value presents a live key: malformed, unknown (never created
        or revoked), expired, or allowed. Raises StoreUnavailable or Throttled when the table
        does not answer (no decision can be made)."""
        if authorization is None or not authorization.strip():
            return Check("missing")
        presented = presented_key(authorization)
        if presented is None:
            return Check("malformed")
        try:
            key = self._table.find(presented.key_hash)
        except (KeyError, ValueError, TypeError):  # an item no key of ours wrote: refuse
            return Check("unreadable", key_id=presented.key_id)
        if key is None:
            return Check("unknown", key_id=presented.key_id)
        status = key.status(self._clock())
        if status != "active":  # revoked: only if a revocation ever left the item behind
            return Check(status, key_id=presented.key_id)
        return Check("allowed", key=key, key_id=key.key_id, presented=presented)

    def record_use(self, check: Check) -> bool:
        """Write the allowed key's `last_used` if the stored one is older than the interval
        (at most one write an interval per key); whether it was written."""
        if check.key is None or check.presented is None or self._last_used_seconds <= 0:
            return False
        now = self._clock()
        stale_before = now_iso(now - self._last_used_seconds)
        if check.key.last_used is not None and check.key.last_used >= stale_before:
            return False
        return self._table.record_use(check.presented.key_hash, now_iso(now), stale_before)

    # -- management (`memkit keys`) ---------------------------------------------------------

    def create(
        self,
        tenant: str,
        scopes: Iterable[str],
        user_id: str | None = None,
        name: str | None = None,
        expires_days: int | None = None,
    ) -> NewApiKey:
        """A new key of `tenant` with `scopes`, acting as `user_id` (None: a backend key,
        which needs memory:admin), expiring after `expires_days` (None: never). The plain
        key is in the result and nowhere else. ValidationFailed names each bad field."""
        granted = _valid(tenant, scopes, user_id, name, expires_days)
        now = self._clock()
        attempts = 0
        while True:
            plain, key_id = new_key()
            key = ApiKey(
                key_id=key_id,
                tenant=tenant,
                scopes=granted,
                user_id=user_id,
                created_at=now_iso(now),
                name=name or "",
                expires_at=None if expires_days is None else int(now) + expires_days * 86_400,
            )
            try:
                self._table.add(key, key_hash(plain))
                return NewApiKey(plain=plain, key=key)
            except VersionConflict:
                attempts += 1
                if attempts >= CREATE_ATTEMPTS:
                    raise

    def keys_of(self, tenant: str) -> list[ApiKey]:
        """The tenant's keys (revoked and expired ones for a while after), by key id."""
        return sorted(self._table.keys_of(tenant, self._clock()), key=lambda k: k.key_id)

    def revoke(self, tenant: str, key_id: str) -> ApiKey:
        """Revoke the tenant's key (from this moment it matches nothing; a gateway that
        cached its answer keeps it until the cache's TTL ends). Revoking a revoked key
        returns it unchanged. NotFound when the tenant has no key with this id."""
        now = self._clock()
        key = self._table.revoke(tenant, key_id, now_iso(now), now)
        if key is None:
            raise NotFound(f"tenant {tenant!r} has no api key {key_id!r}")
        return key


def _valid(
    tenant: str,
    scopes: Iterable[str],
    user_id: str | None,
    name: str | None,
    expires_days: int | None,
) -> tuple[str, ...]:
    """The scopes in canonical order, or ValidationFailed naming every bad field."""
    problems: list[FieldProblem] = []
    if not 1 <= len(tenant) <= 128 or re.fullmatch(STORED_ID_PATTERN, tenant) is None:
        problems.append(FieldProblem("tenant", "1 to 128 characters, no control ones"))
    if user_id is not None:  # the key's user: the API's rule for ids
        problem = id_problem(user_id)
        if not 1 <= len(user_id) <= MAX_ID_LENGTH:
            problems.append(FieldProblem("user_id", f"1 to {MAX_ID_LENGTH} characters"))
        elif problem is not None:
            problems.append(FieldProblem("user_id", problem))
    if name and (len(name) > 128 or re.fullmatch(STORED_ID_PATTERN, name) is None):
        problems.append(FieldProblem("name", "at most 128 characters, no control ones"))
    wanted = set(scopes)
    unknown = sorted(wanted - set(SCOPES))
    if unknown or not wanted:
        problems.append(FieldProblem("scopes", f"one or more of {', '.join(SCOPES)}"))
    elif user_id is None and ADMIN not in wanted:
        problems.append(FieldProblem("user_id", f"a key without {ADMIN} acts as one user: name it"))
    if expires_days is not None and not 1 <= expires_days <= MAX_EXPIRES_DAYS:
        problems.append(FieldProblem("expires_days", f"1 to {MAX_EXPIRES_DAYS}"))
    if problems:
        raise ValidationFailed("invalid api key", problems)
    return tuple(scope for scope in SCOPES if scope in wanted)
