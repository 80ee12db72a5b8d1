"""Context windows: how many tokens a model takes, trimming to them, and the two percentages.

The rules are the Agent Memory Server's, so its clients read the same figures: a message
costs the tokens of "<role>: <content>"; a window comes from `context_window_max`, else the
model's; trimming drops the oldest messages until the rest fit, always keeping the newest;
`context_percentage_total_used` is the share of the window used and
`context_percentage_until_summarization` the share of the summarization threshold (0.7 of
the window), both capped at 100. Tokens are memkit's estimate (memkit.tokens; README).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memkit.errors import FieldProblem, ValidationFailed
from memkit.models.domain import StoredMessage
from memkit.tokens import estimate_tokens

SUMMARIZATION_THRESHOLD = 0.7

# Context windows in tokens, by model family. A name matches the longest family it starts
# with, after any provider prefix ("openai/", "anthropic.", "us.anthropic.") is removed.
MODEL_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "claude-2": 100_000,
    "claude-3": 200_000,
    "claude-3-5": 200_000,
    "claude-3-7": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    "nova-micro": 128_000,
    "nova-lite": 300_000,
    "nova-pro": 300_000,
    "titan-text-premier": 32_000,
    "llama3-1": 128_000,
    "llama3-2": 128_000,
    "llama3-3": 128_000,
    "mistral-large": 128_000,
    "gemini-1.5-flash": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "gemini-2.0-flash": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
}
_PREFIXES = ("openai/", "anthropic/", "anthropic.", "amazon.", "meta.", "mistral.", "google/")
_REGIONS = ("us.", "eu.", "apac.", "global.")


def message_tokens(role: str, content: str) -> int:
    """What a message costs in a window (counted once, when it is written)."""
    return estimate_tokens(f"{role}: {content}")


def model_window(model_name: str) -> int | None:
    """The model's context window, or None for a model memkit does not know."""
    name = model_name.strip().lower()
    for region in _REGIONS:
        name = name.removeprefix(region)
    for prefix in _PREFIXES:
        name = name.removeprefix(prefix)
    best = None
    for family in MODEL_WINDOWS:
        matches = name == family or name.startswith((f"{family}-", f"{family}:", f"{family}."))
        if matches and (best is None or len(family) > len(best)):
            best = family
    return MODEL_WINDOWS[best] if best else None


def effective_window(model_name: str | None, context_window_max: int | None) -> int | None:
    """The window a GET measures against: the explicit one, else the model's, else none."""
    if context_window_max is not None:
        return context_window_max
    if model_name is None:
        return None
    window = model_window(model_name)
    if window is None:
        raise ValidationFailed(
            "unknown model",
            [
                FieldProblem(
                    "model_name",
                    f"memkit does not know the context window of {model_name!r}; "
                    "give context_window_max instead",
                )
            ],
        )
    return window


@dataclass(frozen=True)
class Window:
    messages: list[StoredMessage]
    total_used: float | None
    until_summarization: float | None


def fit(messages: Sequence[StoredMessage], window: int | None) -> Window:
    """The newest messages that fit `window` (at least one), with the two percentages."""
    kept = list(messages)
    if window is None:
        return Window(kept, None, None)
    used = sum(m.tokens for m in kept)
    start = 0
    while used > window and len(kept) - start > 1:
        used -= kept[start].tokens
        start += 1
    kept = kept[start:]
    threshold = int(window * SUMMARIZATION_THRESHOLD)
    total = min(100.0, used / window * 100.0)
    until = 100.0 if threshold <= 0 else min(100.0, used / threshold * 100.0)
    return Window(kept, total, until)
