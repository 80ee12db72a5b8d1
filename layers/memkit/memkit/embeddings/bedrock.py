"""Bedrock embedders: Titan Text Embeddings V2 and Cohere Embed v3 (InvokeModel).

Titan takes one text a call, so a batch runs its calls concurrently; Cohere takes 96 texts a
call and embeds what is stored (`search_document`) differently from what is asked
(`search_query`). Throttling is retried with jittered backoff. A text that cannot be
embedded fails alone: the others still get their vectors, and EmbeddingFailed says which
failed and why, so the indexer reports only those records.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memkit.embeddings.protocol import RETRYABLE, EmbeddingFailed, Purpose

TITAN_V2 = "amazon.titan-embed-text-v2:0"
TITAN_DIMENSIONS = (256, 512, 1024)
TITAN_MAX_CHARS = 50_000
COHERE_ENGLISH_V3 = "cohere.embed-english-v3"
COHERE_DIMENSIONS = 1024
COHERE_BATCH = 96
COHERE_MAX_CHARS = 2_048
BACKOFF_BASE_SECONDS = 0.2
BACKOFF_CAP_SECONDS = 5.0


class _Caller:
    """InvokeModel with retries of throttling and transient errors; reasons never quote
    the text (logs and errors carry no memory content)."""

    def __init__(
        self, client: Any, model_id: str, max_attempts: int, sleep: Callable[[float], None]
    ) -> None:
        self.client = client
        self.model_id = model_id
        self.max_attempts = max_attempts
        self.sleep = sleep

    def invoke(self, body: dict[str, Any]) -> dict[str, Any]:
        for attempt in range(self.max_attempts):
            try:
                response = self.client.invoke_model(
                    modelId=self.model_id,
                    body=json.dumps(body),
                    contentType="application/json",
                    accept="application/json",
                )
                parsed: dict[str, Any] = json.loads(response["body"].read())
                return parsed
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code not in RETRYABLE or attempt + 1 == self.max_attempts:
                    raise
            except BotoCoreError:
                if attempt + 1 == self.max_attempts:
                    raise
            cap = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt)
            self.sleep(random.uniform(0, cap))  # noqa: S311 (jitter, not crypto)
        raise AssertionError("unreachable")


def _reason(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


def _settle(results: list[list[float] | None], failures: dict[int, str]) -> list[list[float]]:
    if failures:
        raise EmbeddingFailed(failures, results)
    return [vector for vector in results if vector is not None]


class TitanEmbedder:
    """Titan Text Embeddings V2: one text a call, `workers` calls at a time, normalised."""

    def __init__(
        self,
        client: Any,
        dimensions: int = 1024,
        model_id: str = TITAN_V2,
        workers: int = 8,
        max_attempts: int = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if dimensions not in TITAN_DIMENSIONS:
            raise ValueError(f"Titan V2 gives {TITAN_DIMENSIONS} dimensions, not {dimensions}")
        self._caller = _Caller(client, model_id, max_attempts, sleep)
        self._dimensions = dimensions
        self._workers = workers

    @property
    def model_id(self) -> str:
        return f"{self._caller.model_id}/{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _one(self, text: str) -> list[float]:
        body = {
            "inputText": text[:TITAN_MAX_CHARS],
            "dimensions": self._dimensions,
            "normalize": True,
            "embeddingTypes": ["float"],
        }
        answer = self._caller.invoke(body)
        vector = answer.get("embeddingsByType", {}).get("float") or answer["embedding"]
        return [float(x) for x in vector]

    def embed(self, texts: Sequence[str], purpose: Purpose = "document") -> list[list[float]]:
        results: list[list[float] | None] = [None] * len(texts)
        failures: dict[int, str] = {}

        def run(index: int) -> None:
            try:
                results[index] = self._one(texts[index])
            except (ClientError, BotoCoreError, KeyError, ValueError) as exc:
                failures[index] = _reason(exc)

        with ThreadPoolExecutor(max_workers=max(1, min(self._workers, len(texts)))) as pool:
            list(pool.map(run, range(len(texts))))
        return _settle(results, failures)


class CohereEmbedder:
    """Cohere Embed v3: 96 texts a call; a batch the model refuses is retried text by text,
    so one bad text fails alone."""

    def __init__(
        self,
        client: Any,
        model_id: str = COHERE_ENGLISH_V3,
        max_attempts: int = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._caller = _Caller(client, model_id, max_attempts, sleep)

    @property
    def model_id(self) -> str:
        return self._caller.model_id

    @property
    def dimensions(self) -> int:
        return COHERE_DIMENSIONS

    def _batch(self, texts: Sequence[str], purpose: Purpose) -> list[list[float]]:
        body = {
            "texts": [text[:COHERE_MAX_CHARS] for text in texts],
            "input_type": "search_query" if purpose == "query" else "search_document",
            "truncate": "END",
            "embedding_types": ["float"],
        }
        answer = self._caller.invoke(body)
        embeddings = answer["embeddings"]
        vectors = embeddings["float"] if isinstance(embeddings, dict) else embeddings
        if len(vectors) != len(texts):
            raise ValueError("the model answered a different number of vectors")
        return [[float(x) for x in vector] for vector in vectors]

    def embed(self, texts: Sequence[str], purpose: Purpose = "document") -> list[list[float]]:
        results: list[list[float] | None] = [None] * len(texts)
        failures: dict[int, str] = {}
        for start in range(0, len(texts), COHERE_BATCH):
            chunk = list(texts[start : start + COHERE_BATCH])
            try:
                results[start : start + len(chunk)] = self._batch(chunk, purpose)
                continue
            except (ClientError, BotoCoreError, KeyError, ValueError) as exc:
                reason = _reason(exc)
                if len(chunk) == 1 or reason in RETRYABLE or isinstance(exc, BotoCoreError):
                    # still throttled after the retries: text by text would only add load
                    failures.update({start + offset: reason for offset in range(len(chunk))})
                    continue
            for offset, text in enumerate(chunk):  # find the text(s) the model refuses
                try:
                    results[start + offset] = self._batch([text], purpose)[0]
                except (ClientError, BotoCoreError, KeyError, ValueError) as exc:
                    failures[start + offset] = _reason(exc)
        return _settle(results, failures)
