"""Background curation on the local stack (`make serve`): the template's curator on the stream,
the work queue on moto's SQS, the memory worker with the local model, all in their own
processes, as on AWS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memkit_dev.local.stack import LocalStack, LocalStackConfig
from tests.waits import eventually

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    config = LocalStackConfig(
        port=0,
        concurrency=1,
        template=ROOT / "template.yaml",
        extraction_quiet_seconds=0,
        summary_window_tokens=600,
    )
    with LocalStack(config) as running:
        yield running


def test_a_long_session_is_summarised_and_titled_in_the_background(stack: LocalStack) -> None:
    lines = [
        f"Day {i}: we repotted the basil, watered the tomatoes and talked about the garden "
        f"in Lisbon, the heat, and what to plant in week {i}."
        for i in range(40)
    ]
    messages = [
        {"id": f"m{i:02d}", "role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(["Can you help me plan my balcony garden?", *lines])
    ]
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        response = http.post("/v1/working-memory/garden/messages", json={"messages": messages})
        assert response.status_code == 201, response.text

        def curated() -> dict[str, Any] | None:
            document = http.get("/v1/working-memory/garden").json()
            return document if document["context"] and document["title"] else None

        document = eventually(curated, timeout=30)

    assert document is not None, "no summary and title after 30 s"
    assert document["title"] == "Can you help me plan my balcony garden?"
    assert len(document["messages"]) < len(messages)
    assert document["messages"][-1]["id"] == "m40"
    assert document["message_count"] == len(messages)
    assert stack.dead_letters == []
