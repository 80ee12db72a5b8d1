"""What the curator queues for a write (memkit.jobs.curation.jobs_for), from stream images."""

from __future__ import annotations

import json
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer

from memkit.config import CurationSettings
from memkit.handlers.wiring import curation_policy as policy_of
from memkit.jobs.curation import Job, Policy
from memkit.jobs.curation import jobs_for as jobs_for_values
from memkit.store.changes import Value, stream_change

POLICY = Policy(window_tokens=1000, threshold=0.7, quiet_seconds=30)


def _decoded(image: dict[str, Any] | None) -> Value | None:
    """A stream image as the store hands it to the jobs (memkit.store.changes)."""
    if image is None:
        return None
    raw = {name: TypeSerializer().serialize(value) for name, value in image.items()}
    change = stream_change({"eventName": "INSERT", "dynamodb": {"NewImage": raw}})
    assert change is not None
    return change.new


def jobs_for(
    old: dict[str, Any] | None, new: dict[str, Any], policy: Policy, view: Any
) -> list[Job]:
    decoded = _decoded(new)
    assert decoded is not None
    return jobs_for_values(_decoded(old), decoded, policy, view)


def _session(count: int, title: str | None = None, window: int | None = None) -> dict[str, Any]:
    image = {
        "kind": "session",
        "tenant": "t",
        "namespace": "ns",
        "session_id": "s1",
        "updated_at": "2026-11-23T10:00:00.000Z",
        "message_count": count,
        "title": title,
    }
    return image if window is None else image | {"window_tokens": window}


def _kinds(jobs: list[Job]) -> list[tuple[str, int]]:
    return [(job.kind, job.delay_seconds) for job in jobs]


def test_a_write_that_adds_no_message_queues_nothing() -> None:
    assert jobs_for(_session(5), _session(5, title="Trip"), POLICY, lambda: 10_000) == []


def test_new_messages_queue_a_delayed_extraction_and_a_title() -> None:
    jobs = jobs_for(_session(1), _session(3), POLICY, lambda: 100)

    assert _kinds(jobs) == [("extract", 30), ("title", 0)]
    assert jobs[0].stamp == "2026-11-23T10:00:00.000Z"


def test_a_view_past_the_threshold_queues_a_summary_at_once() -> None:
    jobs = jobs_for(_session(8, title="Trip"), _session(9, title="Trip"), POLICY, lambda: 700)

    assert _kinds(jobs) == [("extract", 30), ("summarize", 0)]


def test_a_session_is_summarised_against_the_window_its_client_gave() -> None:
    # 700 tokens: within 70% of the server's 1,000 here, past 70% of the session's 800
    before, after = _session(8, "Trip", window=800), _session(9, "Trip", window=800)

    jobs = jobs_for(before, after, POLICY, lambda: 700)

    assert _kinds(jobs) == [("extract", 30), ("summarize", 0)]


def test_a_window_change_alone_queues_only_a_summary_when_the_view_passes_it() -> None:
    shrunk = jobs_for(_session(9, "Trip"), _session(9, "Trip", window=800), POLICY, lambda: 700)
    grown = jobs_for(_session(9, "Trip"), _session(9, "Trip", window=4000), POLICY, lambda: 700)

    assert _kinds(shrunk) == [("summarize", 0)]
    assert grown == []


def test_a_tiny_window_is_summarised_against_the_floor() -> None:
    assert POLICY.window_for(None) == 1000
    assert POLICY.window_for(40) == 500
    assert POLICY.window_for(2000) == 2000


def test_no_extraction_is_queued_when_the_model_cannot_extract() -> None:
    policy = Policy(extract=False)

    assert jobs_for(None, _session(1), policy, lambda: 0) == []
    assert policy_of(CurationSettings(table_name="tbl", llm_provider="local")).extract is False
    assert policy_of(CurationSettings(table_name="tbl", llm_provider="bedrock")).extract is True


@pytest.mark.parametrize(
    ("old", "changes", "queued"),
    [
        (None, {}, True),
        (None, {"topics": ["drinks"]}, False),
        (None, {"extracted": "t"}, False),
        ({"kind": "record", "tenant": "t", "record_id": "r1", "text": "tea"}, {}, False),  # an edit
    ],
)
def test_a_new_record_without_topics_is_described(
    old: dict[str, Any] | None, changes: dict[str, Any], queued: bool
) -> None:
    new = {
        "kind": "record",
        "tenant": "t",
        "namespace": "ns",
        "record_id": "r1",
        "text": "likes tea",
        "updated_at": "2026-11-23T10:00:00.000Z",
        **changes,
    }

    jobs = jobs_for(old, new, POLICY, lambda: 0)

    assert [(job.kind, job.record_id) for job in jobs] == ([("describe", "r1")] if queued else [])


def test_a_job_travels_as_json_and_an_unknown_one_is_refused() -> None:
    job = Job("describe", "t", "ns", "s1", "2026-11-23T10:00:00.000Z", record_id="r1")

    assert Job.from_json(job.to_json()) == job
    with pytest.raises(ValueError, match="unknown job"):
        Job.from_json('{"job": "delete_everything", "tenant": "t"}')


def _message(**fields: Any) -> str:
    """A user's deletion's follow-up as the work queue carries it, with `fields` changed
    (None: left out)."""
    body = {
        "job": "delete_user",
        "tenant": "t",
        "namespace": "ns",
        "session_id": "",
        "stamp": "2026-11-27T08:00:00.000Z",
        "user_id": "u1",
        "job_id": "01JFOLLOWUP00000000000000",
        "not_before": 1_795_000_000,
        "follow_up": 1,
        "hops": 0,
    }
    body.update(fields)
    return json.dumps({name: value for name, value in body.items() if value is not None})


@pytest.mark.parametrize(
    "deletion", [{}, {"job": "delete_memory", "user_id": None}], ids=["user", "memory"]
)
def test_a_follow_up_travels_as_json_with_its_due_time_place_and_hops(
    deletion: dict[str, Any],
) -> None:
    job = Job.from_json(_message(hops=3, follow_up=2, **deletion))

    assert (job.not_before, job.follow_up, job.hops) == (1_795_000_000, 2, 3)
    assert Job.from_json(job.to_json()) == job


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"not_before": "1795000000"}, "not_before"),
        ({"not_before": 1_795_000_000.5}, "not_before"),
        ({"not_before": True}, "not_before"),
        ({"not_before": -1}, "not_before"),
        ({"hops": "1"}, "hops"),
        ({"hops": -1}, "hops"),
        ({"follow_up": [1]}, "follow_up"),
        ({"job_id": None}, "job_id"),  # a follow-up runs only on a job item its deletion wrote
        ({"job_id": ""}, "job_id"),
        ({"follow_up": None}, "not_before"),  # a due time is a follow-up's alone
        ({"not_before": None}, "not_before"),
        ({"job": "extract"}, "follow_up"),
        ({"job": "delete_memory", "follow_up": None}, "not_before"),
        ({"tenant": None}, "tenant"),
        ({"user_id": 7}, "user_id"),
    ],
)
def test_a_message_that_is_no_job_is_refused_naming_the_field(
    fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=f"^{named}: "):
        Job.from_json(_message(**fields))


def test_a_message_that_is_no_json_object_is_refused() -> None:
    with pytest.raises(ValueError):
        Job.from_json("[1, 2]")
    with pytest.raises(ValueError):
        Job.from_json("not json")
