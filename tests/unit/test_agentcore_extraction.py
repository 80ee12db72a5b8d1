"""How an AgentCore memory's strategies run on its events: which kind each strategy runs as,
which turns are mined, which namespaces name a memory."""

from __future__ import annotations

from typing import Any

import pytest

from memkit.agentcore.extraction import mined, names_a_memory, plan_of
from memkit.agentcore.models import MemoryStrategy, StrategyKind
from memkit.models.domain import StoredMessage


def _strategy(kind: StrategyKind, configuration: dict[str, Any] | None = None) -> MemoryStrategy:
    return MemoryStrategy("s-0123456789", "s", kind, ("/x/{actorId}",), None, configuration)


@pytest.mark.parametrize("kind", [k for k in StrategyKind if k is not StrategyKind.CUSTOM])
def test_a_built_in_strategy_runs_as_its_kind(kind: StrategyKind) -> None:
    plan = plan_of(_strategy(kind))

    assert plan is not None
    assert (plan.kind, plan.instructions) == (kind, None)


def test_a_custom_strategy_runs_as_its_override_with_the_operators_prompt() -> None:
    semantic = {"semanticOverride": {"extraction": {"appendToPrompt": "Only travel facts."}}}
    summary = {"summaryOverride": {"consolidation": {"appendToPrompt": "Be brief."}}}
    prefs = {"userPreferenceOverride": {"extraction": {"modelId": "x"}}}

    plans = [plan_of(_strategy(StrategyKind.CUSTOM, c)) for c in (semantic, summary, prefs)]

    assert [(p.kind, p.instructions) for p in plans if p] == [
        (StrategyKind.SEMANTIC, "Only travel facts."),
        (StrategyKind.SUMMARIZATION, "Be brief."),
        (StrategyKind.USER_PREFERENCE, None),
    ]


def test_a_self_managed_strategy_is_left_to_agentcore() -> None:
    managed = {"selfManagedConfiguration": {"triggerConditions": []}}

    assert plan_of(_strategy(StrategyKind.CUSTOM, managed)) is None
    assert plan_of(_strategy(StrategyKind.CUSTOM)) is None


def _message(role: str, **event: Any) -> StoredMessage:
    metadata = {"agentcore": {"event": "1#ab", **event}}
    return StoredMessage("m", role, "text", "2026-01-01T00:00:00Z", "o", 1, metadata=metadata)


def test_only_the_conversation_s_user_and_assistant_turns_are_mined() -> None:
    assert mined(_message("user"))
    assert mined(_message("assistant"))
    assert not mined(_message("user", skip=True))  # extractionMode SKIP
    assert not mined(_message("tool"))
    assert not mined(_message("other"))
    assert not mined(_message("data"))  # a blob or JSON payload


def test_a_namespace_names_a_memory_when_it_has_a_memory_id_s_form() -> None:
    assert names_a_memory("support-abcdefghij")
    assert not names_a_memory("default")
    assert not names_a_memory("support-abc")
