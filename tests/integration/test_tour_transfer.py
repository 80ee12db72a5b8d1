"""The README's tour, then `memkit export`, then `memkit import` into a second local stack: the
copy holds the same sessions, scratchpads, records and search order.

The tour runs as the README writes it (`test_readme.tour`, run by the rules of
test_doc_examples: as written, in a reader's folder, with the environment `make serve`
prints), so this test follows the README when the tour changes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memkit.client import MemkitClient, NotFoundError, UnprocessableEntityError
from memkit_dev.local.auth import JwtSettings
from memkit_dev.local.stack import LocalStack
from tests.conftest import ROOT
from tests.integration.conftest import small_stack
from tests.integration.test_doc_examples import PRELUDE, _as_written, _environment, _expecting, _run
from tests.integration.test_readme import tour
from tests.integration.test_transfer import (
    ADMIN,
    READ_WRITE,
    _indexed,
    memkit,
    records,
    searches,
    token,
)
from tests.integration.test_transfer import sessions as session_documents

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed"),
]
NAMESPACE = "default"  # the tour names none


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tour's `.memkit/`: the development key both stacks trust."""
    return tmp_path_factory.mktemp("tour-keys")


@pytest.fixture(scope="module")
def toured(keys: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A local stack as `make serve` runs it, after the README's tour ran against it."""
    config = small_stack(
        auth="jwt", jwt=JwtSettings(data_dir=keys), data_dir=keys, table_name="memkit-tour"
    )
    with LocalStack(config) as stack:
        reader = tmp_path_factory.mktemp("tour-reader")
        (reader / ".venv").symlink_to(ROOT / ".venv")
        (reader / ".memkit").symlink_to(keys)
        script = PRELUDE + _expecting(_as_written(tour(), stack.url))
        _, problem = _run(["bash", "-c", script], reader, _environment(stack))
        assert problem is None, f"the README's tour failed:\n{problem}"
        yield stack


@pytest.fixture(scope="module")
def copy(keys: Path) -> Iterator[LocalStack]:
    """A second, empty stack that trusts the same key."""
    config = small_stack(auth="jwt", jwt=JwtSettings(data_dir=keys), table_name="memkit-tour-copy")
    with LocalStack(config) as stack:
        yield stack


def _admin(stack: LocalStack, keys: Path) -> MemkitClient:
    return MemkitClient(stack.url, token=token(keys, "ops", ADMIN))


def _memory(reader: MemkitClient) -> dict[str, Any]:
    """What the namespace holds as its users see it: each session's document and log, the
    scratchpads of every profile (each session's, each user's: every one is asked for, a 422
    saying a session uses another profile), the records."""
    shown = session_documents(reader, NAMESPACE)
    users = {s["document"]["user_id"] for s in shown.values()} - {None}
    profiles = list(reader.iter_profiles(namespace=NAMESPACE))
    pads: dict[str, Any] = {}
    for profile in profiles:
        if profile.scope.value == "user":
            owners = [("user", user) for user in sorted(users)]
        else:
            owners = [("session", session) for session in sorted(shown)]
        for kind, owner in owners:
            where = {"user_id": owner} if kind == "user" else {"session_id": owner}
            try:
                pad = reader.get_scratchpad(**where, namespace=NAMESPACE, profile=profile.name)
            except (NotFoundError, UnprocessableEntityError):  # none, or the session uses another
                continue
            if pad.content not in (None, "", {}):
                pads[f"{profile.name} of {kind} {owner}"] = pad.content
    return {"sessions": shown, "scratchpads": pads, "records": records(reader, NAMESPACE)}


def _queries(memory: dict[str, Any]) -> list[str]:
    """A search for each record's text and each message's (what the tour wrote)."""
    texts = [record["text"] for record in memory["records"].values()]
    for session in memory["sessions"].values():
        texts.extend(message["content"] for message in session["log"])
    return texts


def _held(reader: MemkitClient) -> int:
    return sum(1 for _ in reader.iter_memories(namespace={"eq": NAMESPACE}, track_access=False))


def _export(
    capsys: pytest.CaptureFixture[str], stack: LocalStack, bearer: str, *args: str
) -> list[dict[str, Any]]:
    status, out, err = memkit(capsys, stack, bearer, "export", "--namespace", NAMESPACE, *args)
    assert status == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["kind"] == "end"  # the file is whole
    return lines


def test_the_tour_exported_and_imported_into_a_fresh_stack_is_the_same_memory(
    toured: LocalStack,
    copy: LocalStack,
    keys: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the README's tour, run as written, and its records indexed
    with _admin(toured, keys) as admin:
        before = _memory(admin)
        admin.wait_until_indexed(list(before["records"]))
        indexed = _held(admin)
        queries = _queries(before)
        before_search = searches(admin, NAMESPACE, queries)
    assert before["sessions"]
    assert before["records"]
    assert before["scratchpads"]

    # When an admin exports the namespace and it is imported into a fresh stack
    bearer = token(keys, "ops", ADMIN)
    lines = _export(capsys, toured, bearer)
    exported = tmp_path / "tour.jsonl"
    exported.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    status, _, err = memkit(capsys, copy, bearer, "import", str(exported))
    assert status == 0, err
    assert "0 failed" in err

    # Then the copy holds the same sessions, scratchpads, records and search order
    with _admin(copy, keys) as reader:
        _indexed(reader, {NAMESPACE: indexed})
        assert _memory(reader) == before
        assert searches(reader, NAMESPACE, queries) == before_search


def test_a_users_own_export_of_the_tour_holds_all_of_the_users_memory(
    toured: LocalStack, keys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the tour, whose memory is all one user's (ada, its token's subject)
    admins = _export(capsys, toured, token(keys, "ops", ADMIN))
    (user,) = {line["user_id"] for line in admins if line["kind"] == "session"}

    # When that user exports it with their own token
    users = _export(capsys, toured, token(keys, user, READ_WRITE), "--user", user)

    # Then the file holds what the admin's holds
    assert users[1:] == admins[1:]
    assert {line["kind"] for line in users} >= {"session", "scratchpad", "memory"}
