"""Who is calling: the caller's tenant, user and scopes, read only from the request context
API Gateway verified (never from a parameter), and the one rule for whom a request may act.

Auth modes (MEMKIT_AUTH_MODE, set by the template's AuthMode):

- `jwt`: the HTTP API's JWT authorizer checked the token's signature, issuer, audience and
  expiry; its claims arrive in `requestContext.authorizer.jwt.claims`. The tenant is the claim
  MEMKIT_TENANT_CLAIM names (e.g. `custom:tenant`; unset: every caller is in the default
  tenant), the user the claim MEMKIT_USER_CLAIM names (`sub`), the scopes the token's `scope`
  (or `scp`) claim: space-separated, each compared whole and case-sensitively with
  `<MEMKIT_SCOPE_PREFIX><scope>` (the template's JwtScopePrefix: Cognito's `memkit/`, so
  `memkit/memory:admin`; empty: `memory:admin`). Nothing else counts: not another resource
  server's `otherapi/memory:admin`, not a URL ending in one, not the bare scope when a prefix
  is configured, not `[memory:admin]` in `scope` (one of an issuer's other APIs may hold such
  a name, and API Gateway's route scopes are compared whole too).
- `iam`: SigV4, checked by API Gateway (`AWS_IAM`); `requestContext.authorizer.iam` names the
  principal. The tenant is the account id, or the `tenant` group of MEMKIT_IAM_TENANT_PATTERN
  matched against the principal's ARN. IAM policies decide which routes a principal may call
  (execute-api:Invoke on route ARNs), so an IAM caller holds every scope and acts as a
  backend for the users of its tenant.
- `apikey`: memkit's Lambda authorizer looked the key up (memkit.handlers.authorizer); its
  context (`requestContext.authorizer.lambda`) carries the key's tenant, user and scopes.
- `none`: no identity at all: the local stack and private networks only (the template
  refuses it unless AllowUnauthenticated is also set). Every request is the default tenant's,
  an admin that may name any user, as before identity existed.

The rule (`Caller.acting_for`): a caller acts for its own user. Naming another user is a 403
unless the caller holds `memory:admin` (a backend acting for many end users), which may name
any user of its own tenant; an admin that names no user acts tenant-wide. The tenant is never
read from the request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from memkit.errors import FieldProblem, Forbidden, OutOfScope, Unauthenticated
from memkit.ids import MAX_ID_LENGTH, id_problem

AuthMode = Literal["none", "jwt", "iam", "apikey"]
READ = "memory:read"
WRITE = "memory:write"
ADMIN = "memory:admin"
SCOPES = (READ, WRITE, ADMIN)
MAX_TENANT = 128
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Caller:
    """A verified caller: its tenant, the user it is (None: a backend or service), the
    scopes it holds, and whether a credential was checked at all (auth mode `none`: not).

    `principal` names the credential itself, as a record's history shows who changed it:
    `token:<sub>`, `key:<key id>` or `iam:<ARN>` (None: auth mode `none`). `door` is the
    front door the request came through (rest, mcp, or a wing's name): set by the edge."""

    tenant: str
    user_id: str | None
    scopes: frozenset[str]
    authenticated: bool = True
    # Not part of who the caller is (equality): what its changes are signed with.
    principal: str | None = field(default=None, compare=False)
    door: str = field(default="rest", compare=False)

    @property
    def admin(self) -> bool:
        return ADMIN in self.scopes

    def require(self, scope: str) -> None:
        """403 unless the caller holds `scope` (admin implies read and write)."""
        if scope in self.scopes or self.admin:
            return
        raise OutOfScope(
            f"this credential lacks the {scope} scope",
            [FieldProblem("authorization", f"needs scope {scope}")],
        )

    def acting_for(self, named: str | None, field: str = "user_id") -> str | None:
        """The user a request acts for when it names `named` (None: names none).

        A caller's own user, or, for an admin, any user it names (its tenant's: the tenant
        is the caller's whatever the request says) or none (tenant-wide)."""
        if named is not None:
            if self.admin or named == self.user_id:
                return named
            raise OutOfScope(
                "this credential may act only for its own user",
                [FieldProblem(field, "names another user (memory:admin may)")],
            )
        if self.admin:
            return None
        if self.user_id is None:
            raise OutOfScope(
                "this credential names no user and is not an admin",
                [FieldProblem("authorization", "a key or token without a user needs memory:admin")],
            )
        return self.user_id

    def may_see(self, owner_user: str | None) -> bool:
        """Whether a stored item of `owner_user` (None: no user) is this caller's to read or
        change: an admin's whole tenant, else the caller's own user's items only."""
        return self.admin or (self.user_id is not None and owner_user == self.user_id)


@dataclass(frozen=True)
class IdentitySettings:
    """How identity is read (the API settings' auth fields)."""

    auth_mode: AuthMode = "none"
    default_tenant: str = "default"
    tenant_claim: str | None = None
    user_claim: str = "sub"
    iam_tenant_pattern: str | None = None
    # jwt: what the identity provider puts before memkit's scopes (JwtScopePrefix): a token's
    # scope counts only when it is exactly this and a scope's name.
    scope_prefix: str = ""


def _scopes(items: Any, prefix: str = "") -> frozenset[str]:
    """memkit's scopes among `items` (a space-separated string or a list of strings): each
    item that is exactly `prefix` and a scope's name, compared whole and case-sensitively
    (scopes are case-sensitive, RFC 6749 3.3)."""
    named = {f"{prefix}{scope}": scope for scope in SCOPES}
    listed = items.split() if isinstance(items, str) else items
    if not isinstance(listed, list):
        return frozenset()
    return frozenset(named[item] for item in listed if isinstance(item, str) and item in named)


def _listed(claim: Any) -> Any:
    """The items of an `scp` claim: Okta and others send a list, which API Gateway (and so
    memkit's own verifiers) passes as "[a b]"; a string of scopes is space-separated."""
    if isinstance(claim, str) and claim.startswith("[") and claim.endswith("]"):
        return claim[1:-1]
    return claim


def _tenant(value: Any, source: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TENANT:
        raise Unauthenticated(f"the credential's {source} is not a usable tenant")
    if _CONTROL.search(value):
        raise Unauthenticated(f"the credential's {source} is not a usable tenant")
    return value


def _user(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    # The API's rule for ids (memkit.ids): a user must be addressable in a path, as itself.
    if len(value) > MAX_ID_LENGTH or id_problem(value) is not None:
        raise Unauthenticated("the credential's user is not a usable user id")
    return value


def _authorizer(event: dict[str, Any]) -> dict[str, Any]:
    context = event.get("requestContext")
    authorizer = context.get("authorizer") if isinstance(context, dict) else None
    return authorizer if isinstance(authorizer, dict) else {}


def _from_jwt(authorizer: dict[str, Any], settings: IdentitySettings) -> Caller:
    jwt = authorizer.get("jwt")
    claims = jwt.get("claims") if isinstance(jwt, dict) else None
    if not isinstance(claims, dict):
        raise Unauthenticated("no verified token reached the function")
    if settings.tenant_claim:
        tenant = _tenant(claims.get(settings.tenant_claim), f"claim {settings.tenant_claim}")
    else:
        tenant = settings.default_tenant
    listed = jwt.get("scopes") if isinstance(jwt, dict) else None
    prefix = settings.scope_prefix
    # `scope` is a space-separated string (RFC 9068); `scp` may be a list.
    scopes = (
        _scopes(listed if isinstance(listed, list) else None, prefix)
        | _scopes(claims.get("scope"), prefix)
        | _scopes(_listed(claims.get("scp")), prefix)
    )
    subject = claims.get("sub")
    principal = f"token:{subject}" if isinstance(subject, str) and subject else None
    return Caller(tenant, _user(claims.get(settings.user_claim)), scopes, principal=principal)


def _from_iam(authorizer: dict[str, Any], settings: IdentitySettings) -> Caller:
    iam = authorizer.get("iam")
    if not isinstance(iam, dict) or not iam.get("accountId"):
        raise Unauthenticated("no verified AWS principal reached the function")
    if settings.iam_tenant_pattern:
        match = re.fullmatch(settings.iam_tenant_pattern, str(iam.get("userArn") or ""))
        if match is None or not match.groupdict().get("tenant"):
            raise Forbidden("this AWS principal maps to no tenant")
        tenant = _tenant(match.group("tenant"), "principal")
    else:
        tenant = _tenant(str(iam["accountId"]), "account")
    arn = iam.get("userArn")
    principal = f"iam:{arn}" if isinstance(arn, str) and arn else None
    return Caller(tenant, None, frozenset(SCOPES), principal=principal)


def _from_key(authorizer: dict[str, Any]) -> Caller:
    context = authorizer.get("lambda")
    if not isinstance(context, dict) or not context.get("tenant"):
        raise Unauthenticated("no verified key reached the function")
    key_id = context.get("key_id")
    return Caller(
        _tenant(context["tenant"], "key"),
        _user(context.get("user_id")),
        _scopes(context.get("scopes")),
        principal=f"key:{key_id}" if isinstance(key_id, str) and key_id else None,
    )


def caller_of(event: dict[str, Any], settings: IdentitySettings) -> Caller:
    """The caller of an API Gateway HTTP API (payload 2.0) event, from what the gateway
    verified; 401 when the mode expects a verified identity and none is there."""
    if settings.auth_mode == "none":
        return Caller(settings.default_tenant, None, frozenset(SCOPES), authenticated=False)
    authorizer = _authorizer(event)
    if settings.auth_mode == "jwt":
        return _from_jwt(authorizer, settings)
    if settings.auth_mode == "iam":
        return _from_iam(authorizer, settings)
    return _from_key(authorizer)
