"""The loopback Bedrock (memkit_dev.local.bedrock): memkit's production Titan and Cohere
embedders, through a real boto3 client, get vectors of the size and shape Bedrock gives,
carrying the local model's meaning; what Bedrock refuses is refused; and the local stack
with a Bedrock embedder (`LocalStackConfig.embedder`) indexes and finds memories with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import numpy as np
import pytest
from botocore.exceptions import ClientError

from memkit.embeddings.bedrock import CohereEmbedder, TitanEmbedder
from memkit_dev.local.bedrock import LoopbackBedrock
from memkit_dev.local.stack import LocalStack
from tests.integration.conftest import small_stack
from tests.waits import eventually

pytestmark = pytest.mark.integration

TEA = ["I drink green tea every morning", "Green tea is what I have at breakfast"]
TRAIN = "The train to Oslo leaves at nine"


@pytest.fixture(scope="module")
def bedrock() -> Iterator[LoopbackBedrock]:
    with LoopbackBedrock() as server:
        yield server


@pytest.fixture
def client(bedrock: LoopbackBedrock) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=bedrock.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.mark.parametrize("dimensions", [256, 512, 1024])
def test_titan_gets_unit_vectors_of_the_size_it_asks(client: Any, dimensions: int) -> None:
    vectors = np.array(TitanEmbedder(client, dimensions).embed([*TEA, TRAIN]))

    assert vectors.shape == (3, dimensions)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_the_vectors_carry_meaning_and_are_the_same_for_the_same_text(client: Any) -> None:
    titan = TitanEmbedder(client)
    first, second, unrelated = np.array(titan.embed([*TEA, TRAIN]))
    again = np.array(titan.embed([TEA[0]]))[0]

    assert first @ second > first @ unrelated + 0.3
    assert np.array_equal(first, again)


def test_cohere_embeds_96_texts_a_call_and_answers_each(
    client: Any, bedrock: LoopbackBedrock
) -> None:
    before = len(bedrock.calls)

    vectors = CohereEmbedder(client).embed([f"note {n} about tea" for n in range(100)], "query")

    assert (len(vectors), len(vectors[0])) == (100, 1024)
    assert bedrock.calls[before:] == [("cohere", 96), ("cohere", 4)]


@pytest.mark.parametrize(
    ("model", "body", "reason"),
    [
        ("amazon.titan-embed-text-v1", '{"inputText": "tea"}', "model identifier is invalid"),
        ("amazon.titan-embed-text-v2:0", '{"inputText": "tea", "k": 1}', "extraneous key [k]"),
        ("amazon.titan-embed-text-v2:0", '{"inputText": "tea", "dimensions": 300}', "dimensions"),
        ("amazon.titan-embed-text-v2:0", '{"inputText": ""}', "inputText"),
        ("cohere.embed-english-v3", '{"texts": ["tea"]}', "input_type"),
        (
            "cohere.embed-english-v3",
            '{"texts": ["%s"], "input_type": "search_query"}' % ("t" * 2_049),
            "longer than 2048",
        ),
    ],
)
def test_what_bedrock_refuses_is_a_validation_exception(
    client: Any, model: str, body: str, reason: str
) -> None:
    with pytest.raises(ClientError) as refused:
        client.invoke_model(modelId=model, body=body)

    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert reason in refused.value.response["Error"]["Message"]


def test_the_local_stack_indexes_and_finds_memories_with_a_bedrock_embedder() -> None:
    config = small_stack(
        embedder="titan", opensearch_flavour="serverless", table_name="memkit-titan"
    )
    memories = [
        {"id": "tea", "text": TEA[0], "user_id": "ada"},
        {"id": "train", "text": TRAIN, "user_id": "ada"},
    ]

    with LocalStack(config) as stack:
        created = httpx.post(
            f"{stack.url}/v1/long-term-memory/", json={"memories": memories}, timeout=60
        )
        query = {"text": "what does she drink at breakfast?", "limit": 2}

        def both_found() -> list[str]:
            answer = httpx.post(f"{stack.url}/v1/long-term-memory/search", json=query, timeout=60)
            ids = [memory["id"] for memory in answer.json()["memories"]]
            return ids if len(ids) == len(memories) else []

        ranked = eventually(both_found)
        assert stack.bedrock is not None
        embedded = list(stack.bedrock.texts)

    assert created.status_code == 200
    assert ranked == ["tea", "train"]
    assert {TEA[0], TRAIN} <= set(embedded)
