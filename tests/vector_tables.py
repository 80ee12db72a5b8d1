"""VectorStore dynamodb's table for a test: the template's VectorTable on DynamoDB with
vector indexes (memkit_dev.local.vector_dynamodb) in front of moto's server, which shares
moto's backends with the in-process mock (`dynamodb_table`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from memkit.vectors.dynamodb import DynamoVectorIndex
from memkit_dev.local.template import load_template
from memkit_dev.local.vector_dynamodb import VectorDynamoDB, vector_table_on_moto
from tests.conftest import ROOT

VECTOR_TABLE = "memkit-test-vectors"


@dataclass
class DynamoVectors:
    """The stand-in, a client of it (signed with the tests' fake credentials), the table."""

    standin: VectorDynamoDB
    client: Any
    table: str
    dimensions: int

    def index(self, **options: Any) -> DynamoVectorIndex:
        """The adapter over the table; the live generation and the texts of keyword search
        are read on every call unless `cache_seconds`, `keyword_cache_seconds` are given,
        and a switch waits for nothing unless `wait` is."""
        options.setdefault("cache_seconds", 0.0)
        options.setdefault("keyword_cache_seconds", 0.0)
        options.setdefault("wait", lambda seconds: None)
        return DynamoVectorIndex(self.client, self.table, self.dimensions, **options)

    def settle(self) -> None:
        self.standin.settle()


@contextmanager
def dynamodb_vectors(dimensions: int, table: str = VECTOR_TABLE) -> Iterator[DynamoVectors]:
    template = load_template(ROOT / "template.yaml")
    with vector_table_on_moto(template, table, dimensions) as (standin, client):
        yield DynamoVectors(standin, client, table, dimensions)
