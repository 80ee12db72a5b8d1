"""The embedder a deployment is configured with (IndexSettings), built once per process."""

from __future__ import annotations

from functools import lru_cache

from memkit.config import IndexSettings
from memkit.embeddings.protocol import Embedder


@lru_cache(maxsize=4)
def embedder_for(settings: IndexSettings, region: str) -> Embedder:
    """local: the shipped static model; titan | cohere: Bedrock in `region`."""
    if settings.embedder == "local":
        from memkit.embeddings.local import LocalEmbedder

        return LocalEmbedder()
    import boto3
    from botocore.config import Config

    from memkit.embeddings.bedrock import COHERE_ENGLISH_V3, TITAN_V2, CohereEmbedder, TitanEmbedder

    # The embedders retry throttling themselves, with backoff over a longer window.
    client = boto3.client(
        "bedrock-runtime",
        region_name=region,
        config=Config(retries={"max_attempts": 2, "mode": "standard"}, read_timeout=30),
    )
    if settings.embedder == "titan":
        return TitanEmbedder(
            client, settings.embedding_dimensions, settings.embedding_model or TITAN_V2
        )
    return CohereEmbedder(client, settings.embedding_model or COHERE_ENGLISH_V3)
