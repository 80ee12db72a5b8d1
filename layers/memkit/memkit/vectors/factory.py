"""The vector index a deployment is configured with (IndexSettings), built once per process."""

from __future__ import annotations

from functools import lru_cache

from memkit.config import IndexSettings
from memkit.vectors.local import LocalVectorIndex
from memkit.vectors.protocol import VectorIndex


@lru_cache(maxsize=4)
def process_local_index(dimensions: int) -> LocalVectorIndex:
    """One exact index for this process (tests and benchmarks that run in one process; the
    local stack serves one to all its functions over loopback, memkit.local.opensearch)."""
    return LocalVectorIndex(dimensions)


@lru_cache(maxsize=4)
def vector_index_for(settings: IndexSettings, region: str, dimensions: int) -> VectorIndex:
    """OpenSearch at `opensearch_endpoint` (a domain or a Serverless collection), else the
    process's local index."""
    if settings.opensearch_endpoint is None:
        return process_local_index(dimensions)
    from memkit.vectors.opensearch import opensearch_index

    return opensearch_index(settings, region, dimensions)
