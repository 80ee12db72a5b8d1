"""What the indexer and search need from an embedding provider, and how one fails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

# Some providers embed what is stored and what is asked differently (Cohere's input_type).
Purpose = Literal["document", "query"]

# The reasons (EmbeddingFailed.failures) of failures that a later try may not meet again:
# throttling and the provider's transient faults. Any other reason means the text itself
# was refused, and the indexer says so on the record instead of only retrying.
RETRYABLE = {
    "ThrottlingException",
    "ServiceUnavailableException",
    "ModelNotReadyException",
    "InternalServerException",
}


class EmbeddingFailed(Exception):
    """Some texts could not be embedded. `vectors` has the others (None where failed);
    `failures` maps a text's position to a reason without content (RETRYABLE or not)."""

    def __init__(self, failures: dict[int, str], vectors: list[list[float] | None]) -> None:
        super().__init__(f"{len(failures)} of {len(vectors)} texts could not be embedded")
        self.failures = failures
        self.vectors = vectors


class Embedder(Protocol):
    """Texts in, unit-length vectors out, in the same order."""

    @property
    def model_id(self) -> str:
        """What produced the vectors (an index built by one model is unusable by another)."""
        ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str], purpose: Purpose) -> list[list[float]]: ...
