"""The memory model a deployment is configured with (LLMSettings), built once per process."""

from __future__ import annotations

from functools import lru_cache

from memkit.config import LLMSettings
from memkit.llm.protocol import MemoryModel

MAX_ATTEMPTS = 4
# Retries stop once a task has taken this many read timeouts in all (sleeps included), so a
# stuck model fails the batch to its retry path instead of running out the function's time.
DEADLINE_TIMEOUTS = 3


@lru_cache(maxsize=4)
def memory_model_for(settings: LLMSettings, region: str | None = None) -> MemoryModel:
    """local: extractive and heuristic, no network; bedrock: Converse with `llm_model` in
    `region` (None: the function's own region, as boto3 finds it)."""
    if settings.llm_provider == "local":
        from memkit.llm.local import LocalModel

        return LocalModel()
    import boto3
    from botocore.config import Config

    from memkit.llm.bedrock import DEFAULT_MODEL, ConverseModel

    # ConverseModel owns the retry policy (with backoff and a deadline): the SDK makes one
    # attempt a call, and a read waits at most llm_timeout_seconds.
    client = boto3.client(
        "bedrock-runtime",
        region_name=region,
        config=Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=5,
            read_timeout=settings.llm_timeout_seconds,
        ),
    )
    return ConverseModel(
        client,
        settings.llm_model or DEFAULT_MODEL,
        max_attempts=MAX_ATTEMPTS,
        deadline_seconds=DEADLINE_TIMEOUTS * settings.llm_timeout_seconds,
    )
