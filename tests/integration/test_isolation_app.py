"""Isolation at the application layer (memkit.app.operations), beneath both front doors:
every operation a caller can run is probed directly, so one a new edge would call is covered
whatever that edge does. Each probe runs an operation as user a1 of tenant A naming user a2's
data (or as tenant A against tenant B's), and must be refused (another user named: a 403,
OutOfScope) or find nothing (another's record or job: absent); the same operation run by
the data's owner must succeed, so no probe passes for being unable to work at all."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cached_property
from typing import Any, get_type_hints

import pytest

from memkit.app.operations import Operations
from memkit.app.scratchpads import PadName
from memkit.errors import NotFound, OutOfScope
from memkit.identity import ADMIN, READ, WRITE, Caller
from memkit.models.domain import ProfileSpec
from memkit.models.lifecycle import ForgetPolicy, LifecyclePolicy
from memkit.models.memory import (
    CreateMemories,
    MemoryEdit,
    MemoryRecordIn,
    MemoryRestoration,
    MemoryRetirement,
    SearchRequest,
)
from memkit.models.prompt import PromptRequest, PromptSession
from memkit.models.session import AppendMessages, Message, SessionPatch, SessionWrite
from memkit.scratchpad.tools import ToolFormat
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration

A1 = Caller("A", "a1", frozenset({READ, WRITE}))
A2 = Caller("A", "a2", frozenset({READ, WRITE}))
A_ADMIN = Caller("A", "ops", frozenset({ADMIN}))
B_ADMIN = Caller("B", "ops", frozenset({ADMIN}))
NOTE = "a2's note"
Probe = Callable[[Operations, Caller, str], Any]  # operations, caller, the user named


def _pad(user: str) -> PadName:
    return PadName(user_id=user, profile="me")


def _messages() -> AppendMessages:
    return AppendMessages(messages=[Message(id="m1", role="user", content=NOTE)])


# Each operation a caller may run: how to run it naming `user` (a1 naming a2 is refused).
NAMING_A_USER: dict[str, Probe] = {
    "sessions.list": lambda ops, c, u: ops.sessions.list(c, 10, 0, user_id=u),
    "sessions.get": lambda ops, c, u: ops.sessions.get(c, "s2", user_id=u),
    "sessions.put": lambda ops, c, u: ops.sessions.put(c, "s2", SessionWrite(), user_id=u),
    "sessions.patch": lambda ops, c, u: ops.sessions.patch(
        c, "s2", SessionPatch(title="t"), user_id=u
    ),
    "sessions.append": lambda ops, c, u: ops.sessions.append(c, "s2", _messages(), user_id=u),
    "sessions.messages": lambda ops, c, u: ops.sessions.messages(
        c, "s2", 10, None, True, None, user_id=u
    ),
    "sessions.delete": lambda ops, c, u: ops.sessions.delete(c, "s9", user_id=u),
    "scratchpads.get": lambda ops, c, u: ops.scratchpads.get(c, _pad(u)),
    "scratchpads.prompt": lambda ops, c, u: ops.scratchpads.prompt(c, _pad(u)),
    "scratchpads.replace": lambda ops, c, u: ops.scratchpads.replace(c, _pad(u), "notes", None),
    "scratchpads.patch": lambda ops, c, u: ops.scratchpads.patch(c, _pad(u), "more", None),
    "scratchpads.clear": lambda ops, c, u: ops.scratchpads.clear(c, _pad(u), None),
    "scratchpads.tool_definitions": lambda ops, c, u: ops.scratchpads.tool_definitions(
        c, _pad(u), ToolFormat.OPENAI
    ),
    "scratchpads.call_tool": lambda ops, c, u: ops.scratchpads.call_tool(
        c, _pad(u), "get_working_memory", {}
    ),
    "memories.create": lambda ops, c, u: ops.memories.create(
        c, CreateMemories(memories=[MemoryRecordIn(id=f"r-{c.user_id}", text="t", user_id=u)])
    ),
    "memories.search": lambda ops, c, u: ops.memories.search(
        c, SearchRequest(text="note", user_id={"eq": u})
    ),
    "memories.edit": lambda ops, c, u: ops.memories.edit(
        c, "r2", MemoryEdit(user_id=u, pinned=True), claim_user=True
    ),
    "memories.prompt": lambda ops, c, u: ops.memories.prompt(
        c, PromptRequest(query="note", session=PromptSession(session_id="s2", user_id=u))
    ),
    "upkeep.forget": lambda ops, c, u: ops.upkeep.forget(
        c, ForgetPolicy(max_age_days=1), pinned_ids=(), limit=10, dry_run=True, user_id=u
    ),
    "upkeep.compact": lambda ops, c, u: ops.upkeep.compact(
        c, limit=10, dry_run=True, near_duplicates=False, distance_threshold=0.1, user_id=u
    ),
    "upkeep.delete_user": lambda ops, c, u: ops.upkeep.delete_user(c, u),
}
# Operations that name no user: what another user's (or tenant's) data is to them.
BY_ID: dict[str, Probe] = {
    "memories.get": lambda ops, c, _: ops.memories.get(c, "r2"),
    # how many it deleted, of the one id named
    "memories.delete": lambda ops, c, _: int(ops.memories.delete(c, ["r2"]).status.split()[2]),
    "memories.history": lambda ops, c, _: ops.memories.history(c, "r2"),
    "memories.retire": lambda ops, c, _: ops.memories.retire(c, "r2", MemoryRetirement()),
    "memories.restore": lambda ops, c, _: ops.memories.restore(
        c, "r2", MemoryRestoration(version=1)
    ),
    "profiles.get": lambda ops, c, _: ops.profiles.get(c, "b-only"),
    "upkeep.get_policy": lambda ops, c, _: ops.upkeep.get_policy(c, "b-space"),
    "upkeep.job": lambda ops, c, _: ops.upkeep.job(c, "no-such-job"),
}
# Tenant-wide settings: run by tenant A's admin, they are tenant A's (tenant B's untouched).
TENANT_WIDE = {
    "profiles.put",
    "profiles.list",
    "profiles.delete",
    "upkeep.put_policy",
    "upkeep.delete_policy",
    "admit",
}


def _public(kind: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(kind, inspect.isfunction) if not n.startswith("_")}


def _operations() -> set[str]:
    """Every public operation of memkit.app.operations: `method`, or `group.method` for the
    groups (Operations' cached properties), so a new one fails here until it has a probe."""
    names = _public(Operations)
    for group, prop in inspect.getmembers(Operations, lambda m: isinstance(m, cached_property)):
        kind = get_type_hints(prop.func)["return"]
        names |= {f"{group}.{name}" for name in _public(kind)}
    return names


def test_every_operation_has_an_isolation_probe() -> None:
    probed = set(NAMING_A_USER) | set(BY_ID) | TENANT_WIDE
    assert _operations() == probed


@pytest.fixture
def operations(world: MemoryWorld) -> Operations:
    ops: Operations = world.services.operations
    # a2's data: a session with a message, a user scratchpad, a record; tenant B's profile
    # and policy.
    ops.profiles.put(A_ADMIN, "me", ProfileSpec.model_validate({"scope": "user"}), None)
    ops.sessions.append(A2, "s2", _messages())
    ops.memories.create(A2, CreateMemories(memories=[MemoryRecordIn(id="r2", text=NOTE)]))
    ops.profiles.put(B_ADMIN, "b-only", ProfileSpec(), None)
    ops.upkeep.put_policy(B_ADMIN, "b-space", LifecyclePolicy(compact=True))
    world.index(world.read_stream())
    return ops


@pytest.mark.parametrize("name", sorted(NAMING_A_USER))
def test_an_operation_naming_another_user_is_refused(operations: Operations, name: str) -> None:
    probe = NAMING_A_USER[name]
    with pytest.raises(OutOfScope):
        probe(operations, A1, "a2")
    if name != "upkeep.delete_user":  # the owner's own run works (a user may not delete
        # itself through the API: that takes memory:admin, which may name it)
        probe(operations, A_ADMIN if name.startswith("upkeep.") else A2, "a2")


@pytest.mark.parametrize("name", sorted(BY_ID))
def test_another_users_or_tenants_data_is_absent_to_an_operation(
    operations: Operations, name: str
) -> None:
    probe = BY_ID[name]
    outsider = A1 if name.startswith("memories.") else A_ADMIN
    try:
        outcome = probe(operations, outsider, "")
    except NotFound:
        outcome = None
    assert outcome in (None, 0)
    if name != "upkeep.job":
        owner = A2 if name.startswith("memories.") else B_ADMIN
        assert probe(operations, owner, "") not in (None, 0)


def test_erasing_another_users_record_erases_nothing(operations: Operations) -> None:
    # Given a2's record deleted (its history kept)
    operations.memories.delete(A2, ["r2"])

    # When a1 erases it by id
    ack = operations.memories.delete(A1, ["r2"], erase=True)

    # Then nothing went: a2 still restores it
    assert ack.status == "ok, deleted 0 memories"
    assert operations.memories.history(A2, "r2").versions[0].change == "delete"
    assert operations.memories.restore(A2, "r2", MemoryRestoration(version=1)).text == NOTE


def test_tenant_wide_settings_stay_in_the_callers_tenant(operations: Operations) -> None:
    # Tenant A's admin writes, lists and deletes settings of the same names as tenant B's
    operations.profiles.put(A_ADMIN, "b-only", ProfileSpec(max_messages=5), None)
    listed = [p.name for p in operations.profiles.list(A_ADMIN, 100, None).profiles]
    operations.profiles.delete(A_ADMIN, "b-only", None)
    operations.upkeep.put_policy(A_ADMIN, "b-space", LifecyclePolicy(compact=False))
    operations.upkeep.delete_policy(A_ADMIN, "b-space")
    operations.admit(A_ADMIN)

    # and they were tenant A's: tenant B's are as they were
    assert "b-only" in listed
    assert operations.profiles.get(B_ADMIN, "b-only").max_messages is None
    assert operations.upkeep.get_policy(B_ADMIN, "b-space").compact is True
