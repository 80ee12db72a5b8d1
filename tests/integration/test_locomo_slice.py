"""A regression guard for retrieval on a real conversation: LoCoMo conversation 30, sessions
1-4 (77 turns, the 25 questions whose evidence lies in them; tests/fixtures/
locomo-30-sessions-1-4.json, an unchanged excerpt of the public dataset: Maharana et al.,
"Evaluating Very Long-Term Conversational Memory of LLM Agents", ACL 2024, research use).

Ingested and asked as ../shared/datasets/locomo-dev/README.md says (one session, role user,
"<speaker>: <text>", 100 turns a request, the default search with limit 10), through the real
API handler and the real indexer on moto. The floors are what the default search reaches on
this slice now (bench/locomo.py measures the whole development split); a change that loses
a question here fails.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration

SLICE = Path(__file__).resolve().parents[1] / "fixtures" / "locomo-30-sessions-1-4.json"
SESSION = "30"
# Recall@1, @5, @10 of the default search on the slice when this test was written (11, 18
# and 22 of the 25 questions). For the record: the search before memkit read messages in
# their conversation (issue 15) reached 0.28 / 0.60 / 0.72, plain BM25 0.44 / 0.72 / 0.76.
FLOORS = {1: 0.44, 5: 0.72, 10: 0.88}


def _turns(raw: dict[str, Any]) -> list[dict[str, Any]]:
    messages = []
    numbers = sorted(int(m.group(1)) for k in raw if (m := re.fullmatch(r"session_(\d+)", k)))
    for number in numbers:
        start = datetime.strptime(
            raw[f"session_{number}_date_time"].strip(), "%I:%M %p on %d %B, %Y"
        ).replace(tzinfo=UTC)
        for turn, entry in enumerate(raw[f"session_{number}"]):
            content = f"{entry['speaker']}: {entry['text']}"
            if entry.get("blip_caption"):
                content += f" [shares {entry['blip_caption']}]"
            messages.append(
                {
                    "id": entry["dia_id"].lower().replace(":", "-"),
                    "role": "user",
                    "content": content,
                    "created_at": (start + timedelta(seconds=turn)).isoformat(),
                }
            )
    return messages


def _evidence(raw: list[str]) -> set[str]:
    return {
        part.strip().lower().replace(":", "-")
        for entry in raw
        for part in entry.split(";")
        if part.strip()
    }


def test_the_default_search_keeps_its_recall_on_a_real_conversation(world: MemoryWorld) -> None:
    raw = json.loads(SLICE.read_text())
    turns = _turns(raw)
    for start in range(0, len(turns), 100):
        body = {"user_id": SESSION, "messages": turns[start : start + 100]}
        response = world.api(
            "POST",
            f"/v1/working-memory/{SESSION}/messages",
            query={"namespace": "locomo"},
            body=body,
        )
        assert response.status == 201, response.body
    world.settle()

    found = {1: 0, 5: 0, 10: 0}
    for question in raw["qa"]:
        body = {
            "text": question["question"],
            "namespace": {"eq": "locomo"},
            "user_id": {"eq": SESSION},
            "session_id": {"eq": SESSION},
            "memory_type": {"eq": "message"},
            "limit": 10,
        }
        response = world.api("POST", "/v1/long-term-memory/search", body=body)
        assert response.status == 200, response.body
        ids = [hit["id"] for hit in response.body["memories"]]
        for depth in found:
            found[depth] += bool(_evidence(question["evidence"]) & set(ids[:depth]))

    recall = {depth: count / len(raw["qa"]) for depth, count in found.items()}
    assert all(recall[depth] >= FLOORS[depth] for depth in FLOORS), recall
