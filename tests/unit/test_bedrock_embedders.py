"""Bedrock embedders on botocore's Stubber, with the request and response shapes of
InvokeModel for Titan Text Embeddings V2 and Cohere Embed v3."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from memkit.embeddings.bedrock import (
    COHERE_ENGLISH_V3,
    TITAN_V2,
    CohereEmbedder,
    EmbeddingFailed,
    TitanEmbedder,
)


@pytest.fixture
def bedrock() -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1")


def _body(payload: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps(payload).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def _request(model: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "modelId": model,
        "body": json.dumps(body),
        "contentType": "application/json",
        "accept": "application/json",
    }


def _titan_answer(vector: list[float]) -> dict[str, Any]:
    return _body(
        {"embedding": vector, "inputTextTokenCount": 3, "embeddingsByType": {"float": vector}}
    )


def _titan_request(text: str, dimensions: int = 256) -> dict[str, Any]:
    return _request(
        TITAN_V2,
        {
            "inputText": text,
            "dimensions": dimensions,
            "normalize": True,
            "embeddingTypes": ["float"],
        },
    )


def test_titan_embeds_one_text_a_call_in_order(bedrock: Any) -> None:
    embedder = TitanEmbedder(bedrock, dimensions=256, workers=1)
    with Stubber(bedrock) as stub:
        stub.add_response("invoke_model", _titan_answer([0.1] * 256), _titan_request("first"))
        stub.add_response("invoke_model", _titan_answer([0.2] * 256), _titan_request("second"))

        vectors = embedder.embed(["first", "second"], "document")

        stub.assert_no_pending_responses()
    assert [v[0] for v in vectors] == [0.1, 0.2]
    assert embedder.dimensions == 256
    assert embedder.model_id == f"{TITAN_V2}/256"


def test_titan_calls_run_concurrently_within_a_batch(bedrock: Any) -> None:
    embedder = TitanEmbedder(bedrock, dimensions=512, workers=4)
    with Stubber(bedrock) as stub:
        for _ in range(8):
            stub.add_response(
                "invoke_model", _titan_answer([0.5] * 512), {**_request(TITAN_V2, {}), "body": ANY}
            )

        vectors = embedder.embed([f"text {i}" for i in range(8)], "document")

        stub.assert_no_pending_responses()
    assert len(vectors) == 8


def test_titan_retries_throttling_and_fails_a_bad_text_alone(bedrock: Any) -> None:
    slept: list[float] = []
    embedder = TitanEmbedder(bedrock, dimensions=256, workers=1, sleep=slept.append)
    with Stubber(bedrock) as stub:
        stub.add_client_error("invoke_model", "ThrottlingException", http_status_code=429)
        stub.add_response("invoke_model", _titan_answer([0.3] * 256), _titan_request("ok"))
        stub.add_client_error("invoke_model", "ValidationException", http_status_code=400)

        with pytest.raises(EmbeddingFailed) as failed:
            embedder.embed(["ok", "too long for the model"], "document")

    assert len(slept) == 1
    assert failed.value.failures == {1: "ValidationException"}
    assert failed.value.vectors[0] == [0.3] * 256
    assert failed.value.vectors[1] is None
    assert "too long" not in str(failed.value)


def test_titan_refuses_dimensions_it_does_not_have(bedrock: Any) -> None:
    with pytest.raises(ValueError, match="dimensions"):
        TitanEmbedder(bedrock, dimensions=300)


def _cohere_request(texts: list[str], input_type: str) -> dict[str, Any]:
    body = {
        "texts": texts,
        "input_type": input_type,
        "truncate": "END",
        "embedding_types": ["float"],
    }
    return _request(COHERE_ENGLISH_V3, body)


def _cohere_answer(texts: list[str], value: float = 0.1) -> dict[str, Any]:
    return _body(
        {
            "id": "a3b1c2",
            "response_type": "embeddings_by_type",
            "embeddings": {"float": [[value] * 1024 for _ in texts]},
            "texts": texts,
        }
    )


def test_cohere_sends_96_texts_a_call_with_the_input_type_of_the_purpose(bedrock: Any) -> None:
    texts = [f"text {i}" for i in range(100)]
    embedder = CohereEmbedder(bedrock)
    with Stubber(bedrock) as stub:
        stub.add_response(
            "invoke_model",
            _cohere_answer(texts[:96]),
            _cohere_request(texts[:96], "search_document"),
        )
        stub.add_response(
            "invoke_model",
            _cohere_answer(texts[96:]),
            _cohere_request(texts[96:], "search_document"),
        )
        stub.add_response(
            "invoke_model", _cohere_answer(["q"]), _cohere_request(["q"], "search_query")
        )

        stored = embedder.embed(texts, "document")
        asked = embedder.embed(["q"], "query")

        stub.assert_no_pending_responses()
    assert len(stored) == 100  # ceil(100 / 96) = 2 calls
    assert len(asked[0]) == embedder.dimensions == 1024


def test_cohere_isolates_the_text_the_model_refuses(bedrock: Any) -> None:
    texts = ["fine", "refused", "also fine"]
    embedder = CohereEmbedder(bedrock)
    with Stubber(bedrock) as stub:
        stub.add_client_error("invoke_model", "ValidationException", http_status_code=400)
        stub.add_response(
            "invoke_model",
            _cohere_answer(["fine"], 0.1),
            _cohere_request(["fine"], "search_document"),
        )
        stub.add_client_error("invoke_model", "ValidationException", http_status_code=400)
        stub.add_response(
            "invoke_model",
            _cohere_answer(["also fine"], 0.3),
            _cohere_request(["also fine"], "search_document"),
        )

        with pytest.raises(EmbeddingFailed) as failed:
            embedder.embed(texts, "document")

    assert failed.value.failures == {1: "ValidationException"}
    assert [v[0] if v else None for v in failed.value.vectors] == [0.1, None, 0.3]


def test_cohere_does_not_multiply_calls_while_throttled(bedrock: Any) -> None:
    embedder = CohereEmbedder(bedrock, max_attempts=2, sleep=lambda _: None)
    with Stubber(bedrock) as stub:
        stub.add_client_error("invoke_model", "ThrottlingException", http_status_code=429)
        stub.add_client_error("invoke_model", "ThrottlingException", http_status_code=429)

        with pytest.raises(EmbeddingFailed) as failed:
            embedder.embed(["a", "b", "c"], "document")

        stub.assert_no_pending_responses()
    assert failed.value.failures == {
        0: "ThrottlingException",
        1: "ThrottlingException",
        2: "ThrottlingException",
    }
