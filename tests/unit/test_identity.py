"""Who is calling (memkit.identity): read only from what API Gateway verified, per auth mode,
and the one rule for whom a caller may act."""

from __future__ import annotations

from typing import Any

import pytest

from memkit.app.access import confined_memories, confined_search
from memkit.errors import Forbidden, Unauthenticated
from memkit.identity import ADMIN, READ, SCOPES, WRITE, Caller, IdentitySettings, caller_of
from memkit.models.memory import CreateMemories, MemoryRecordIn, SearchRequest

JWT = IdentitySettings(auth_mode="jwt", tenant_claim="custom:tenant")
BARE = IdentitySettings(auth_mode="jwt")
COGNITO = IdentitySettings(auth_mode="jwt", tenant_claim="custom:tenant", scope_prefix="memkit/")
PREFIXED = IdentitySettings(auth_mode="jwt", scope_prefix="memkit/")
# Scopes a token's issuer may grant for other APIs, or that only look like memkit's: none is
# memkit's, whichever claim carries it (finding 9 of issue 26).
NOT_MEMKITS = [
    "otherapi/memory:admin",
    "https://evil.example.com/memory:admin",
    "[memory:admin]",
    "[memory:admin",
    "memory:admin]",
    "Memory:Admin",
    "MEMORY:ADMIN",
    "memory:admin/",
    "/memory:admin",
    "memkit/memory:admin/memory:admin",
]


def _event(authorizer: dict[str, Any] | None) -> dict[str, Any]:
    context: dict[str, Any] = {"http": {"method": "GET", "path": "/"}}
    if authorizer is not None:
        context["authorizer"] = authorizer
    # A forged tenant and user in the request itself, which must never count.
    return {
        "requestContext": context,
        "headers": {"x-tenant": "forged"},
        "queryStringParameters": {"user_id": "forged", "tenant": "forged"},
    }


def _claims(**claims: Any) -> dict[str, Any]:
    return {"jwt": {"claims": claims, "scopes": None}}


def test_a_jwt_caller_is_its_claims_with_the_configured_cognito_scope_prefix() -> None:
    event = _event(_claims(sub="u1", **{"custom:tenant": "acme"}, scope="memkit/memory:read"))

    caller = caller_of(event, COGNITO)

    assert caller == Caller("acme", "u1", frozenset({READ}))
    assert not caller.admin


def test_scopes_come_from_the_authorizers_list_and_the_scope_or_scp_claims() -> None:
    authorizer = {
        "jwt": {
            "claims": {"sub": "u1", "custom:tenant": "acme", "scp": ["memory:write", "other"]},
            "scopes": ["memory:admin"],
        }
    }
    assert caller_of(_event(authorizer), JWT).scopes == {WRITE, ADMIN}


@pytest.mark.parametrize("scope", [*NOT_MEMKITS, "memkit/memory:admin", "MEMKIT/memory:admin"])
def test_without_a_prefix_only_the_bare_scope_counts(scope: str) -> None:
    for authorizer in (
        _claims(sub="u1", scope=scope),
        _claims(sub="u1", scope=f"memory:read {scope}"),
        _claims(sub="u1", scp=[scope]),
        _claims(sub="u1", scp=f"[{scope}]"),  # a list claim as API Gateway passes it
        {"jwt": {"claims": {"sub": "u1"}, "scopes": [scope]}},
    ):
        caller = caller_of(_event(authorizer), BARE)
        assert not caller.admin, authorizer
        assert caller.scopes <= {READ}, authorizer


@pytest.mark.parametrize("scope", [*NOT_MEMKITS, "memory:admin", "Memkit/memory:admin"])
def test_with_a_prefix_only_the_prefixed_scope_counts(scope: str) -> None:
    for authorizer in (
        _claims(sub="u1", scope=scope),
        _claims(sub="u1", scp=[scope]),
        _claims(sub="u1", scp=f"[{scope}]"),
        {"jwt": {"claims": {"sub": "u1"}, "scopes": [scope]}},
    ):
        assert caller_of(_event(authorizer), PREFIXED).scopes == frozenset(), authorizer

    exact = _claims(sub="u1", scope=f"{scope} memkit/memory:admin")
    assert caller_of(_event(exact), PREFIXED).scopes == {ADMIN}


def test_a_bracketed_scope_string_is_not_a_scope_but_a_listed_scp_claim_is() -> None:
    bracketed = caller_of(_event(_claims(sub="u1", scope="[memory:admin memory:read]")), BARE)
    listed = caller_of(_event(_claims(sub="u1", scp="[memory:admin memory:read]")), BARE)

    assert bracketed.scopes == frozenset()
    assert listed.scopes == {ADMIN, READ}


def test_without_a_tenant_claim_configured_every_jwt_caller_is_in_the_default_tenant() -> None:
    settings = IdentitySettings(auth_mode="jwt", default_tenant="solo")
    caller = caller_of(_event(_claims(sub="u1", **{"custom:tenant": "acme"})), settings)
    assert (caller.tenant, caller.user_id, caller.scopes) == ("solo", "u1", frozenset())


@pytest.mark.parametrize(
    "authorizer",
    [
        None,  # the gateway verified nothing (misconfigured, or a direct invoke)
        {"jwt": {"claims": "not an object"}},
        _claims(sub="u1"),  # no tenant claim
        _claims(sub="u1", **{"custom:tenant": ""}),
        _claims(sub="u1", **{"custom:tenant": "a\x00b"}),
        _claims(sub="u1", **{"custom:tenant": "t" * 129}),
    ],
)
def test_a_jwt_caller_without_a_usable_tenant_is_401(authorizer: dict[str, Any] | None) -> None:
    with pytest.raises(Unauthenticated):
        caller_of(_event(authorizer), JWT)


@pytest.mark.parametrize("user", ["a\x00b", "u" * 257, "team/ada", "ada?", "50%", ".."])
def test_a_jwt_caller_whose_user_no_path_could_name_is_401(user: str) -> None:
    # memkit.ids: a user id the API would refuse in a request is no usable identity either
    with pytest.raises(Unauthenticated, match="not a usable user id"):
        caller_of(_event(_claims(sub=user, **{"custom:tenant": "acme"})), JWT)


def test_an_iam_caller_is_its_accounts_tenant_or_the_patterns_and_holds_every_scope() -> None:
    iam = {
        "iam": {
            "accountId": "111122223333",
            "userArn": "arn:aws:sts::111122223333:assumed-role/memkit-acme/agent",
        }
    }
    by_account = caller_of(_event(iam), IdentitySettings(auth_mode="iam"))
    pattern = r"arn:aws:sts::\d+:assumed-role/memkit-(?P<tenant>[^/]+)/.*"
    by_role = caller_of(_event(iam), IdentitySettings(auth_mode="iam", iam_tenant_pattern=pattern))
    other = {"iam": {"accountId": "1", "userArn": "arn:aws:iam::1:user/someone"}}

    assert by_account == Caller("111122223333", None, frozenset(SCOPES))
    assert by_role.tenant == "acme"
    with pytest.raises(Forbidden):
        caller_of(_event(other), IdentitySettings(auth_mode="iam", iam_tenant_pattern=pattern))
    with pytest.raises(Unauthenticated):
        caller_of(_event(None), IdentitySettings(auth_mode="iam"))


def test_a_key_caller_is_its_authorizers_context() -> None:
    context = {"lambda": {"tenant": "acme", "user_id": "", "scopes": "memory:read memory:admin"}}
    caller = caller_of(_event(context), IdentitySettings(auth_mode="apikey"))
    assert caller == Caller("acme", None, frozenset({READ, ADMIN}))
    with pytest.raises(Unauthenticated):
        caller_of(_event({"lambda": {"user_id": "u1"}}), IdentitySettings(auth_mode="apikey"))


def test_with_auth_off_every_caller_is_an_unauthenticated_admin_of_the_default_tenant() -> None:
    caller = caller_of(_event(_claims(sub="u1")), IdentitySettings(default_tenant="local"))
    assert caller == Caller("local", None, frozenset(SCOPES), authenticated=False)


def test_a_caller_acts_for_its_own_user_and_an_admin_for_any_of_its_tenant() -> None:
    user = Caller("acme", "u1", frozenset({READ, WRITE}))
    admin = Caller("acme", None, frozenset({ADMIN}))
    keyless = Caller("acme", None, frozenset({READ}))

    assert user.acting_for(None) == user.acting_for("u1") == "u1"
    with pytest.raises(Forbidden) as refused:
        user.acting_for("u2")
    assert refused.value.errors[0].field == "user_id"
    assert admin.acting_for("u2") == "u2"
    assert admin.acting_for(None) is None  # tenant-wide
    with pytest.raises(Forbidden):
        keyless.acting_for(None)
    assert user.may_see("u1")
    assert not user.may_see("u2")
    assert not user.may_see(None)
    assert admin.may_see("u2")
    assert admin.may_see(None)


def test_a_scope_is_required_and_admin_implies_the_others() -> None:
    reader = Caller("acme", "u1", frozenset({READ}))
    reader.require(READ)
    with pytest.raises(Forbidden):
        reader.require(WRITE)
    Caller("acme", None, frozenset({ADMIN})).require(WRITE)


@pytest.mark.parametrize(
    ("asked", "confined"),
    [
        (None, {"eq": "u1"}),
        ({}, {"eq": "u1"}),
        ("u1", "u1"),
        ({"eq": "u1"}, {"eq": "u1"}),
        ({"any": ["u1"]}, {"any": ["u1"]}),
    ],
)
def test_a_users_search_stays_within_its_user(asked: Any, confined: Any) -> None:
    user = Caller("acme", "u1", frozenset({READ}))
    assert confined_search(user, SearchRequest(text="tea", user_id=asked)).user_id == confined


@pytest.mark.parametrize(
    "asked",
    ["u2", {"eq": "u2"}, {"any": ["u1", "u2"]}, {"ne": "u1"}, {"startswith": "u"}, {"none": []}],
)
def test_a_users_search_that_admits_another_user_is_403(asked: Any) -> None:
    user = Caller("acme", "u1", frozenset({READ}))
    with pytest.raises(Forbidden):
        confined_search(user, SearchRequest(text="tea", user_id=asked))
    admin = Caller("acme", None, frozenset({ADMIN}))
    assert confined_search(admin, SearchRequest(text="tea", user_id=asked)).user_id == asked


def test_memories_a_user_creates_are_its_own() -> None:
    body = CreateMemories(memories=[MemoryRecordIn(id="m1", text="tea")])
    user = Caller("acme", "u1", frozenset({WRITE}))

    assert confined_memories(user, body).memories[0].user_id == "u1"
    named = CreateMemories(memories=[MemoryRecordIn(id="m1", text="tea", user_id="u2")])
    with pytest.raises(Forbidden) as refused:
        confined_memories(user, named)
    assert refused.value.errors[0].field == "memories.0.user_id"
