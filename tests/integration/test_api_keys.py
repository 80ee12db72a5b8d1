"""API keys on moto: created, listed and revoked per tenant, and checked by the real
authorizer handler with HTTP API authorizer events (events/authorizer_request.json)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from memkit.config import ApiKeySettings
from memkit.errors import NotFound
from memkit.handlers import authorizer
from memkit.handlers.wiring import production_api_keys
from memkit.service.api_keys import ApiKeyService, key_hash, new_key
from memkit.store.apikeys import ApiKeyTable, api_key_table
from memkit_dev.local.event_filter import passes
from memkit_dev.local.template import load_template
from tests.conftest import LambdaContextStub
from tests.events import authorizer_event
from tests.integration.memory_world import StreamReader

pytestmark = pytest.mark.integration
# Also on DynamoDB Local (AWS's own engine) where Java runs: expression and transaction rules.
ENGINES = ("moto", "dynamodb-local")
ROOT = Path(__file__).resolve().parents[2]
START = 1_790_000_000.0
DAY = 86_400


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def service(dynamodb_table: str, clock: Clock) -> ApiKeyService:
    table = api_key_table(ApiKeySettings(table_name=dynamodb_table))
    return ApiKeyService(table, clock=clock, last_used_seconds=3600)


def authorize(service: ApiKeyService, header: str | None) -> dict[str, Any]:
    """One invocation of the authorizer handler over `service`, as API Gateway sends it."""
    handler = authorizer.make_lambda_handler(lambda: service)
    return handler(authorizer_event(header), LambdaContextStub())


def bearer(plain: str) -> str:
    return f"Bearer {plain}"


def scan(table: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    return [
        item
        for page in client.get_paginator("scan").paginate(TableName=table)
        for item in page["Items"]
    ]


# -- the authorizer --------------------------------------------------------------------------


def test_a_valid_key_is_allowed_with_its_tenant_user_scopes_and_id(
    service: ApiKeyService,
) -> None:
    new = service.create("acme", ["memory:write", "memory:read"], "ada", name="laptop")

    answer = authorize(service, bearer(new.plain))

    assert answer == {
        "isAuthorized": True,
        "context": {
            "tenant": "acme",
            "user_id": "ada",
            "scopes": "memory:read memory:write",
            "key_id": new.key.key_id,
        },
    }


def test_a_backend_key_of_no_user_is_allowed_with_an_empty_user(service: ApiKeyService) -> None:
    new = service.create("acme", ["memory:admin", "memory:read"])

    context = authorize(service, bearer(new.plain))["context"]

    assert context["user_id"] == ""
    assert context["scopes"] == "memory:read memory:admin"


def test_a_revoked_key_is_denied(service: ApiKeyService) -> None:
    new = service.create("acme", ["memory:read"], "ada")
    assert authorize(service, bearer(new.plain))["isAuthorized"] is True

    service.revoke("acme", new.key.key_id)

    assert authorize(service, bearer(new.plain)) == {"isAuthorized": False}


def test_a_key_is_allowed_until_it_expires_then_denied(
    service: ApiKeyService, clock: Clock
) -> None:
    new = service.create("acme", ["memory:read"], "ada", expires_days=1)

    clock.now = START + DAY - 1
    assert authorize(service, bearer(new.plain))["isAuthorized"] is True
    clock.now = START + DAY
    assert authorize(service, bearer(new.plain)) == {"isAuthorized": False}


def test_a_well_formed_key_that_was_never_created_is_denied(service: ApiKeyService) -> None:
    service.create("acme", ["memory:read"], "ada")
    stranger, _ = new_key()

    assert authorize(service, bearer(stranger)) == {"isAuthorized": False}


def test_a_key_with_one_character_changed_is_denied(service: ApiKeyService) -> None:
    plain = service.create("acme", ["memory:read"], "ada").plain
    changed = plain[:-1] + ("A" if plain[-1] != "A" else "B")

    assert authorize(service, bearer(changed)) == {"isAuthorized": False}


@pytest.mark.parametrize("header", [None, "", "Basic YWRhOnB3", "Bearer mk_nope"])
def test_a_missing_or_malformed_header_is_denied(
    service: ApiKeyService, header: str | None
) -> None:
    service.create("acme", ["memory:read"], "ada")

    assert authorize(service, header) == {"isAuthorized": False}


def test_the_production_handler_finds_keys_in_the_table_of_its_environment(
    dynamodb_table: str, service: ApiKeyService
) -> None:
    new = service.create("acme", ["memory:read"], "ada")
    production_api_keys.cache_clear()
    try:
        answer = authorizer.lambda_handler(authorizer_event(bearer(new.plain)), LambdaContextStub())
    finally:
        production_api_keys.cache_clear()

    assert answer["context"]["key_id"] == new.key.key_id


def test_an_unanswering_table_is_an_error_for_a_500_never_a_cached_denial(
    dynamodb_table: str, debug_log: io.StringIO
) -> None:
    plain, _ = new_key()
    missing = ApiKeyService(api_key_table(ApiKeySettings(table_name="no-such-table")))

    with pytest.raises(authorizer.KeyStoreUnavailable) as failed:
        authorize(missing, bearer(plain))

    # No SDK message (it may quote the item's key) rides along in the traceback.
    assert failed.value.__cause__ is None
    assert failed.value.__suppress_context__
    logged = debug_log.getvalue()
    assert "the key table did not answer" in logged
    assert plain not in logged
    assert key_hash(plain) not in logged


def test_logs_name_the_key_id_and_never_the_key_or_its_hash(
    service: ApiKeyService, debug_log: io.StringIO
) -> None:
    new = service.create("acme", ["memory:read"], "ada")
    stranger, stranger_id = new_key()

    authorize(service, bearer(new.plain))
    authorize(service, bearer(stranger))
    service.revoke("acme", new.key.key_id)
    authorize(service, bearer(new.plain))

    lines = [json.loads(line) for line in debug_log.getvalue().splitlines()]
    decisions = [(line["message"], line.get("reason"), line.get("key_id")) for line in lines]
    assert decisions == [
        ("api key allowed", None, new.key.key_id),
        ("api key denied", "unknown", stranger_id),
        ("api key denied", "unknown", new.key.key_id),
    ]
    for secret in (new.plain, key_hash(new.plain), stranger, key_hash(stranger)):
        assert secret not in debug_log.getvalue()


# -- what the table holds --------------------------------------------------------------------


def test_the_table_holds_the_keys_hash_and_never_the_key(
    dynamodb_table: str, service: ApiKeyService
) -> None:
    created = [service.create("acme", ["memory:read"], f"user-{n}") for n in range(3)]
    service.revoke("acme", created[0].key.key_id)

    stored = json.dumps(scan(dynamodb_table))

    for new in created:
        secret = new.plain.split("_", 2)[2]
        assert new.plain not in stored
        assert secret not in stored
    assert key_hash(created[1].plain) in stored


def test_key_items_reach_no_stream_reader(dynamodb_table: str, service: ApiKeyService) -> None:
    reader = StreamReader(dynamodb_table)
    new = service.create("acme", ["memory:read"], "ada", expires_days=3)
    authorize(service, bearer(new.plain))  # writes last_used
    service.revoke("acme", new.key.key_id)
    template = load_template(ROOT / "template.yaml")
    mappings = [
        event["Properties"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Serverless::Function"
        for event in resource["Properties"].get("Events", {}).values()
        if event["Type"] == "DynamoDB"
    ]
    records = reader.read()

    assert len(records) == 5  # 2 puts, 1 last_used update, 1 delete, 1 listing update
    assert len(mappings) >= 2
    for mapping in mappings:
        filters = [f["Pattern"] for f in mapping["FilterCriteria"]["Filters"]]
        assert not [r for r in records if passes(filters, r)]


# -- listing and revoking, per tenant --------------------------------------------------------


def test_a_tenant_lists_only_its_own_keys(service: ApiKeyService) -> None:
    mine = {service.create("acme", ["memory:read"], "ada").key.key_id for _ in range(2)}
    theirs = service.create("globex", ["memory:admin"]).key.key_id

    assert {key.key_id for key in service.keys_of("acme")} == mine
    assert [key.key_id for key in service.keys_of("globex")] == [theirs]
    assert service.keys_of("initech") == []


def test_another_tenant_cannot_revoke_a_key_which_keeps_working(service: ApiKeyService) -> None:
    new = service.create("acme", ["memory:read"], "ada")

    with pytest.raises(NotFound):
        service.revoke("globex", new.key.key_id)

    assert authorize(service, bearer(new.plain))["isAuthorized"] is True
    assert [key.status(START) for key in service.keys_of("acme")] == ["active"]


def test_a_listing_shows_each_keys_record_and_status(service: ApiKeyService, clock: Clock) -> None:
    active = service.create("acme", ["memory:read"], "ada", name="laptop")
    expiring = service.create("acme", ["memory:write"], "bob", expires_days=1)
    revoked = service.create("acme", ["memory:admin"], name="backend")
    authorize(service, bearer(revoked.plain))
    service.revoke("acme", revoked.key.key_id)
    clock.now = START + 2 * DAY

    listed = {key.key_id: key for key in service.keys_of("acme")}

    assert listed[active.key.key_id].name == "laptop"
    assert listed[active.key.key_id].user_id == "ada"
    assert listed[active.key.key_id].status(clock.now) == "active"
    assert listed[expiring.key.key_id].status(clock.now) == "expired"
    assert listed[expiring.key.key_id].expires_at == int(START) + DAY
    assert listed[revoked.key.key_id].status(clock.now) == "revoked"
    assert listed[revoked.key.key_id].scopes == ("memory:admin",)
    # The revoked key's last use is kept with its record.
    assert listed[revoked.key.key_id].last_used == "2026-09-21T14:13:20.000Z"


def test_a_revoked_or_expired_key_leaves_the_listing_after_its_retention(
    service: ApiKeyService, clock: Clock
) -> None:
    service.revoke("acme", service.create("acme", ["memory:read"], "ada").key.key_id)
    service.create("acme", ["memory:read"], "bob", expires_days=1)
    kept = service.create("acme", ["memory:read"], "eve").key.key_id

    clock.now = START + DAY + 30 * DAY + 1

    assert [key.key_id for key in service.keys_of("acme")] == [kept]


def test_revoking_twice_keeps_the_first_revocation(service: ApiKeyService, clock: Clock) -> None:
    new = service.create("acme", ["memory:read"], "ada")
    first = service.revoke("acme", new.key.key_id)

    clock.now += 60
    second = service.revoke("acme", new.key.key_id)

    assert first.revoked_at is not None
    assert second.revoked_at == first.revoked_at


class ConflictingOnce:
    """A DynamoDB client whose first revocation is cancelled by a transaction conflict (as
    when the authorizer writes the key's last use at that moment)."""

    def __init__(self) -> None:
        self._client = boto3.client("dynamodb", region_name="us-east-1")
        self.conflicts = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **request: Any) -> Any:
        if self.conflicts and "Delete" in request["TransactItems"][0]:
            self.conflicts -= 1
            reasons = [{"Code": "TransactionConflict"}, {"Code": "None"}]
            error = {"Code": "TransactionCanceledException", "Message": "conflict"}
            raise ClientError(
                {"Error": error, "CancellationReasons": reasons}, "TransactWriteItems"
            )
        return self._client.transact_write_items(**request)


def test_a_revocation_that_loses_a_race_tries_again_and_revokes(
    dynamodb_table: str, service: ApiKeyService, clock: Clock
) -> None:
    new = service.create("acme", ["memory:read"], "ada")
    racing = ConflictingOnce()
    revoking = ApiKeyService(ApiKeyTable(racing, dynamodb_table), clock=clock)

    revoked = revoking.revoke("acme", new.key.key_id)

    assert racing.conflicts == 0
    assert revoked.status(clock.now) == "revoked"
    assert authorize(service, bearer(new.plain)) == {"isAuthorized": False}


# -- last use --------------------------------------------------------------------------------


def test_last_used_is_written_at_most_once_an_interval(
    service: ApiKeyService, clock: Clock
) -> None:
    new = service.create("acme", ["memory:read"], "ada")

    def last_used() -> str | None:
        [key] = service.keys_of("acme")
        return key.last_used

    assert last_used() is None
    authorize(service, bearer(new.plain))
    first = last_used()
    clock.now += 3599
    authorize(service, bearer(new.plain))
    assert last_used() == first
    clock.now += 2
    authorize(service, bearer(new.plain))

    assert first == "2026-09-21T14:13:20.000Z"
    assert last_used() == "2026-09-21T15:13:21.000Z"


def test_a_use_recorded_after_a_revocation_brings_no_key_back(
    dynamodb_table: str, service: ApiKeyService
) -> None:
    new = service.create("acme", ["memory:read"], "ada")
    check = service.check(bearer(new.plain))
    service.revoke("acme", new.key.key_id)

    assert service.record_use(check) is False

    lookups = [item for item in scan(dynamodb_table) if item["PK"]["S"].startswith("APIKEY#")]
    assert lookups == []
    assert authorize(service, bearer(new.plain)) == {"isAuthorized": False}
