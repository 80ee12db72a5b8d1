"""API keys without a table: their format, their hash, what a header must look like, what
a create refuses, and what the authorizer answers without a lookup."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest

from memkit.errors import ValidationFailed
from memkit.handlers.authorizer import authorization_of, make_lambda_handler
from memkit.models.api_keys import ApiKey, NewApiKey
from memkit.service.api_keys import ApiKeyService, key_hash, new_key, presented_key
from memkit.store.apikeys import ApiKeyTable, lookup_key
from tests.conftest import LambdaContextStub
from tests.events import authorizer_event


class NoTable(ApiKeyTable):
    """A table that must not be reached: any use fails the test."""

    def __init__(self) -> None:
        super().__init__(client=None, table_name="unused")

    def __getattribute__(self, name: str) -> Any:
        if name in {"add", "find", "record_use", "get", "keys_of", "revoke"}:
            raise AssertionError(f"the table was reached ({name})")
        return super().__getattribute__(name)


def test_a_new_key_is_mk_its_id_and_a_256_bit_secret() -> None:
    plain, key_id = new_key()

    assert re.fullmatch(r"mk_[a-z0-9]{8}_[A-Za-z0-9_-]{43}", plain)
    assert plain.startswith(f"mk_{key_id}_")
    # token_urlsafe(32): 43 base64url characters carry 256 bits.
    assert len(plain.split("_", 2)[2]) == 43


def test_new_keys_and_their_ids_differ() -> None:
    keys = [new_key() for _ in range(200)]

    assert len({plain for plain, _ in keys}) == 200
    assert len({key_id for _, key_id in keys}) == 200


def test_a_key_is_stored_as_the_sha256_of_the_whole_key() -> None:
    plain, _ = new_key()

    digest = key_hash(plain)

    assert digest == hashlib.sha256(plain.encode()).hexdigest()
    assert lookup_key(digest) == (f"APIKEY#{digest}", "APIKEY")


def test_a_lookup_key_refuses_anything_but_a_hash() -> None:
    with pytest.raises(ValueError, match="64 lowercase hex"):
        lookup_key("mk_abcdefgh_" + "A" * 43)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_a_bearer_header_presents_the_key_whatever_the_scheme_case(scheme: str) -> None:
    plain, key_id = new_key()

    presented = presented_key(f"{scheme} {plain}")

    assert presented is not None
    assert presented.key_id == key_id
    assert presented.key_hash == key_hash(plain)


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer",
        "Bearer ",
        "Basic bWs6c2VjcmV0",
        "mk_abcdefgh_" + "A" * 43,  # no scheme
        "Bearer mk_abcdefgh_" + "A" * 42,  # a character short
        "Bearer mk_abcdefgh_" + "A" * 44,  # one too many
        "Bearer mk_ABCDEFGH_" + "A" * 43,  # the id is lowercase
        "Bearer sk_abcdefgh_" + "A" * 43,  # another prefix
        "Bearer mk_abcdefgh_" + "A" * 42 + "=",  # not base64url
        "Bearer mk_abcdefgh_" + "A" * 43 + " extra",
        "Bearer mk_abcdefgh_" + "A" * 43 + ",Bearer mk_abcdefgh_" + "B" * 43,  # two headers
        "Bearer " + "x" * 10_000,
    ],
)
def test_a_header_that_is_not_bearer_and_one_key_presents_none(header: str) -> None:
    assert presented_key(header) is None


def test_a_new_key_object_never_shows_the_key_when_printed() -> None:
    plain, key_id = new_key()
    key = ApiKey(key_id, "acme", ("memory:read",), "ada", "2026-01-01T00:00:00.000Z")

    new = NewApiKey(plain=plain, key=key)

    assert plain not in repr(new)
    assert plain not in str(new)
    assert key_id in repr(new)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"tenant": "", "scopes": ["memory:read"], "user_id": "ada"}, "tenant"),
        ({"tenant": "t" * 129, "scopes": ["memory:read"], "user_id": "ada"}, "tenant"),
        ({"tenant": "acme\n", "scopes": ["memory:read"], "user_id": "ada"}, "tenant"),
        ({"tenant": "acme", "scopes": [], "user_id": "ada"}, "scopes"),
        ({"tenant": "acme", "scopes": ["memory:delete"], "user_id": "ada"}, "scopes"),
        ({"tenant": "acme", "scopes": ["memory:read"], "user_id": None}, "user_id"),
        ({"tenant": "acme", "scopes": ["memory:read"], "user_id": "u" * 257}, "user_id"),
        ({"tenant": "acme", "scopes": ["memory:read"], "user_id": "ada/ops"}, "user_id"),
        ({"tenant": "acme", "scopes": ["memory:read"], "user_id": ".."}, "user_id"),
        ({"tenant": "acme", "scopes": ["memory:read"], "user_id": "ada", "name": "a\x00"}, "name"),
        (
            {"tenant": "acme", "scopes": ["memory:read"], "user_id": "ada", "expires_days": 0},
            "expires_days",
        ),
    ],
)
def test_a_create_names_the_field_it_refuses_before_writing(
    arguments: dict[str, Any], field: str
) -> None:
    service = ApiKeyService(NoTable())

    with pytest.raises(ValidationFailed) as refused:
        service.create(**arguments)

    assert [problem.field for problem in refused.value.errors] == [field]


def test_a_create_refuses_every_bad_field_at_once() -> None:
    with pytest.raises(ValidationFailed) as refused:
        ApiKeyService(NoTable()).create("", ["nope"], None, expires_days=-1)

    assert {p.field for p in refused.value.errors} == {"tenant", "scopes", "expires_days"}


def test_the_identity_is_the_identity_source_sent_else_the_header() -> None:
    assert authorization_of(authorizer_event("Bearer x")) == "Bearer x"
    event = authorizer_event("Bearer x")
    del event["identitySource"]
    event["headers"] = {"Authorization": "Bearer y"}
    assert authorization_of(event) == "Bearer y"
    assert authorization_of(authorizer_event(None)) is None
    assert authorization_of("not an event") is None
    assert authorization_of({"identitySource": [None]}) is None


def test_the_context_is_four_strings_and_a_key_of_no_user_has_an_empty_user() -> None:
    key = ApiKey("abcdefgh", "acme", ("memory:read", "memory:admin"), None, "2026-01-01")

    assert key.authorizer_context() == {
        "tenant": "acme",
        "user_id": "",
        "scopes": "memory:read memory:admin",
        "key_id": "abcdefgh",
    }


@pytest.mark.parametrize(
    "header", [None, "", "Basic abc", "Bearer mk_short", "Bearer mk_abcdefgh_" + "A" * 42]
)
def test_the_authorizer_denies_a_missing_or_malformed_key_without_a_lookup(
    header: str | None,
) -> None:
    handler = make_lambda_handler(lambda: ApiKeyService(NoTable()))

    assert handler(authorizer_event(header), LambdaContextStub()) == {"isAuthorized": False}
