"""The scratchpad service over the in-memory store: retries, preconditions, limits, tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memkit.errors import Forbidden, SchemaViolation, TooLarge, ValidationFailed, VersionConflict
from memkit.models.domain import Content, Owner, PadRef, ProfileSpec
from memkit.service.profiles import ProfileService
from memkit.service.scratchpad import ScratchpadService
from memkit.store.protocol import PadState
from memkit.tokens import content_tokens
from tests.fakes.memory_store import InMemoryStore

TENANT = "t1"
NAMESPACE = "default"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
}


def pad(profile: str | None = None) -> PadRef:
    return PadRef(owner=Owner(tenant=TENANT), session_id="s1", profile=profile)


def service_over(store: InMemoryStore, max_attempts: int = 25) -> ScratchpadService:
    return ScratchpadService(
        store.pads, store.profiles, max_attempts=max_attempts, sleep=lambda _seconds: None
    )


def add_profile(store: InMemoryStore, name: str, **spec: Any) -> PadRef:
    store.put_profile(TENANT, NAMESPACE, name, ProfileSpec.model_validate(spec), None)
    return pad(name)


def seed(store: InMemoryStore, ref: PadRef, content: Content) -> None:
    """Content written straight to the store (bypassing the service's rules)."""
    store.write_pad(store.read_pad(ref), content, content_tokens(content))


def stored(store: InMemoryStore, ref: PadRef) -> Content:
    return store.read_pad(ref).content


def concurrent_writer(store: InMemoryStore, ref: PadRef, times: int) -> Callable[[PadState], None]:
    """A before_write hook: another writer changes the pad just before each of our writes."""
    done: list[int] = []

    def interfere(_state: PadState) -> None:
        if len(done) < times:
            done.append(1)
            current = store.read_pad(ref)
            assert isinstance(current.content, dict)
            winner = {**current.content, "other": len(done)}
            store.write_pad(current, winner, content_tokens(winner))

    return interfere


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


# -- optimistic concurrency ------------------------------------------------------------------


def test_a_patch_that_loses_races_is_reapplied_to_the_winners_content(
    store: InMemoryStore,
) -> None:
    # Given a json pad and another writer that wins the race three times
    ref = add_profile(store, "prefs", format="json")
    seed(store, ref, {"a": 1})
    store.before_write = concurrent_writer(store, ref, times=3)
    sleeps: list[float] = []
    service = ScratchpadService(store.pads, store.profiles, sleep=sleeps.append)

    # When our patch is applied
    result = service.patch(ref, {"mine": True}, None)

    # Then it lands on top of every concurrent change, after three backoffs
    assert result.content == {"a": 1, "other": 3, "mine": True}, "no update is lost"
    assert result.version == 5, "seed, three concurrent writes, then ours"
    assert stored(store, ref) == result.content
    assert len(sleeps) == 3, "one backoff per lost race"


def test_a_patch_succeeds_after_injected_conflicts(store: InMemoryStore) -> None:
    # Given a store that reports two conflicts before a write goes through
    seed(store, pad(), "first")
    store.conflicts_before_success = 2

    # When a text patch is applied
    result = service_over(store).patch(pad(), "second", None)

    # Then the third attempt writes it
    assert result.content == "first\nsecond", "the patch is applied once, after the retries"
    assert store.calls["write_pad"] == 1 + 3


def test_the_write_gives_up_with_a_conflict_after_max_attempts(store: InMemoryStore) -> None:
    # Given a pad that keeps changing under every attempt
    seed(store, pad(), "kept")
    store.conflicts_before_success = 100
    writes_before = store.calls["write_pad"]

    # When a patch is tried with four attempts allowed
    with pytest.raises(VersionConflict):
        service_over(store, max_attempts=4).patch(pad(), "lost", None)

    # Then it gave up after four writes and changed nothing
    assert store.calls["write_pad"] - writes_before == 4, "exactly max_attempts writes"
    assert stored(store, pad()) == "kept"


def test_with_if_match_a_lost_race_is_a_conflict_without_retry(store: InMemoryStore) -> None:
    # Given a pad at version 1 and a writer that wins the race
    seed(store, pad(), "v1")
    store.conflicts_before_success = 1
    writes_before = store.calls["write_pad"]
    sleeps: list[float] = []
    service = ScratchpadService(store.pads, store.profiles, sleep=sleeps.append)

    # When a patch conditioned on version 1 loses
    with pytest.raises(VersionConflict):
        service.patch(pad(), "mine", '"1"')

    # Then the client hears of it at once: one write attempt, no backoff
    assert store.calls["write_pad"] - writes_before == 1, "a conditional write is not retried"
    assert sleeps == []


def test_an_if_match_for_another_version_fails_before_writing(store: InMemoryStore) -> None:
    # Given a pad at version 2
    seed(store, pad(), "v1")
    seed(store, pad(), "v2")
    writes_before = store.calls["write_pad"]

    # When a replace names version 1
    with pytest.raises(VersionConflict):
        service_over(store).replace(pad(), "stale", '"1"')

    # Then nothing was written
    assert store.calls["write_pad"] == writes_before, "the precondition fails before any write"
    assert stored(store, pad()) == "v2"


def test_an_if_match_for_the_current_version_writes(store: InMemoryStore) -> None:
    # Given a pad at version 1
    seed(store, pad(), "v1")

    # When a replace names version 1
    result = service_over(store).replace(pad(), "v2", 'W/"1"')

    # Then it is written as version 2
    assert (result.content, result.version) == ("v2", 2)


# -- what a write may not do -----------------------------------------------------------------


def test_a_read_only_profile_refuses_writes_and_writes_nothing(store: InMemoryStore) -> None:
    # Given a read-only profile whose pad has content
    ref = add_profile(store, "policy", read_only=True)
    seed(store, ref, "house rules")
    writes_before = store.calls["write_pad"]

    # When the pad is patched, replaced or cleared
    service = service_over(store)
    writes: list[Callable[[], object]] = [
        lambda: service.patch(ref, "more", None),
        lambda: service.replace(ref, "other", None),
        lambda: service.clear(ref, None),
    ]
    for write in writes:
        with pytest.raises(Forbidden):
            write()

    # Then nothing was written
    assert store.calls["write_pad"] == writes_before, "a read-only pad is never written"
    assert stored(store, ref) == "house rules"


def test_content_over_max_tokens_is_too_large_and_not_stored(store: InMemoryStore) -> None:
    # Given a profile allowing 10 tokens and a pad using some of them
    ref = add_profile(store, "tiny", max_tokens=10)
    seed(store, ref, "short note")

    # When a patch would take it over the budget
    with pytest.raises(TooLarge) as raised:
        service_over(store).patch(ref, "a much longer addition " * 5, None)

    # Then it is refused with the reason, and the pad is unchanged
    assert raised.value.errors[0].field == "content"
    assert stored(store, ref) == "short note", "a refused write leaves the pad as it was"


def test_a_schema_violation_names_the_field_and_stores_nothing(store: InMemoryStore) -> None:
    # Given a json profile with a schema and valid content
    ref = add_profile(store, "person", schema=SCHEMA)
    seed(store, ref, {"name": "Ada", "age": 36})

    # When a patch sets a field to the wrong type
    with pytest.raises(SchemaViolation) as raised:
        service_over(store).patch(ref, {"age": "old"}, None)

    # Then the error names the field, and the pad is unchanged
    assert [p.field for p in raised.value.errors] == ["content.age"]
    assert stored(store, ref) == {"name": "Ada", "age": 36}


def test_content_that_no_longer_fits_a_changed_schema_is_reported_on_read(
    store: InMemoryStore,
) -> None:
    # Given content written under one schema, then the schema changed
    ref = add_profile(store, "person", schema=SCHEMA)
    seed(store, ref, {"name": "Ada", "age": 36})
    add_profile(store, "person", schema={"properties": {"age": {"type": "string"}}})

    # When the pad is read
    result = service_over(store).get(ref)

    # Then the content comes back with the problem listed, not an exception
    assert result.content == {"name": "Ada", "age": 36}
    assert [p.field for p in result.problems] == ["content.age"], "the stale field is named"


def test_a_profile_stored_before_its_pattern_was_refused_is_reported_not_evaluated(
    store: InMemoryStore,
) -> None:
    # Given a profile stored (straight into the store) with a lookahead, which RE2 cannot run
    legacy = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(?=A)"}}}
    ref = add_profile(store, "legacy", schema=legacy)
    seed(store, ref, {"code": "A1"})

    # When the pad is read, and then written
    result = service_over(store).get(ref)
    with pytest.raises(SchemaViolation) as raised:
        service_over(store).patch(ref, {"code": "A2"}, None)

    # Then the read lists the schema's field; the write is refused on it and stores nothing
    assert result.content == {"code": "A1"}
    assert [p.field for p in result.problems] == ["schema.properties.code.pattern"]
    assert [p.field for p in raised.value.errors] == ["schema.properties.code.pattern"]
    assert stored(store, ref) == {"code": "A1"}


def test_an_object_into_a_text_pad_is_a_validation_error(store: InMemoryStore) -> None:
    # Given the default profile (free text)
    # When an object is patched in
    with pytest.raises(ValidationFailed) as raised:
        service_over(store).patch(pad(), {"a": 1}, None)

    # Then it is a validation error about the content's type, and nothing was written
    assert not isinstance(raised.value, SchemaViolation)
    assert raised.value.errors[0].field == "content"
    assert store.calls["write_pad"] == 0


def test_clear_empties_the_pad_and_the_version_keeps_increasing(store: InMemoryStore) -> None:
    # Given a pad at version 2
    service = service_over(store)
    service.replace(pad(), "one", None)
    service.replace(pad(), "two", None)

    # When it is cleared and written again
    cleared = service.clear(pad(), None)
    read = service.get(pad())
    rewritten = service.patch(pad(), "three", None)

    # Then the clear is a new version, and the next write follows it
    assert (cleared.content, cleared.version) == (None, 3)
    assert (read.content, read.version) == (None, 3), "a cleared pad keeps its version"
    assert (rewritten.content, rewritten.version) == ("three", 4)


def test_the_first_write_creates_the_session_with_its_profile(store: InMemoryStore) -> None:
    # Given a markdown profile and no session yet
    ref = add_profile(store, "notes", format="markdown")

    # When the pad is written naming the profile, then read without naming one
    service_over(store).replace(ref, "# Notes", None)
    result = service_over(store).get(pad())

    # Then the session remembers the profile
    assert result.profile.name == "notes", "the session keeps the profile it was created with"
    assert result.content == "# Notes"


def test_an_expired_pad_reads_empty_and_the_next_write_continues_its_version() -> None:
    # Given a session that expires at t=100 with a pad at version 1
    now = [50.0]
    store = InMemoryStore(clock=lambda: now[0])
    store.put_session(TENANT, NAMESPACE, "s1", expires_at=100)
    seed(store, pad(), "old")

    # When the session has expired
    now[0] = 150.0
    expired = service_over(store).get(pad())
    written = service_over(store).replace(pad(), "new", None)

    # Then the old content is hidden, and the write replaces the item DynamoDB kept
    assert expired.content is None, "expired content is never shown"
    assert (written.content, written.version) == ("new", 2)


# -- tool calls ------------------------------------------------------------------------------


def test_the_get_tool_returns_content_and_version(store: InMemoryStore) -> None:
    seed(store, pad(), "remember milk")

    outcome = service_over(store).call_tool(pad(), "get_working_memory", {})

    assert outcome == {"result": {"content": "remember milk", "version": 1}}


def test_the_update_tool_merges_by_default(store: InMemoryStore) -> None:
    seed(store, pad(), "remember milk")

    outcome = service_over(store).call_tool(
        pad(), "update_working_memory", '{"content": "and eggs"}'
    )

    assert outcome == {"result": {"content": "remember milk\nand eggs", "version": 2}}


def test_the_clear_tool_empties_the_pad(store: InMemoryStore) -> None:
    seed(store, pad(), "remember milk")

    outcome = service_over(store).call_tool(pad(), "clear_working_memory", None)

    assert outcome == {"result": "working memory cleared"}
    assert stored(store, pad()) is None


def test_mastras_update_with_memory_replaces_a_markdown_pad(store: InMemoryStore) -> None:
    # Given a markdown pad with content
    ref = add_profile(store, "notes", template="# User\n- name:")
    seed(store, ref, "# User\n- name:")

    # When Mastra's model calls updateWorkingMemory with `memory`
    outcome = service_over(store).call_tool(
        ref, "updateWorkingMemory", {"memory": "# User\n- name: Ada"}
    )

    # Then the block is replaced, as Mastra expects
    assert outcome["result"]["content"] == "# User\n- name: Ada"


def test_noetics_update_with_memory_merges_a_json_pad(store: InMemoryStore) -> None:
    # Given a json pad with a schema
    ref = add_profile(store, "person", schema=SCHEMA)
    seed(store, ref, {"name": "Ada"})

    # When Noetic calls working-memory/update with `memory`
    outcome = service_over(store).call_tool(ref, "working-memory/update", {"memory": {"age": 36}})

    # Then the object is merged
    assert outcome["result"]["content"] == {"name": "Ada", "age": 36}


def test_an_unknown_tool_is_an_error_the_model_can_read(store: InMemoryStore) -> None:
    outcome = service_over(store).call_tool(pad(), "forget_everything", {})

    assert set(outcome) == {"error"}
    assert "update_working_memory" in outcome["error"], "the error lists the tools that exist"
    assert store.calls["write_pad"] == 0


def test_a_schema_violation_in_a_tool_call_is_an_error_naming_the_field(
    store: InMemoryStore,
) -> None:
    # Given a json pad with a schema
    ref = add_profile(store, "person", schema=SCHEMA)
    seed(store, ref, {"name": "Ada"})

    # When the model sends a field of the wrong type
    outcome = service_over(store).call_tool(ref, "update_working_memory", {"content": {"age": -1}})

    # Then it reads an error naming the field, and the pad is unchanged
    assert set(outcome) == {"error"}
    assert "content.age" in outcome["error"]
    assert stored(store, ref) == {"name": "Ada"}


def test_a_profile_put_without_if_match_retries_a_lost_race() -> None:
    # Given a store where another writer wins the first race for the profile
    class RacingStore(InMemoryStore):
        lost = 0

        def put_profile(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            if self.lost == 0:
                self.lost += 1
                raise VersionConflict("the item changed since it was read")
            return super().put_profile(*args, **kwargs)  # type: ignore[arg-type]

    store = RacingStore()

    # When a profile is put without If-Match
    profile = ProfileService(store.profiles).put("t", "default", "notes", ProfileSpec(), None)

    # Then the put is retried and lands
    assert store.lost == 1
    assert profile.version == 1
