"""The local stack with `--vector-store dynamodb`: the template's VectorTable on DynamoDB with
vector indexes (the stand-in in front of the stack's engine) is the vector index the real
functions write and search over HTTP, and it keeps its data with the table's across a restart
(DynamoDB Local in a data folder), where the loopback OpenSearch is rebuilt from the table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memkit_dev.local.stack import LocalStack
from tests.integration.conftest import small_stack
from tests.waits import eventually

pytestmark = pytest.mark.integration

LTM = "/v1/long-term-memory"
NS = "ddb-vectors"


def _search(url: str, text: str, **filters: Any) -> list[str]:
    body = {"text": text, "namespace": {"eq": NS}, "limit": 5, **filters}
    response = httpx.post(f"{url}{LTM}/search", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return [memory["id"] for memory in response.json()["memories"]]


def _create(url: str, *memories: dict[str, Any]) -> None:
    body = {"memories": [{"namespace": NS, **memory} for memory in memories]}
    response = httpx.post(f"{url}{LTM}/", json=body, timeout=60)
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def dynamodb_stack() -> Iterator[LocalStack]:
    with LocalStack(small_stack(vector_store="dynamodb")) as running:
        yield running
        assert running.vectors is not None
        assert running.vectors.rejected == []


def test_records_are_indexed_into_the_vector_table_searched_and_deleted(
    dynamodb_stack: LocalStack,
) -> None:
    url = dynamodb_stack.url
    # Given two records written through the API
    _create(
        url,
        {"id": "tea", "text": "Ada drinks green tea every morning", "user_id": "ada"},
        {"id": "cat", "text": "Bob has a grey cat called Pixel", "user_id": "bob"},
    )

    # Then the indexer puts them in the vector table, and a search by meaning finds each
    found = eventually(lambda: _search(url, "what does Ada drink?", user_id={"eq": "ada"}))
    assert found == ["tea"]
    assert eventually(lambda: "cat" in _search(url, "a pet", search_mode="semantic"))
    health = httpx.get(f"{url}/v1/health", timeout=30).json()["local"]["endpoints"]
    assert dynamodb_stack.vectors is not None
    assert health["vectors"] == dynamodb_stack.vectors.url
    assert dynamodb_stack.opensearch is None

    # When one is deleted, then the stream's REMOVE takes its vector out of the table
    assert httpx.delete(f"{url}{LTM}", params={"memory_ids": "tea"}, timeout=60).is_success
    assert eventually(lambda: "tea" not in _search(url, "green tea", search_mode="semantic"))


def test_keyword_and_hybrid_search_work_on_the_vector_table(dynamodb_stack: LocalStack) -> None:
    url = dynamodb_stack.url
    _create(url, {"id": "oslo", "text": "Ada flies to Oslo on Friday", "user_id": "ada"})

    assert eventually(lambda: _search(url, "Oslo", search_mode="keyword")[:1] == ["oslo"])
    assert eventually(lambda: _search(url, "Oslo trip", search_mode="hybrid")[:1] == ["oslo"])


def test_the_vector_table_keeps_its_data_across_a_restart(tmp_path: Path) -> None:
    from memkit_dev.local.dynamodb_local import Unavailable

    # Given a stack on DynamoDB Local with its data in a folder (installed in the default,
    # relative, tools folder), and a record indexed
    config = small_stack(vector_store="dynamodb", engine="dynamodb-local", data_dir=tmp_path)
    try:
        first = LocalStack(config).start()
    except Unavailable as exc:
        pytest.skip(f"DynamoDB Local cannot run here: {exc}")
    try:
        _create(first.url, {"id": "kept", "text": "Cy keeps bees in the garden", "user_id": "cy"})
        assert eventually(lambda: _search(first.url, "bees", search_mode="semantic") == ["kept"])
    finally:
        first.stop()

    # When the stack starts again on the same data
    with LocalStack(config) as second:
        # Then the vector table's items are in its vector index without a rebuild
        assert _search(second.url, "bees", search_mode="semantic") == ["kept"]
