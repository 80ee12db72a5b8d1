"""A query is embedded once, however many searches of one prompt ask for it at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from memkit.service.long_term import QUERY_CACHE, LongTermService


class SlowEmbedder:
    """Counts calls; slow enough that concurrent callers overlap."""

    model_id = "counting"
    dimensions = 2

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], purpose: str = "query") -> list[list[float]]:
        with self._lock:
            self.calls += 1
        time.sleep(0.05)
        if self.fail:
            raise RuntimeError("throttled")
        return [[float(len(t)), 1.0] for t in texts]


def _service(embedder: SlowEmbedder) -> LongTermService:
    return LongTermService(None, None, lambda: None, lambda: embedder)  # type: ignore[arg-type,return-value]


def test_concurrent_searches_of_one_query_embed_it_once() -> None:
    embedder = SlowEmbedder()
    service = _service(embedder)

    with ThreadPoolExecutor(max_workers=3) as pool:
        vectors = list(pool.map(service.query_vector, ["tea?"] * 3))

    assert embedder.calls == 1
    assert vectors == [[4.0, 1.0]] * 3


def test_a_failed_embedding_is_not_remembered() -> None:
    embedder = SlowEmbedder(fail=True)
    service = _service(embedder)

    with pytest.raises(RuntimeError):
        service.query_vector("tea?")
    embedder.fail = False

    assert service.query_vector("tea?") == [4.0, 1.0]
    assert embedder.calls == 2


def test_only_recent_queries_are_kept() -> None:
    embedder = SlowEmbedder()
    service = _service(embedder)

    for i in range(QUERY_CACHE + 1):
        service.query_vector(f"q{i}")
    service.query_vector("q0")  # fell out: embedded again

    assert embedder.calls == QUERY_CACHE + 2
