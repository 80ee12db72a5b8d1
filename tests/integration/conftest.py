"""The real API handler over DynamoDB (moto), called with API Gateway v2 events."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import ROOT, ApiResponse, call_api
from tests.integration.memory_world import MemoryWorld, build_world

if TYPE_CHECKING:
    from memkit_dev.local.auth import IamPrincipal
    from memkit_dev.local.stack import LocalStack, LocalStackConfig

Call = Callable[..., ApiResponse]


@pytest.fixture
def api(dynamodb_table: str) -> Call:
    """call(method, path, query=..., body=..., headers=...) through the real lambda_handler."""
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.wiring import api_services
    from memkit.store.dynamodb import DynamoStore

    settings = ApiSettings(table_name=dynamodb_table, region="us-east-1")
    services = api_services(DynamoStore(settings), settings)
    handler = make_lambda_handler(lambda: services)

    def call(method: str, path: str, **kwargs: Any) -> ApiResponse:
        return call_api(handler, method, path, **kwargs)

    return call


@pytest.fixture
def world(dynamodb_table: str) -> MemoryWorld:
    """The API and the indexer on moto, sharing one local index (tests/integration/memory_world)."""
    return build_world(dynamodb_table)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """The local stack over HTTP, one a test module (the AMS client's conformance tests):
    module-scoped, not session-scoped, because its moto server shares moto's backends with
    the in-process mock that other modules' `dynamodb_table` starts and resets. Its tests
    keep to namespaces of their own, so they share the stack's table."""
    from memkit_dev.local.stack import LocalStack, LocalStackConfig

    config = LocalStackConfig(port=0, concurrency=1, template=ROOT / "template.yaml")
    with LocalStack(config) as running:
        yield running


def until(check: Any, what: str, seconds: float = 60.0) -> Any:
    """Poll `check` until it returns something truthy, and return that; fail saying `what`
    was awaited after `seconds` (generous: a wait for an event, never a race)."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            assert found, what
            return found
        time.sleep(0.2)


def small_stack(**options: Any) -> LocalStackConfig:
    """A local stack's configuration for a test: any port, one API environment, no cleanup
    timer, `options` (LocalStackConfig fields) over that."""
    from memkit_dev.local.stack import LocalStackConfig

    defaults: dict[str, Any] = {
        "port": 0,
        "concurrency": 1,
        "template": ROOT / "template.yaml",
        "cleanup_interval_seconds": 0,
    }
    return LocalStackConfig(**{**defaults, **options})


@pytest.fixture(scope="module")
def dev_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where a jwt stack's development key pair is (as `make serve` keeps it in .memkit/):
    `memkit_dev.local.auth.mint(dev_keys, ...)` signs tokens it trusts."""
    return tmp_path_factory.mktemp("keys")


@pytest.fixture(scope="module")
def jwt_stack(request: pytest.FixtureRequest, dev_keys: Path) -> Iterator[LocalStack]:
    """The local stack as `make serve` runs it, bearer tokens checked (auth jwt), one a test
    module; a module's JWT_STACK_OPTIONS (LocalStackConfig fields) adjust it."""
    from memkit_dev.local.auth import JwtSettings
    from memkit_dev.local.stack import LocalStack

    options = getattr(request.module, "JWT_STACK_OPTIONS", {})
    config = small_stack(auth="jwt", jwt=JwtSettings(data_dir=dev_keys), **options)
    with LocalStack(config) as running:
        yield running


@pytest.fixture(scope="module")
def iam_principals() -> tuple[IamPrincipal, IamPrincipal]:
    """Two AWS principals of two accounts (so two tenants) an iam stack knows."""
    from memkit_dev.local.auth import IamPrincipal

    return (
        IamPrincipal.user("111111111111", "agent-backend"),
        IamPrincipal.user("222222222222", "agent-backend"),
    )


@pytest.fixture(scope="module")
def iam_stack(
    request: pytest.FixtureRequest, iam_principals: tuple[IamPrincipal, ...]
) -> Iterator[LocalStack]:
    """The local stack with `--auth iam`: SigV4 for execute-api checked by its gateway against
    `iam_principals`' keys, one a test module; a module's IAM_STACK_OPTIONS adjust it."""
    from memkit_dev.local.stack import LocalStack

    options = getattr(request.module, "IAM_STACK_OPTIONS", {})
    config = small_stack(auth="iam", iam_principals=iam_principals, **options)
    with LocalStack(config) as running:
        yield running


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio only (anyio's own fixture would also run every test on trio, if installed)."""
    return "asyncio"
