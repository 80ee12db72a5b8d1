"""Current truth end to end (issue 28): supersession by slot and by id, reads in time, a
record's history, retirement and restore, through the real API handler and indexer on moto
(and AWS's own engine), on the local exact index and the DynamoDB vector table."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.integration.memory_world import BACKENDS, MemoryWorld, backend_world

pytestmark = pytest.mark.integration
ENGINES = ("moto", "dynamodb-local")
LTM = "/v1/long-term-memory"


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest, dynamodb_table: str) -> Iterator[MemoryWorld]:
    with backend_world(request.param, dynamodb_table) as built:
        yield built


def _create(world: MemoryWorld, *records: dict[str, Any], status: int = 200) -> Any:
    response = world.api("POST", f"{LTM}/", body={"memories": list(records)})
    assert response.status == status, response.body
    return response.body


def _get(world: MemoryWorld, rid: str) -> dict[str, Any]:
    response = world.api("GET", f"{LTM}/{rid}")
    assert response.status == 200, response.body
    return dict(response.body)


def _search(world: MemoryWorld, **body: Any) -> list[str]:
    world.settle()
    response = world.api("POST", f"{LTM}/search", body={"limit": 20, **body})
    assert response.status == 200, response.body
    return [m["id"] for m in response.body["memories"]]


def _now() -> str:
    """The time now, after the write just made (its recorded_at is strictly earlier)."""
    time.sleep(0.01)
    stamp = datetime.now(UTC).isoformat()
    time.sleep(0.01)
    return stamp


def _home(rid: str, city: str, valid_from: str | None = None, **fields: Any) -> dict[str, Any]:
    record = {"id": rid, "text": f"Ada lives in {city}", "user_id": "ada", "key": "home_city"}
    if valid_from is not None:
        record["valid_from"] = valid_from
    return {**record, **fields}


# -- supersession -----------------------------------------------------------------------------


def test_a_new_fact_in_a_slot_supersedes_the_current_one(world: MemoryWorld) -> None:
    # Given Ada's home city in its slot, then a move written into the same slot
    _create(world, _home("paris", "Paris", "2024-01-01T00:00:00Z"))
    _create(world, _home("berlin", "Berlin", "2026-03-01T00:00:00Z"))

    paris, berlin = _get(world, "paris"), _get(world, "berlin")

    # Then Paris is kept, closed at Berlin's start, retired and linked both ways
    assert paris["valid_until"] == berlin["valid_from"] == "2026-03-01T00:00:00.000000Z"
    assert paris["retired_at"] is not None
    assert paris["superseded_by"] == "berlin"
    assert berlin["supersedes"] == ["paris"]
    assert berlin["retired_at"] is None
    assert berlin["valid_until"] is None
    assert berlin["recorded_at"] == berlin["created_at"]
    # And a search finds the current fact only, unless it asks for all
    assert _search(world, text="where does Ada live") == ["berlin"]
    assert set(_search(world, text="where does Ada live", current_only=False)) == {
        "paris",
        "berlin",
    }


def test_slots_belong_to_their_user_and_namespace(world: MemoryWorld) -> None:
    # Given the same slot name for two users and in two namespaces
    _create(
        world,
        _home("ada-home", "Paris"),
        _home("bob-home", "Rome", user_id="bob"),
        _home("ada-work-ns", "Lyon", namespace="work"),
    )

    # Then none supersedes another: all three are current
    for rid in ("ada-home", "bob-home", "ada-work-ns"):
        assert _get(world, rid)["superseded_by"] is None
    assert set(_search(world, text="lives")) == {"ada-home", "bob-home", "ada-work-ns"}


def test_explicit_supersession_on_create_and_on_edit(world: MemoryWorld) -> None:
    # Given two facts without a slot
    _create(
        world,
        {"id": "veg", "text": "Ada is vegetarian", "user_id": "ada"},
        {"id": "fish", "text": "Ada eats fish on Fridays", "user_id": "ada"},
    )

    # When a correction names the first, and an edit makes it supersede the second too
    _create(world, {"id": "vegan", "text": "Ada is vegan", "user_id": "ada", "supersedes": ["veg"]})
    edited = world.api("PATCH", f"{LTM}/vegan", body={"supersedes": ["veg", "fish"]})

    # Then both are superseded by it, and only it is current
    assert edited.status == 200, edited.body
    assert edited.body["supersedes"] == ["veg", "fish"]
    assert _get(world, "veg")["superseded_by"] == "vegan"
    assert _get(world, "fish")["superseded_by"] == "vegan"
    assert _search(world, text="what does Ada eat") == ["vegan"]


def test_superseding_an_already_superseded_record_supersedes_the_end_of_its_chain(
    world: MemoryWorld,
) -> None:
    # Given a chain a <- b
    _create(world, {"id": "a", "text": "Ada works at Acme", "user_id": "ada"})
    _create(
        world, {"id": "b", "text": "Ada works at Globex", "user_id": "ada", "supersedes": ["a"]}
    )

    # When a writer that read the old state names a
    _create(
        world, {"id": "c", "text": "Ada works at Initech", "user_id": "ada", "supersedes": ["a"]}
    )

    # Then c supersedes b (the current end), and exactly one is current
    assert _get(world, "b")["superseded_by"] == "c"
    assert _get(world, "c")["supersedes"] == ["b"]
    assert _search(world, text="where does Ada work") == ["c"]


@pytest.mark.parametrize(
    ("supersedes", "status", "field"),
    [
        (["nobody"], 404, "memories.0.supersedes.0"),
        (["bob-cat"], 404, "memories.0.supersedes.0"),  # another user's: as absent
        (["x"], 422, "memories.0.supersedes.0"),  # itself
    ],
)
def test_a_supersession_that_cannot_be_made_is_refused_and_nothing_is_written(
    world: MemoryWorld, supersedes: list[str], status: int, field: str
) -> None:
    _create(world, {"id": "bob-cat", "text": "Bob has a cat", "user_id": "bob"})

    response = world.api(
        "POST",
        f"{LTM}/",
        body={"memories": [{"id": "x", "text": "Ada", "user_id": "ada", "supersedes": supersedes}]},
    )

    assert response.status == status, response.body
    assert field in {e["field"] for e in response.body["errors"]}, response.body
    assert world.api("GET", f"{LTM}/x").status == 404
    assert _get(world, "bob-cat")["superseded_by"] is None


def test_validity_must_end_after_it_begins(world: MemoryWorld) -> None:
    response = world.api(
        "POST",
        f"{LTM}/",
        body={
            "memories": [
                {
                    "id": "x",
                    "text": "Ada",
                    "valid_from": "2026-01-02T00:00:00Z",
                    "valid_until": "2026-01-01T00:00:00Z",
                }
            ]
        },
    )

    assert response.status == 422
    assert world.api("GET", f"{LTM}/x").status == 404


def test_writers_racing_on_one_slot_leave_exactly_one_current_record(
    world: MemoryWorld,
) -> None:
    # Given writers that each write a new home into one slot at the same moment
    writers = 6
    start = threading.Barrier(writers)
    statuses: list[int] = []

    def write(number: int) -> None:
        start.wait()
        body = {"memories": [_home(f"home-{number}", f"City {number}")]}
        statuses.append(world.api("POST", f"{LTM}/", body=body).status)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then every write landed, exactly one is current, and the rest form one chain to it
    assert statuses == [200] * writers
    records = [_get(world, f"home-{n}") for n in range(writers)]
    current = [r for r in records if r["retired_at"] is None]
    assert len(current) == 1
    successors = {r["id"]: r["superseded_by"] for r in records if r["retired_at"]}
    assert len(successors) == writers - 1
    assert all(s is not None for s in successors.values())
    end, seen = next(iter(successors)), set()
    while end in successors:
        seen.add(end)
        end = successors[end]
    assert end == current[0]["id"]
    assert _search(world, text="where does Ada live") == [current[0]["id"]]


# -- reads in time ----------------------------------------------------------------------------


def test_as_of_and_known_at_answer_what_was_true_and_what_memkit_held(world: MemoryWorld) -> None:
    # Given Paris since 2024, learned now; then the move to Berlin (from March 2026) learned later
    _create(world, _home("paris", "Paris", "2024-01-01T00:00:00Z"))
    between = _now()
    _create(world, _home("berlin", "Berlin", "2026-03-01T00:00:00Z"))
    query = "where does Ada live"

    # Then as of 2025 Ada lived in Paris, as of April 2026 in Berlin
    assert _search(world, text=query, as_of="2025-06-01T00:00:00Z") == ["paris"]
    assert _search(world, text=query, as_of="2026-04-01T00:00:00Z") == ["berlin"]
    # And before the move was written memkit held Paris as current, even about April 2026
    assert _search(world, text=query, known_at=between) == ["paris"]
    assert _search(world, text=query, known_at=between, as_of="2026-04-01T00:00:00Z") == ["paris"]
    # And before anything was written memkit held nothing
    assert _search(world, text=query, known_at="2020-01-01T00:00:00Z") == []


def test_a_fact_whose_validity_ended_is_not_current_and_a_planned_one_is(
    world: MemoryWorld,
) -> None:
    _create(
        world,
        {
            "id": "trip",
            "text": "Ada is in Oslo for a conference",
            "user_id": "ada",
            "valid_from": "2025-05-01T00:00:00Z",
            "valid_until": "2025-05-05T00:00:00Z",
        },
        {
            "id": "move",
            "text": "Ada moves to Oslo",
            "user_id": "ada",
            "valid_from": "2999-01-01T00:00:00Z",
        },
    )

    assert _search(world, text="Oslo") == ["move"]
    assert _search(world, text="Oslo", as_of="2025-05-02T00:00:00Z") == ["trip"]
    listed = world.api("POST", f"{LTM}/search", body={"text": ""})
    assert [m["id"] for m in listed.body["memories"]] == ["move"]


def test_the_truth_fields_are_filters(world: MemoryWorld) -> None:
    _create(
        world,
        _home("paris", "Paris", "2024-01-01T00:00:00Z"),
        {"id": "job", "text": "Ada works at Acme", "user_id": "ada", "key": "employer"},
    )

    assert _search(world, text="Ada", key={"eq": "employer"}) == ["job"]
    assert _search(world, text="Ada", valid_from={"lt": "2025-01-01T00:00:00Z"}) == ["paris"]


# -- history, retirement, restore -------------------------------------------------------------


def _history(world: MemoryWorld, rid: str, **query: Any) -> dict[str, Any]:
    response = world.api("GET", f"{LTM}/{rid}/history", query=query)
    assert response.status == 200, response.body
    return dict(response.body)


def test_every_change_is_a_version_with_who_when_and_what(world: MemoryWorld) -> None:
    # Given a record created, edited, superseded, then restored
    _create(world, _home("paris", "Paris", "2024-01-01T00:00:00Z"))
    assert world.api("PATCH", f"{LTM}/paris", body={"topics": ["home"]}).status == 200
    _create(world, _home("berlin", "Berlin", "2026-03-01T00:00:00Z"))
    restored = world.api("POST", f"{LTM}/paris/restore", body={"version": 2})

    # Then its history lists every change, newest first
    assert restored.status == 200, restored.body
    history = _history(world, "paris")
    assert [(v["version"], v["change"]) for v in history["versions"]] == [
        (4, "restore"),
        (3, "supersede"),
        (2, "edit"),
        (1, "create"),
    ]
    edit = history["versions"][2]
    assert "topics" in edit["changed"]
    assert edit["via"] == "rest"
    assert edit["by"] is None  # no credential (auth none); test_truth_identity has them
    assert history["versions"][1]["memory"]["superseded_by"] == "berlin"
    # And the restore made Paris current again, superseding Berlin
    assert restored.body["retired_at"] is None
    assert restored.body["valid_until"] is None
    assert _get(world, "berlin")["superseded_by"] == "paris"
    assert _search(world, text="where does Ada live") == ["paris"]


def test_history_pages_from_newest_to_oldest(world: MemoryWorld) -> None:
    _create(world, {"id": "n", "text": "note 0", "user_id": "ada"})
    for number in range(1, 5):
        patched = world.api("PATCH", f"{LTM}/n", body={"text": f"note {number}"})
        assert patched.status == 200

    first = _history(world, "n", limit=2)
    second = _history(world, "n", limit=2, before=first["next_before"])
    third = _history(world, "n", limit=2, before=second["next_before"])

    pages = [first, second, third]
    assert [[v["version"] for v in p["versions"]] for p in pages] == [[5, 4], [3, 2], [1]]
    assert third["next_before"] is None
    assert [v["memory"]["text"] for v in first["versions"]] == ["note 4", "note 3"]


def test_retire_ends_a_fact_and_keeps_it(world: MemoryWorld) -> None:
    _create(
        world,
        {
            "id": "job",
            "text": "Ada works at Acme",
            "user_id": "ada",
            "valid_from": "2024-01-01T00:00:00Z",
        },
    )

    retired = world.api("POST", f"{LTM}/job/retire", body={"valid_until": "2026-01-01T00:00:00Z"})

    assert retired.status == 200, retired.body
    assert retired.body["valid_until"] == "2026-01-01T00:00:00.000000Z"
    assert retired.body["retired_at"] is not None
    assert _search(world, text="where does Ada work") == []
    assert _search(world, text="where does Ada work", as_of="2025-06-01T00:00:00Z") == ["job"]
    assert [v["change"] for v in _history(world, "job")["versions"]] == ["retire", "create"]


def test_a_deleted_record_keeps_its_history_and_can_be_restored(world: MemoryWorld) -> None:
    # Given a record edited, then deleted
    _create(world, {"id": "tea", "text": "Ada drinks green tea", "user_id": "ada"})
    world.api("PATCH", f"{LTM}/tea", body={"text": "Ada drinks black tea"})
    deleted = world.api("DELETE", f"{LTM}", query={"memory_ids": ["tea"]})
    assert deleted.status == 200, deleted.body
    assert world.api("GET", f"{LTM}/tea").status == 404
    assert _search(world, text="tea") == []

    # Then its history shows the delete, with no text in it
    history = _history(world, "tea")
    assert [v["change"] for v in history["versions"]] == ["delete", "edit", "create"]
    assert history["versions"][0]["memory"] is None

    # And restoring its first version brings that text back, searchable
    restored = world.api("POST", f"{LTM}/tea/restore", body={"version": 1})
    assert restored.status == 200, restored.body
    assert _get(world, "tea")["text"] == "Ada drinks green tea"
    assert _search(world, text="green tea") == ["tea"]
    assert next(v["change"] for v in _history(world, "tea")["versions"]) == "restore"


def test_restoring_a_version_that_does_not_exist_is_refused(world: MemoryWorld) -> None:
    _create(world, {"id": "tea", "text": "Ada drinks tea", "user_id": "ada"})

    response = world.api("POST", f"{LTM}/tea/restore", body={"version": 9})

    assert response.status == 404
    assert "version" in {e["field"] for e in response.body["errors"]}
    assert [v["change"] for v in _history(world, "tea")["versions"]] == ["create"]


def test_history_of_a_memory_that_never_was_is_not_found(world: MemoryWorld) -> None:
    assert world.api("GET", f"{LTM}/nothing/history").status == 404
    assert world.api("POST", f"{LTM}/nothing/retire", body={}).status == 404
    assert world.api("POST", f"{LTM}/nothing/restore", body={"version": 1}).status == 404
