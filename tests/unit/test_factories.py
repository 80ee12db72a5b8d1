"""The configured embedder and vector index: what each setting builds (no requests made)."""

from __future__ import annotations

import pytest

from memkit.config import IndexSettings
from memkit.embeddings.bedrock import COHERE_ENGLISH_V3, TITAN_V2, CohereEmbedder, TitanEmbedder
from memkit.embeddings.local import LocalEmbedder
from memkit.handlers.wiring import embedder_for, process_local_index, vector_index_for
from memkit.vectors.local import LocalVectorIndex
from memkit.vectors.opensearch import OpenSearchIndex


def test_the_default_embedder_is_the_local_model() -> None:
    embedder = embedder_for(IndexSettings(), "us-east-1")

    assert isinstance(embedder, LocalEmbedder)
    assert embedder.dimensions == 256


@pytest.mark.parametrize(
    ("settings", "kind", "model_id", "dimensions"),
    [
        (
            IndexSettings(embedder="titan", embedding_dimensions=512),
            TitanEmbedder,
            f"{TITAN_V2}/512",
            512,
        ),
        (IndexSettings(embedder="cohere"), CohereEmbedder, COHERE_ENGLISH_V3, 1024),
        (
            IndexSettings(embedder="cohere", embedding_model="cohere.embed-multilingual-v3"),
            CohereEmbedder,
            "cohere.embed-multilingual-v3",
            1024,
        ),
    ],
)
def test_bedrock_embedders_follow_the_settings(
    settings: IndexSettings, kind: type, model_id: str, dimensions: int
) -> None:
    embedder = embedder_for(settings, "eu-west-1")

    assert isinstance(embedder, kind)
    assert embedder.model_id == model_id
    assert embedder.dimensions == dimensions


def test_without_an_endpoint_the_index_is_this_process_s_own() -> None:
    index = vector_index_for(IndexSettings(), "us-east-1", 256)

    assert isinstance(index, LocalVectorIndex)
    assert index is process_local_index(256)


@pytest.mark.parametrize("flavour", ["domain", "serverless"])
def test_an_endpoint_gives_the_opensearch_adapter(flavour: str) -> None:
    settings = IndexSettings(
        opensearch_endpoint="https://search.example.com",
        opensearch_flavour=flavour,  # type: ignore[arg-type]
        opensearch_auth="sigv4",
    )

    index = vector_index_for(settings, "us-east-1", 1024)

    assert isinstance(index, OpenSearchIndex)
    assert index.dimensions == 1024
