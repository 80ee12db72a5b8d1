"""What the indexer and search need from an embedding provider, and how one fails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from memkit.errors import MemkitError, StoreUnavailable, Throttled
from memkit.observability import logger

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
# Reasons that say the account is over its rate or quota for the model: back off (429).
THROTTLING = {"ThrottlingException", "ServiceQuotaExceededException"}
# Reasons a later try may not meet: the provider's faults and the network's. Any other reason
# on a query (AccessDenied, ValidationException, ResourceNotFound...) is the deployment's: an
# operator must grant model access or fix the model id.
TRANSIENT = RETRYABLE | {
    "ModelTimeoutException",
    "ModelErrorException",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "EndpointConnectionError",
    "ConnectionClosedError",
}


class EmbeddingFailed(Exception):
    """Some texts could not be embedded. `vectors` has the others (None where failed);
    `failures` maps a text's position to a reason without content (RETRYABLE or not)."""

    def __init__(self, failures: dict[int, str], vectors: list[list[float] | None]) -> None:
        super().__init__(f"{len(failures)} of {len(vectors)} texts could not be embedded")
        self.failures = failures
        self.vectors = vectors

    def domain_error(self) -> MemkitError:
        """The error an API client sees when a query could not be embedded: 429 while the
        model is throttled, else 503 (retry later). Logged with the reasons (error codes)
        only, never the text."""
        reasons = sorted(set(self.failures.values()))
        if THROTTLING.intersection(reasons):
            logger.warning("embedding model throttled", extra={"reasons": reasons})
            return Throttled("the embedding model is busy; retry later")
        if TRANSIENT.issuperset(reasons):
            logger.warning("embedding model unavailable", extra={"reasons": reasons})
        else:  # an operator's fix; to the client, the service is unavailable until then
            logger.error("embedding model refused a request", extra={"reasons": reasons})
        return StoreUnavailable("the embedding model is unavailable; retry later")


class Embedder(Protocol):
    """Texts in, unit-length vectors out, in the same order."""

    @property
    def model_id(self) -> str:
        """What produced the vectors (an index built by one model is unusable by another)."""
        ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str], purpose: Purpose) -> list[list[float]]: ...
