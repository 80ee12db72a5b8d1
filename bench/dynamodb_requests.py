"""DynamoDB requests per API call: the real handler and store on moto, every call counted.

The count comes from botocore itself: a `before-call.dynamodb` handler added to botocore's
built-in handlers, which every botocore session registers when it is created. So it sees the
clients PynamoDB creates lazily, including the one a transaction builds for itself.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import environment
from bench.figures import report

ROOT = Path(__file__).resolve().parents[1]
TABLE = "memkit-bench"


class RequestCounter:
    """Counts DynamoDB API calls by operation, for every botocore session created after install."""

    def __init__(self) -> None:
        self.operations: Counter[str] = Counter()

    def install(self) -> RequestCounter:
        from botocore import handlers

        handlers.BUILTIN_HANDLERS.append(("before-call.dynamodb", self._count))
        return self

    def _count(self, model: Any, **_kwargs: Any) -> None:
        self.operations[model.name] += 1

    def during(self, action: Callable[[], Any]) -> Counter[str]:
        """The calls `action` made."""
        self.operations.clear()
        action()
        return Counter(self.operations)


def _sender() -> Callable[..., dict[str, Any]]:
    """`send(method, path, expect=200, **http_event_args)` over the table the process's
    DynamoDB client reaches (moto's mock, or an endpoint from AWS_ENDPOINT_URL_DYNAMODB)."""
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.wiring import api_services
    from memkit.store.dynamodb import DynamoStore
    from tests.events import http_event

    settings = ApiSettings(table_name=TABLE, region="us-east-1")
    handler = make_lambda_handler(lambda: api_services(DynamoStore(settings), settings))
    context: Any = environment.LambdaContext()

    def send(method: str, path: str, expect: int = 200, **kwargs: Any) -> dict[str, Any]:
        response = handler(http_event(method, path, **kwargs), context)
        if response["statusCode"] != expect:
            raise SystemExit(f"{method} {path} failed: {str(response)[:1000]}")
        return response

    return send


@contextmanager
def api_on_moto() -> Iterator[Callable[..., dict[str, Any]]]:
    """The real Lambda handler over the DynamoDB store on a fresh moto table (`_sender`)."""
    import boto3
    from moto import mock_aws

    from memkit_dev.local.dynamodb import serialize_in_process_moto
    from memkit_dev.local.template import create_table, load_template

    serialize_in_process_moto()  # moto is not thread-safe; memkit writes from pools
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, load_template(ROOT / "template.yaml"), TABLE)
        yield _sender()


@contextmanager
def dynamodb_engine() -> Iterator[str]:
    """The engine this process's DynamoDB clients reach for the duration, by name: DynamoDB
    Local (in memory) where Java 17+ is here, as `make serve` (MEMKIT_BENCH_ENGINE=moto for
    moto), else moto's in-process mock. No table is created."""
    from memkit_dev.local.dynamodb_local import DynamoDBLocal, Unavailable, prepare

    engine = environment.stack_engine()
    server = None
    if engine != "moto":
        try:
            server = DynamoDBLocal(prepare(ROOT / ".tools"), data_dir=None).start()
        except Unavailable:
            if engine == "dynamodb-local":
                raise
    if server is None:
        from moto import mock_aws

        from memkit_dev.local.dynamodb import serialize_in_process_moto

        serialize_in_process_moto()  # moto is not thread-safe; memkit writes from pools
        with mock_aws():
            yield "moto (in process)"
        return
    names = ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS")
    before = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, server.endpoint))
    try:
        yield "DynamoDB Local"
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()


@contextmanager
def local_stack(name: str, engine: str | None = None, **config: Any) -> Iterator[Any]:
    """The local stack for benchmark `name` on `engine` (default: the benchmarks' engine,
    environment.stack_engine), data in memory, its engine printed; werkzeug kept quiet."""
    import logging

    from memkit_dev.local.stack import LocalStack, LocalStackConfig

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    settings = LocalStackConfig(
        port=0,
        template=ROOT / "template.yaml",
        engine=engine or environment.stack_engine(),
        tools_dir=ROOT / ".tools",
        **config,
    )
    with LocalStack(settings) as stack:
        print(f"{name}: DynamoDB on {stack.engine}", flush=True)
        yield stack


@contextmanager
def api_on_table() -> Iterator[tuple[Callable[..., dict[str, Any]], str]]:
    """(send, engine): the real handler over a fresh table on `dynamodb_engine()`."""
    import boto3

    from memkit_dev.local.template import create_table, load_template

    with dynamodb_engine() as engine:
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, load_template(ROOT / "template.yaml"), TABLE)
        yield _sender(), engine


def main() -> None:
    environment.apply()
    counter = RequestCounter().install()  # before any botocore session exists

    with api_on_moto() as api:

        def call(method: str, path: str, **kwargs: Any) -> Callable[[], Any]:
            return lambda: api(method, path, **kwargs)

        pad, notes_pad = "/v1/working-memory/s1/scratchpad", "/v1/working-memory/s2/scratchpad"
        # Given: session s1 on the default profile, session s2 created with profile `notes`.
        call("PATCH", pad, body={"content": "first"})()
        call("PUT", "/v1/profiles/notes", body={"template": "# Notes"})()
        call("PATCH", notes_pad, query={"profile": "notes"}, body={"content": "# Notes"})()

        routes = [
            ("get_scratchpad", call("GET", pad), "target 1"),
            ("get_scratchpad_session_profile", call("GET", notes_pad), "target <= 2"),
            ("patch_scratchpad", call("PATCH", pad, body={"content": "more"}), "target <= 2"),
            (
                "patch_scratchpad_new_session",
                call("PATCH", "/v1/working-memory/s3/scratchpad", body={"content": "x"}),
                "target <= 2",
            ),
            ("get_profile", call("GET", "/v1/profiles/notes"), "target 1"),
            (
                "put_profile",
                call("PUT", "/v1/profiles/notes", body={"template": "# Notes v2"}),
                "target <= 2",
            ),
        ]
        for name, send, target in routes:
            operations = counter.during(send)
            detail = ", ".join(f"{op} {n}" for op, n in sorted(operations.items()))
            total = sum(operations.values())
            report(f"dynamodb_requests.{name}", total, target=f"{target}; {detail}")


if __name__ == "__main__":
    main()
