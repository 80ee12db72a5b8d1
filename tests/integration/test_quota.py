"""Per-tenant request quotas (MEMKIT_TENANT_REQUESTS_PER_MINUTE): a counter item per tenant
and minute; beyond the limit a 429 with Retry-After until the next minute, never a 5xx."""

from __future__ import annotations

import pytest

from memkit.config import ApiSettings
from memkit.identity import READ, WRITE
from memkit.store.dynamodb import DynamoStore
from tests.conftest import ApiResponse, call_api
from tests.events import jwt_authorizer
from tests.integration.memory_world import build_world

pytestmark = pytest.mark.integration
# The DynamoDB Local tier (tests/conftest.py): the conditional counter on AWS's own engine too.
ENGINES = ("moto", "dynamodb-local")

START = 1_800_000_010.0  # 10 s into a minute


def test_a_tenants_requests_past_its_quota_wait_for_the_next_minute(dynamodb_table: str) -> None:
    now = [START]
    settings = ApiSettings(
        table_name=dynamodb_table,
        region="us-east-1",
        auth_mode="jwt",
        tenant_claim="custom:tenant",
        tenant_requests_per_minute=3,
    )
    store = DynamoStore(settings, clock=lambda: now[0], index_messages=True)
    world = build_world(dynamodb_table, settings, store=store)
    a, b = jwt_authorizer("A", "a1", READ, WRITE), jwt_authorizer("B", "b1", READ, WRITE)

    def send(who: dict[str, object], path: str = "/v1/working-memory/") -> ApiResponse:
        return call_api(world.api_handler, "GET", path, authorizer=who)

    # When tenant A sends four requests within one minute
    statuses = [send(a).status for _ in range(4)]
    refused = send(a)

    # Then the fourth and later are 429 with Retry-After until the minute ends
    assert statuses == [200, 200, 200, 429]
    assert refused.body["code"] == "quota_exceeded"
    assert refused.headers["Retry-After"] == "50"
    # And another tenant, and a public route, are not counted against it
    assert send(b).status == 200
    assert send(a, "/v1/health").status == 200
    # And the next minute starts afresh
    now[0] += 50
    assert send(a).status == 200
