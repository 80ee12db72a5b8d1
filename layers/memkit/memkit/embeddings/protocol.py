"""What the indexer and search need from an embedding provider."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

# Some providers embed what is stored and what is asked differently (Cohere's input_type).
Purpose = Literal["document", "query"]


class Embedder(Protocol):
    """Texts in, unit-length vectors out, in the same order."""

    @property
    def model_id(self) -> str:
        """What produced the vectors (an index built by one model is unusable by another)."""
        ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str], purpose: Purpose) -> list[list[float]]: ...
