"""VectorStore dynamodb's table for a test: the template's VectorTable on DynamoDB with
vector indexes (memkit_dev.local.vector_dynamodb) in front of moto's server, which shares
moto's backends with the in-process mock (`dynamodb_table`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3

from memkit.vectors.dynamodb import DynamoVectorIndex
from memkit_dev.local.dynamodb import MotoDynamoDB
from memkit_dev.local.template import VECTOR_TABLE_RESOURCE, create_table, load_template
from memkit_dev.local.vector_dynamodb import VectorDynamoDB
from tests.conftest import ROOT

VECTOR_TABLE = "memkit-test-vectors"
REGION = "us-east-1"


@dataclass
class DynamoVectors:
    """The stand-in, a client of it (signed with the tests' fake credentials), the table."""

    standin: VectorDynamoDB
    client: Any
    table: str
    dimensions: int

    def index(self, **options: Any) -> DynamoVectorIndex:
        """The adapter over the table; the live generation is read on every call unless
        `cache_seconds` is given."""
        options.setdefault("cache_seconds", 0.0)
        options.setdefault("wait", lambda seconds: None)
        return DynamoVectorIndex(self.client, self.table, self.dimensions, **options)

    def settle(self) -> None:
        self.standin.settle()


@contextmanager
def dynamodb_vectors(dimensions: int, table: str = VECTOR_TABLE) -> Iterator[DynamoVectors]:
    # The credentials boto3 signs with here (moto's mock sets its own while it runs).
    credentials = boto3.Session().get_credentials().get_frozen_credentials()
    engine = MotoDynamoDB().start()
    try:
        with VectorDynamoDB(
            engine.endpoint,
            require_sigv4=True,
            access_key=credentials.access_key,
            secret_key=credentials.secret_key,
            session_token=credentials.token,
            region=REGION,
        ) as standin:
            client = boto3.client("dynamodb", region_name=REGION, endpoint_url=standin.url)
            if table in client.list_tables()["TableNames"]:
                client.delete_table(TableName=table)
            template = load_template(ROOT / "template.yaml")
            create_table(client, template, table, VECTOR_TABLE_RESOURCE, dimensions)
            yield DynamoVectors(standin, client, table, dimensions)
    finally:
        engine.stop()
