"""Shared fixtures: fake AWS credentials, moto with the table from template.yaml, the handler."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABLE = "memkit-test"


# The test files that keep a worker busy for a minute or more (`make test` prints the slowest
# tests: --durations), longest first. They start first: with `--dist loadfile` the workers
# take files in collection order, and one of these started last kept one worker running it
# alone for minutes while the other sat idle.
HEAVY_FIRST = (
    "test_local_restart_vectors.py",
    "test_local_restart.py",
    "test_delete_user.py",
    "test_sdk_wheel.py",
    "test_doc_examples.py",
    "test_local_stack_volume.py",
    "test_transfer.py",
    "test_sdk.py",
    "test_local_stack_dynamodb_vectors.py",
    "test_dynamodb_local.py",
)


def pytest_configure(config: pytest.Config) -> None:
    _share_botocore_models()
    _share_httpx_default_ssl_context()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The heavy files first (HEAVY_FIRST's order), the rest in their order."""
    rank = {name: place for place, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def _share_botocore_models() -> None:
    """Every botocore session in this process reads botocore's JSON models once.

    A botocore Session caches what its loader reads (service models, endpoint rules) for
    itself only, and the tests make hundreds: a store built per test, PynamoDB's session per
    thread, moto resetting boto3's default one. Each read the same files again, a tenth of a
    second of JSON a client, a quarter of the in-process tests' time. Loaders that search the
    same folders now share one cache, as every client of one session already does (the
    models are read-only to botocore). A Lambda environment builds its clients once; the
    local stack's functions, in processes of their own, keep botocore as it is.
    """
    from botocore.loaders import Loader

    if getattr(Loader, "_memkit_shared", False):
        return
    caches: dict[tuple[str, ...], dict[Any, Any]] = {}
    unshared = Loader.__init__

    def shared(self: Loader, *args: Any, **kwargs: Any) -> None:
        unshared(self, *args, **kwargs)
        self._cache = caches.setdefault(tuple(self.search_paths), {})

    Loader.__init__ = shared  # type: ignore[method-assign]
    Loader._memkit_shared = True  # type: ignore[attr-defined]


def _share_httpx_default_ssl_context() -> None:
    """Every httpx client in this process that verifies with the default CA bundle shares one
    SSL context.

    httpx builds a context per client (`httpx.get` and `httpx.post` build a client per call),
    loading certifi's bundle each time: 20 ms or more of a held GIL on a loaded machine, and
    the tests poll the local stack with those calls, in the process that also runs moto's
    server, the stream pumps and the gateway (a fifth of a moto restart test's main thread).
    A context is safe to share between clients and threads; one asked for with other
    settings (verify=False, a CA file, a client certificate) is built as before.
    """
    import os

    from httpx._transports import default

    if getattr(default, "_memkit_shared_ssl", False):
        return
    build = default.create_ssl_context
    shared: dict[tuple[str | None, str | None], Any] = {}

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None or not trust_env:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        where = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if where not in shared:
            shared[where] = build(verify=verify, cert=cert, trust_env=trust_env)
        return shared[where]

    default.create_ssl_context = create_ssl_context  # type: ignore[assignment]
    default._memkit_shared_ssl = True  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials (nothing reaches AWS) and the settings the functions read."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "MEMKIT_TABLE_NAME": TABLE,
    }.items():
        monkeypatch.setenv(name, value)


class LambdaContextStub:
    function_name = "memkit-test-api"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:memkit-test-api"
    aws_request_id = "test-request"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


@dataclass
class ApiResponse:
    status: int
    headers: dict[str, str]
    body: Any


def call_api(handler: Any, method: str, path: str, **kwargs: Any) -> ApiResponse:
    """One request through an API lambda_handler, as API Gateway v2 would send it."""
    from tests.events import http_event

    result = handler(http_event(method, path, **kwargs), LambdaContextStub())
    body = result.get("body") or ""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = body
    return ApiResponse(result["statusCode"], result.get("headers") or {}, parsed)


def handler_transport(handler: Any) -> Any:
    """An httpx transport that hands each request to an API lambda_handler as the event API
    Gateway builds for it (its path decoded), so an HTTP client runs over the handler."""
    import httpx

    from tests.events import http_event

    def send(request: httpx.Request) -> httpx.Response:
        query: dict[str, list[str]] = {}
        for name, value in request.url.params.multi_items():
            query.setdefault(name, []).append(value)
        event = http_event(
            request.method,
            request.url.path,
            query=query,
            headers=dict(request.headers),
            raw_body=request.content.decode() or None,
        )
        result = handler(event, LambdaContextStub())
        return httpx.Response(
            result["statusCode"],
            headers=result.get("headers") or {},
            content=(result.get("body") or "").encode(),
        )

    return httpx.MockTransport(send)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets ENGINES = ("moto", "dynamodb-local") runs each of its tests that
    use `dynamodb_table` on each engine (the DynamoDB Local tier; see dynamodb_table)."""
    engines = getattr(metafunc.module, "ENGINES", None)
    if engines and "dynamodb_table" in metafunc.fixturenames:
        metafunc.parametrize("dynamodb_table", engines, indirect=True)


@pytest.fixture(scope="session")
def dynamodb_local_endpoint() -> Iterator[str]:
    """DynamoDB Local, AWS's own engine, in memory for the session (installed into .tools/
    once); skipped where it cannot run (no Java 17+, no registry)."""
    from memkit_dev.local.dynamodb_local import DynamoDBLocal, Unavailable, prepare

    try:
        server = DynamoDBLocal(prepare(ROOT / ".tools"), data_dir=None).start()
    except Unavailable as exc:
        pytest.skip(f"DynamoDB Local cannot run here: {exc}")
    yield server.endpoint
    server.stop()


@pytest.fixture
def dynamodb_table(request: pytest.FixtureRequest) -> Iterator[str]:
    """The table created from template.yaml's MemoryTable, on moto in process (one request
    at a time, as on the local stack's server: memkit writes from thread pools), or, for a
    module of the DynamoDB Local tier, also on DynamoDB Local: AWS's own engine checks what
    moto lets through (name, expression, item and transaction rules). There every client
    (boto3, PynamoDB) reaches it through AWS_ENDPOINT_URL_DYNAMODB[_STREAMS]."""
    from memkit.store.items import bind_items

    # Item classes are bound per (table, endpoint...) and cached: a binding whose client
    # resolved one engine's endpoint must not serve a test on the other.
    bind_items.cache_clear()
    engine = getattr(request, "param", "moto")
    table = _dynamodb_local_table(request) if engine == "dynamodb-local" else _moto_table()
    yield from table
    bind_items.cache_clear()


def _dynamodb_local_table(request: pytest.FixtureRequest) -> Iterator[str]:
    import boto3

    from memkit_dev.local.template import create_table, load_template

    endpoint = request.getfixturevalue("dynamodb_local_endpoint")
    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", endpoint)
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint)
    if TABLE in client.list_tables()["TableNames"]:
        client.delete_table(TableName=TABLE)
        client.get_waiter("table_not_exists").wait(TableName=TABLE)
    create_table(client, load_template(ROOT / "template.yaml"), TABLE)
    yield TABLE


def _moto_table() -> Iterator[str]:
    import boto3
    from moto import mock_aws

    from memkit_dev.local.dynamodb import serialize_in_process_moto
    from memkit_dev.local.template import create_table, load_template

    serialize_in_process_moto()
    with mock_aws():
        create_table(
            boto3.client("dynamodb", region_name="us-east-1"),
            load_template(ROOT / "template.yaml"),
            TABLE,
        )
        yield TABLE


@pytest.fixture
def debug_log() -> Iterator[io.StringIO]:
    """Every line memkit's logger writes, at DEBUG, formatted as in Lambda."""
    from memkit.observability import logger

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    previous = logger.log_level
    logger.addHandler(handler)
    logger.setLevel("DEBUG")
    yield stream
    logger.setLevel(previous)
    logger.removeHandler(handler)
