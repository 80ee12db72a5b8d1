"""The real API handler over DynamoDB (moto), called with API Gateway v2 events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ApiResponse, call_api
from tests.integration.memory_world import (
    CountingEmbedder,
    MemoryWorld,
    StreamReader,
    stream_mapping,
)

Call = Callable[..., ApiResponse]


@pytest.fixture
def api(dynamodb_table: str) -> Call:
    """call(method, path, query=..., body=..., headers=...) through the real lambda_handler."""
    from memkit.api.context import Services
    from memkit.api.handler import make_lambda_handler
    from memkit.config import ApiSettings
    from memkit.store.dynamodb import DynamoStore

    settings = ApiSettings(table_name=dynamodb_table, region="us-east-1")
    services = Services.over(DynamoStore(settings), settings)
    handler = make_lambda_handler(lambda: services)

    def call(method: str, path: str, **kwargs: Any) -> ApiResponse:
        return call_api(handler, method, path, **kwargs)

    return call


@pytest.fixture
def world(dynamodb_table: str) -> MemoryWorld:
    """The API and the indexer on moto, sharing one local index (tests/integration/memory_world)."""
    from memkit.api.context import Services
    from memkit.api.handler import make_lambda_handler
    from memkit.config import ApiSettings
    from memkit.indexer.handler import make_lambda_handler as make_indexer_handler
    from memkit.indexing import Indexer
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.local import LocalVectorIndex

    settings = ApiSettings(table_name=dynamodb_table, region="us-east-1")
    store = DynamoStore(settings, index_messages=True)
    embedder = CountingEmbedder()
    index = LocalVectorIndex(embedder.dimensions)
    services = Services.over(store, settings, index=lambda: index, embedder=lambda: embedder)
    indexer = Indexer(store, index, embedder)
    return MemoryWorld(
        api_handler=make_lambda_handler(lambda: services),
        indexer_handler=make_indexer_handler(lambda: indexer),
        vector_index=index,
        embedder=embedder,
        reader=StreamReader(dynamodb_table),
        mapping=stream_mapping(),
        store=store,
    )
