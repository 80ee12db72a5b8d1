"""`memkit export` and `memkit import` between two local stacks (auth jwt, as `make serve` runs
them): a namespace exported by an admin and a user's memory exported with the user's own token,
imported into a fresh stack, give the same session documents, message logs, scratchpads,
profiles, records and search results; a second import writes nothing; AMS- and Mem0-shaped
files import as their fields say; a bad line is reported with its number and skipped."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memkit.client import MemkitClient
from memkit_dev import cli
from memkit_dev.local.auth import JwtSettings, mint
from memkit_dev.local.stack import LocalStack, LocalStackConfig
from memkit_dev.transfer.format import profile_spec
from tests.conftest import ROOT

pytestmark = pytest.mark.integration
ADMIN = ["memory:read", "memory:write", "memory:admin"]
READ_WRITE = ["memory:read", "memory:write"]
# What the server sets when a session or record is written: an import writes them anew.
SESSION_TIMES = ("created_at", "updated_at", "last_accessed", "expires_at", "version")
RECORD_SERVER_FIELDS = ("updated_at", "persisted_at", "indexing", "score", "dist", "score_type")
QUERIES = ("green tea", "flight to Oslo", "what does Bob play", "bees", "Lisbon trip")


def _stack(table: str, keys: Path) -> LocalStack:
    config = LocalStackConfig(
        port=0,
        concurrency=2,
        template=ROOT / "template.yaml",
        cleanup_interval_seconds=0,
        table_name=table,
        auth="jwt",
        jwt=JwtSettings(data_dir=keys),
    )
    return LocalStack(config)


@pytest.fixture(scope="module")
def source(dev_keys: Path) -> Iterator[LocalStack]:
    with _stack("memkit-transfer-source", dev_keys) as running:
        yield running


@pytest.fixture(scope="module")
def target(dev_keys: Path) -> Iterator[LocalStack]:
    with _stack("memkit-transfer-target", dev_keys) as running:
        yield running


def token(keys: Path, user: str, scopes: list[str] = READ_WRITE) -> str:
    return mint(keys, user, "default", scopes)


def client(stack: LocalStack, keys: Path, user: str = "ops", scopes: list[str] = ADMIN) -> Any:
    return MemkitClient(stack.url, token=token(keys, user, scopes))


def memkit(
    capsys: pytest.CaptureFixture[str], stack: LocalStack, bearer: str, *args: str
) -> tuple[int, str, str]:
    """Run a `memkit` command in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    status = cli.main([*args, "--url", stack.url, "--token", bearer])
    out, err = capsys.readouterr()
    return status, out, err


def ago(**delta: float) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def populated(source: LocalStack, dev_keys: Path) -> LocalStack:
    with client(source, dev_keys) as admin:
        populate(admin, dev_keys, source)
    return source


def populate(admin: MemkitClient, keys: Path, stack: LocalStack) -> None:
    """Two users in namespace alpha, one in beta: profiles, sessions (one whose document shows
    only its newest messages), scratchpads of both scopes, records with every field."""
    admin.put_profile(
        "notes", {"scope": "session", "template": "# Notes\n", "max_tokens": 500}, namespace="alpha"
    )
    schema = {"type": "object", "properties": {"likes": {"type": "array"}}}
    admin.put_profile("prefs", {"scope": "user", "schema": schema}, namespace="alpha")
    base = datetime.now(UTC) - timedelta(days=3)

    def turns(prefix: str, count: int, topic: str) -> list[dict[str, Any]]:
        return [
            {
                "id": f"{prefix}-{n:03}",
                "role": "user" if n % 2 == 0 else "assistant",
                "content": f"{topic} turn {n}",
                "created_at": (base + timedelta(minutes=n)).isoformat(),
                **({"metadata": {"n": n}} if n % 10 == 0 else {}),
            }
            for n in range(count)
        ]

    document = {
        "user_id": "ada",
        "title": "Tea",
        "data": {"topic": "tea", "mood": "good"},
        "context": "Ada talked about tea.",
        "metadata": {"channel": "web"},
        "ttl_seconds": 86_400 * 30,
        "long_term_memory_strategy": {"strategy": "summary", "config": {"max": 3}},
        "tokens": 42,
    }
    # chat-1 has a summary window of its own (a write's context_window_max); the others the
    # server's.
    admin.put_session("chat-1", document, namespace="alpha", context_window_max=32_000)
    admin.append_messages("chat-1", turns("a1", 150, "green tea"), namespace="alpha")
    admin.replace_scratchpad("- likes green tea", "chat-1", namespace="alpha")
    admin.replace_scratchpad("# Notes\n- Oslo", "chat-1", namespace="alpha", profile="notes")
    # chat-2's document shows its newest 3 messages; the log keeps all 8 (an AMS client's PUT).
    chat2 = turns("a2", 8, "flight to Oslo")
    admin.append_messages("chat-2", chat2, namespace="alpha", user_id="ada")
    admin.put_session(
        "chat-2", {"user_id": "ada", "title": "Oslo", "messages": chat2[-3:]}, namespace="alpha"
    )
    admin.replace_scratchpad(
        {"likes": ["tea", "jazz"]}, user_id="ada", namespace="alpha", profile="prefs"
    )
    admin.put_session("bob-1", {"user_id": "bob", "title": "Chess"}, namespace="alpha")
    admin.append_messages("bob-1", turns("b1", 5, "Bob plays chess"), namespace="alpha")
    cy = client(stack, keys, "cy", READ_WRITE)
    cy.put_session("cy-1", {"title": "Bees", "data": {"hive": 2}}, namespace="beta")
    cy.append_messages("cy-1", turns("c1", 4, "Cy keeps bees"), namespace="beta")

    records = [
        {
            "id": "r-tea",
            "text": "Ada drinks green tea every morning",
            "user_id": "ada",
            "namespace": "alpha",
            "topics": ["drinks", "habits"],
            "entities": ["Ada"],
            "memory_type": "semantic",
            "session_id": "chat-1",
            "pinned": True,
            "metadata": {"source": "chat"},
            "extracted_from": ["a1-000"],
            "created_at": ago(days=20),
            "last_accessed": ago(days=10),
        },
        {
            "id": "r-oslo",
            "text": "Ada flies to Oslo on Monday",
            "user_id": "ada",
            "namespace": "alpha",
            "memory_type": "episodic",
            "event_date": ago(days=-2),
            "created_at": ago(days=5),
        },
        {
            "id": "r-lisbon",
            "text": "Ada loved the Lisbon trip",
            "user_id": "ada",
            "namespace": "alpha",
            "created_at": ago(days=40),
        },
        {
            "id": "r-chess",
            "text": "Bob plays chess on Sundays",
            "user_id": "bob",
            "namespace": "alpha",
            "topics": ["games"],
        },
        {
            "id": "r-bees",
            "text": "Cy keeps two hives of bees",
            "user_id": "cy",
            "namespace": "beta",
        },
    ]
    admin.create_memories(records, deduplicate=False)
    admin.wait_until_indexed([r["id"] for r in records])
    _indexed(admin, {"alpha": 150 + 8 + 5 + 4, "beta": 4 + 1})


def _indexed(reader: MemkitClient, wanted: dict[str, int], timeout: float = 60.0) -> None:
    """Wait until each namespace's index holds `wanted` docs (records and messages)."""
    deadline = time.monotonic() + timeout
    while True:
        held = {
            ns: sum(1 for _ in reader.iter_memories(namespace={"eq": ns}, track_access=False))
            for ns in wanted
        }
        if all(held[ns] >= n for ns, n in wanted.items()):
            return
        assert time.monotonic() < deadline, f"indexed {held}, wanted {wanted}"
        time.sleep(0.3)


def sessions(reader: MemkitClient, namespace: str) -> dict[str, Any]:
    """Every session of the namespace: its document (server times left out), its message log
    and its scratchpads (the session's own, and the `notes` profile's)."""
    shown: dict[str, Any] = {}
    for session_id in reader.iter_sessions(namespace=namespace):
        document = reader.get_session(session_id, namespace=namespace).model_dump(mode="json")
        for key in SESSION_TIMES:
            document.pop(key)
        if document["scratchpad"]:
            document["scratchpad"].pop("version")
        log = [
            m.model_dump(mode="json") for m in reader.iter_messages(session_id, namespace=namespace)
        ]
        shown[session_id] = {"document": document, "log": log}
    return shown


def records(reader: MemkitClient, namespace: str) -> dict[str, Any]:
    hits = reader.iter_memories(
        namespace={"eq": namespace}, memory_type={"ne": "message"}, track_access=False
    )
    kept = {}
    for hit in hits:
        fields = hit.model_dump(mode="json")
        for key in RECORD_SERVER_FIELDS:
            fields.pop(key)
        for key in (
            "created_at",
            "last_accessed",
            "event_date",
            "valid_from",
            "valid_until",
            "recorded_at",
            "retired_at",
        ):
            # The same instant; the server writes its own stamps in milliseconds, a client's
            # in microseconds.
            if fields[key] is not None:
                fields[key] = datetime.fromisoformat(fields[key].replace("Z", "+00:00"))
        kept[hit.id] = fields
    return kept


def searches(
    reader: MemkitClient, namespace: str, queries: Sequence[str] = QUERIES
) -> list[list[str]]:
    """The ids each query finds in `namespace`, in order (nothing counted as a use)."""
    return [
        [
            hit.id
            for hit in reader.search_memories(
                q, namespace={"eq": namespace}, limit=10, track_access=False
            ).memories
        ]
        for q in queries
    ]


def profiles(reader: MemkitClient, namespace: str) -> dict[str, Any]:
    return {p.name: profile_spec(p) for p in reader.iter_profiles(namespace=namespace)}


def test_an_export_imported_into_a_fresh_stack_gives_the_same_memory(
    populated: LocalStack,
    target: LocalStack,
    dev_keys: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = populated
    with client(source, dev_keys) as admin:
        before_profiles = profiles(admin, "alpha")
        before = {ns: (sessions(admin, ns), records(admin, ns)) for ns in ("alpha", "beta")}
        before_search = {ns: searches(admin, ns) for ns in ("alpha", "beta")}
        pads = admin.get_scratchpad(user_id="ada", namespace="alpha", profile="prefs")
    admin_token = token(dev_keys, "ops", ADMIN)
    cy_token = token(dev_keys, "cy")

    alpha, beta = tmp_path / "alpha.jsonl", tmp_path / "cy.jsonl"
    status, out, err = memkit(
        capsys, source, admin_token, "export", "--namespace", "alpha", "-o", str(alpha)
    )
    assert status == 0, err
    assert "exported 2 profiles, 3 sessions, 163 messages, 3 scratchpads, 4 memories" in err
    status, out, err = memkit(capsys, source, cy_token, "export", "--namespace", "beta")
    assert status == 0, err
    beta.write_text(out, encoding="utf-8")  # stdout: the data; the summary went to stderr
    assert "exported 0 profiles, 1 sessions, 4 messages, 0 scratchpads, 1 memories" in err

    lines = [json.loads(line) for line in alpha.read_text().splitlines()]
    assert lines[0]["kind"] == "memkit-export"
    assert lines[0]["version"] == 1
    assert lines[-1] == {
        "kind": "end",
        "counts": {"profiles": 2, "sessions": 3, "messages": 163, "scratchpads": 3, "memories": 4},
    }
    assert max(len(x.get("messages", [])) for x in lines) == 100  # chunks of 100
    windows = {x["session_id"]: x["context_window_max"] for x in lines if x["kind"] == "session"}
    assert windows == {"chat-1": 32_000, "chat-2": None, "bob-1": None}

    status, _, err = memkit(capsys, target, admin_token, "import", str(alpha))
    assert status == 0, err
    assert "imported 2 profiles, 3 sessions, 163 messages, 3 scratchpads, 4 memories" in err
    assert "0 skipped as already present, 0 failed" in err
    status, _, err = memkit(capsys, target, cy_token, "import", str(beta))
    assert status == 0, err

    with client(target, dev_keys) as copy:
        _indexed(copy, {"alpha": 150 + 8 + 5 + 4, "beta": 4 + 1})
        for ns in ("alpha", "beta"):
            assert sessions(copy, ns) == before[ns][0]
            assert records(copy, ns) == before[ns][1]
        assert profiles(copy, "alpha") == before_profiles
        assert set(before_profiles) == {"default", "notes", "prefs"}  # default: built in
        copied = copy.get_scratchpad(user_id="ada", namespace="alpha", profile="prefs")
        assert copied.content == pads.content == {"likes": ["tea", "jazz"]}
        assert {ns: searches(copy, ns) for ns in ("alpha", "beta")} == before_search
        document = copy.get_session("chat-2", namespace="alpha")
        assert [m.id for m in document.messages] == ["a2-005", "a2-006", "a2-007"]
        assert document.message_count == 8
        assert copy.get_session("chat-1", namespace="alpha").context_window_max == 32_000
        versions = {
            s: copy.get_session(s, namespace="alpha").version for s in ("chat-1", "chat-2", "bob-1")
        }

    # Again: everything is there already, and nothing is written.
    status, _, err = memkit(capsys, target, admin_token, "import", str(alpha))
    assert status == 0, err
    assert (
        "imported 0 profiles, 0 sessions, 0 messages, 0 scratchpads, 0 memories; "
        "175 skipped as already present, 0 failed" in err
    )
    with client(target, dev_keys) as copy:
        assert versions == {s: copy.get_session(s, namespace="alpha").version for s in versions}


def test_a_users_export_holds_that_user_only(
    populated: LocalStack, dev_keys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = memkit(
        capsys,
        populated,
        token(dev_keys, "ops", ADMIN),
        "export",
        "--namespace",
        "alpha",
        "--user",
        "ada",
    )
    assert status == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    owners = {
        x.get("user_id") for x in lines if x["kind"] not in ("memkit-export", "end", "profile")
    }
    assert owners == {"ada"}
    assert {x["id"] for x in lines if x["kind"] == "memory"} == {"r-tea", "r-oslo", "r-lisbon"}
    assert {x["session_id"] for x in lines if x["kind"] == "session"} == {"chat-1", "chat-2"}


def test_an_export_holds_each_sessions_scratchpad_whatever_profile_it_uses(
    source: LocalStack,
    target: LocalStack,
    dev_keys: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given sessions that each use their own profile: session-scoped (one with a scratchpad,
    # one without), user-scoped and defined without a namespace (inherited), and none (then
    # a scratchpad per session-scoped profile)
    namespace = "kinds"
    shared = {"scope": "user", "schema": {"type": "object"}}
    with client(source, dev_keys) as admin:
        admin.put_profile(
            "notes", {"scope": "session", "template": "# Notes\n"}, namespace=namespace
        )
        admin.put_profile("shared", shared)
        for session_id, profile in [
            ("k-notes", "notes"),
            ("k-bare", "notes"),
            ("k-shared", "shared"),
        ]:
            admin.put_session(
                session_id, {"user_id": "ada", "profile": profile}, namespace=namespace
            )
        admin.append_messages(
            "k-bare", [{"id": "kb-1", "role": "user", "content": "hi"}], namespace=namespace
        )
        admin.put_session("k-plain", {"user_id": "ada"}, namespace=namespace)
        admin.replace_scratchpad("# Notes\n- Oslo", "k-notes", namespace=namespace)
        admin.replace_scratchpad({"likes": ["jazz"]}, "k-shared", namespace=namespace)
        admin.replace_scratchpad("- tea", "k-plain", namespace=namespace)
        admin.replace_scratchpad(
            "# Notes\n- Lisbon", "k-plain", namespace=namespace, profile="notes"
        )
    wanted = {
        ("k-notes", None, "notes", "# Notes\n- Oslo"),
        (None, "ada", "shared", json.dumps({"likes": ["jazz"]})),
        ("k-plain", None, "default", "- tea"),
        ("k-plain", None, "notes", "# Notes\n- Lisbon"),
    }

    def pads(out: str) -> set[tuple[str | None, str | None, str, str]]:
        lines = [json.loads(line) for line in out.splitlines()]
        assert lines[-1]["kind"] == "end"  # the file is whole
        return {
            (
                x["session_id"],
                None if x["session_id"] else x["user_id"],
                x["profile"],
                x["content"] if isinstance(x["content"], str) else json.dumps(x["content"]),
            )
            for x in lines
            if x["kind"] == "scratchpad"
        }

    # When an admin exports the namespace, and the user exports theirs with their own token
    admin_token = token(dev_keys, "ops", ADMIN)
    as_admin = memkit(capsys, source, admin_token, "export", "--namespace", namespace)
    as_user = memkit(
        capsys, source, token(dev_keys, "ada"), "export", "--namespace", namespace, "--user", "ada"
    )

    # Then both are whole and hold every scratchpad once
    for status, out, err in (as_admin, as_user):
        assert status == 0, err
        assert "4 sessions, 1 messages, 4 scratchpads" in err
        assert pads(out) == wanted

    # And imported where the app defines the same profiles, each session has its scratchpad
    exported = tmp_path / "kinds.jsonl"
    exported.write_text(as_admin[1], encoding="utf-8")
    with client(target, dev_keys) as copy:
        copy.put_profile("shared", shared)
    status, _, err = memkit(capsys, target, admin_token, "import", str(exported))
    assert status == 0, err
    with client(target, dev_keys) as copy:
        assert copy.get_scratchpad("k-notes", namespace=namespace).content == "# Notes\n- Oslo"
        assert copy.get_scratchpad("k-shared", namespace=namespace).content == {"likes": ["jazz"]}
        plain = copy.get_scratchpad("k-plain", namespace=namespace, profile="notes")
        assert plain.content == "# Notes\n- Lisbon"


def test_an_import_gives_a_session_the_files_window_and_an_older_export_leaves_it(
    target: LocalStack, dev_keys: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a session on the target with a window of its own
    admin = token(dev_keys, "ops", ADMIN)
    with client(target, dev_keys) as writer:
        writer.put_session(
            "w-1",
            {"user_id": "ada", "title": "Garden"},
            namespace="windows",
            context_window_max=2000,
        )

    def imported(**session: Any) -> tuple[int, str, int | None]:
        header = {"kind": "memkit-export", "version": 1}
        line = {"kind": "session", "session_id": "w-1", "namespace": "windows", "user_id": "ada"}
        path = tmp_path / "windows.jsonl"
        end = {"kind": "end", "counts": {}}
        lines = (header, {**line, **session}, end)
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        status, _, err = memkit(capsys, target, admin, "import", str(path))
        with client(target, dev_keys) as reader:
            return status, err, reader.get_session("w-1", namespace="windows").context_window_max

    # When files are imported: one written before sessions carried their window, one with a
    # window, the same again, one with the server's (null)
    older = imported(title="Garden")
    given = imported(title="Garden", context_window_max=6000)
    again = imported(title="Garden", context_window_max=6000)
    default = imported(title="Garden", context_window_max=None)

    # Then the session has each file's window, and a file that names none leaves it as it was
    assert older[:1] + older[2:] == (0, 2000), older[1]
    assert "0 sessions" in older[1]
    assert given[:1] + given[2:] == (0, 6000), given[1]
    assert "1 sessions" in given[1]
    assert again[:1] + again[2:] == (0, 6000), again[1]
    assert "0 sessions" in again[1]
    assert default[:1] + default[2:] == (0, None), default[1]


AMS_WORKING_MEMORY = {
    "messages": [
        {
            "role": "user",
            "content": "I'm Eve and I like jazz",
            "id": "ams-m1",
            "created_at": "2026-01-05T10:00:00Z",
            "persisted_at": None,
            "discrete_memory_extracted": "f",
        },
        {"role": "assistant", "content": "Noted, Eve.", "created_at": "2026-01-05T10:00:03Z"},
    ],
    "memories": [],
    "data": {"plan": "jazz club"},
    "context": "Eve likes jazz.",
    "user_id": "eve",
    "tokens": 12,
    "session_id": "ams-1",
    "namespace": None,
    "long_term_memory_strategy": {"strategy": "discrete", "config": {}},
    "ttl_seconds": 3600,
    "last_accessed": "2026-01-05T10:00:03Z",
    "created_at": "2026-01-05T10:00:00Z",
    "updated_at": "2026-01-05T10:00:03Z",
    "context_percentage_total_used": None,
    "new_session": False,
}
AMS_RECORDS = [
    {
        "id": "ams-r1",
        "text": "Eve plays the saxophone",
        "session_id": "ams-1",
        "user_id": "eve",
        "namespace": "gamma",
        "last_accessed": "2026-01-06T00:00:00Z",
        "created_at": "2026-01-05T10:01:00Z",
        "updated_at": "2026-01-05T10:01:00Z",
        "pinned": False,
        "access_count": 3,
        "topics": ["music"],
        "entities": ["Eve"],
        "memory_hash": "x",
        "discrete_memory_extracted": "t",
        "memory_type": "episodic",
        "persisted_at": None,
        "extracted_from": ["ams-m1"],
        "event_date": "2026-01-04T20:00:00Z",
        "extraction_strategy": "discrete",
        "extraction_strategy_config": {},
    },
]
MEM0_GET_ALL = {
    "results": [
        {
            "id": "6f1c0d52-61a4-4a43-9a43-1d5b5d1f0c11",
            "memory": "Likes Thai food",
            "hash": "a1b2",
            "metadata": {"source": "chat"},
            "created_at": "2025-07-26T10:29:36.630547-07:00",
            "updated_at": None,
            "user_id": "eve",
            "agent_id": "planner",
            "run_id": "trip-7",
            "categories": ["food"],
        },
        {
            "id": "0c5e9f6a-8e1e-4c55-bd0e-2f3ad0e7a9b2",
            "memory": "Allergic to peanuts",
            "hash": "c3d4",
            "created_at": "2025-07-27T08:00:00+00:00",
            "role": "user",
        },
    ]
}


def test_agent_memory_server_and_mem0_files_import_as_their_fields_say(
    target: LocalStack, dev_keys: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = token(dev_keys, "ops", ADMIN)
    working = tmp_path / "ams-1.json"
    working.write_text(json.dumps(AMS_WORKING_MEMORY, indent=2))  # one JSON document
    ams_records = tmp_path / "ams-records.jsonl"
    ams_records.write_text("".join(json.dumps(r) + "\n" for r in AMS_RECORDS))
    mem0 = tmp_path / "mem0.json"
    mem0.write_text(json.dumps(MEM0_GET_ALL))

    status, _, err = memkit(capsys, target, admin, "import", str(working), "--namespace", "gamma")
    assert status == 0, err
    assert "imported 0 profiles, 1 sessions, 2 messages" in err
    status, _, err = memkit(capsys, target, admin, "import", str(ams_records), "--format", "ams")
    assert status == 0, err
    assert "1 memories" in err
    status, _, err = memkit(
        capsys, target, admin, "import", str(mem0), "--namespace", "gamma", "--user", "eve"
    )
    assert status == 0, err
    assert "2 memories" in err

    with client(target, dev_keys) as reader:
        session = reader.get_session("ams-1", namespace="gamma")
        assert (session.user_id, session.data, session.context) == (
            "eve",
            {"plan": "jazz club"},
            "Eve likes jazz.",
        )
        assert (session.tokens, session.ttl_seconds) == (12, 3600)
        assert session.messages[0].id == "ams-m1"
        assert session.messages[1].id.startswith("imp-")  # no id: one made from its content
        assert session.messages[1].created_at.startswith("2026-01-05T10:00:03")
        record = reader.get_memory("ams-r1")
        assert (record.memory_type, record.topics, record.extracted_from) == (
            "episodic",
            ["music"],
            ["ams-m1"],
        )
        assert record.event_date is not None
        assert record.event_date.startswith("2026-01-04T20")
        assert record.discrete_memory_extracted == "t"
        thai = reader.get_memory("6f1c0d52-61a4-4a43-9a43-1d5b5d1f0c11")
        assert (thai.text, thai.user_id, thai.namespace, thai.session_id, thai.topics) == (
            "Likes Thai food",
            "eve",
            "gamma",
            "trip-7",
            ["food"],
        )
        assert thai.created_at.startswith("2025-07-26T17:29:36")  # -07:00 as UTC
        assert thai.metadata == {"source": "chat", "mem0": {"hash": "a1b2", "agent_id": "planner"}}
        peanuts = reader.get_memory("0c5e9f6a-8e1e-4c55-bd0e-2f3ad0e7a9b2")
        assert peanuts.user_id == "eve"  # --user: the item names none
        assert peanuts.metadata == {"mem0": {"hash": "c3d4", "role": "user"}}

    for path in (working, ams_records, mem0):  # again: nothing new
        status, _, err = memkit(
            capsys, target, admin, "import", str(path), "--namespace", "gamma", "--user", "eve"
        )
        assert status == 0, err
        assert "imported 0 profiles, 0 sessions, 0 messages, 0 scratchpads, 0 memories" in err


def test_a_bad_line_is_reported_with_its_number_and_the_rest_goes_in(
    target: LocalStack, dev_keys: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {
        "kind": "memory",
        "id": "bad-file-1",
        "text": "Fay rides a bike",
        "user_id": "fay",
        "namespace": "delta",
    }
    lines = [
        json.dumps({"kind": "memkit-export", "version": 1}),
        json.dumps(good),
        '{"kind": "memory", "id": ',
        json.dumps({**good, "id": "bad-file-2", "text": "   "}),
        json.dumps({"hello": "world"}),
        json.dumps({**good, "id": "bad-file-3", "text": "Fay swims"}),
        json.dumps({"kind": "end", "counts": {}}),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")

    status, _, err = memkit(capsys, target, token(dev_keys, "ops", ADMIN), "import", str(path))

    assert status == 1
    assert "line 3: not JSON" in err
    assert "line 4: record 'bad-file-2': 422" in err
    assert "text" in err.split("line 4:")[1].splitlines()[0]  # the field the API named
    assert "line 5: not a shape memkit imports" in err
    assert "Traceback" not in err
    assert "imported 0 profiles, 0 sessions, 0 messages, 0 scratchpads, 2 memories" in err
    assert "3 failed" in err
    with client(target, dev_keys) as reader:
        assert reader.get_memory("bad-file-3").text == "Fay swims"


def test_an_id_no_path_could_name_is_reported_and_the_rest_goes_in(
    target: LocalStack, dev_keys: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a file whose ids the API refuses (memkit.ids) beside a good record
    record = {"kind": "memory", "text": "Gil keeps bees", "user_id": "gil", "namespace": "ids"}
    lines = [
        {"kind": "memkit-export", "version": 1},
        {**record, "id": "ids-good"},
        {**record, "id": "ids/slash"},
        {**record, "id": "100%"},
        {**record, "id": "ids-good?"},  # in a path: cut at '?', naming ids-good
        {"kind": "session", "session_id": "trip/2", "namespace": "ids"},
        {"kind": "end", "counts": {}},
    ]
    path = tmp_path / "ids.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    # When it is imported
    status, _, err = memkit(capsys, target, token(dev_keys, "ops", ADMIN), "import", str(path))

    # Then each refused id is reported with the rule, and the import goes on to the end
    assert status == 1
    assert "stopped" not in err
    for line, reason in [
        (3, "must not contain '/'"),
        (4, "must not contain '%'"),
        (5, "must not contain '?'"),
        (6, "must not contain '/'"),
    ]:
        reported = err.split(f"line {line}:")[1].splitlines()[0]
        assert reason in reported
        assert "one URL path segment" in reported
    assert "1 memories" in err
    assert "4 failed" in err
    with client(target, dev_keys) as reader:
        assert reader.get_memory("ids-good").text == "Gil keeps bees"


def test_search_prints_json_lines_when_piped_and_doctor_checks_the_stack(
    populated: LocalStack, dev_keys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ada = token(dev_keys, "ada")
    status, out, err = memkit(
        capsys, populated, ada, "search", "tea every morning", "--namespace", "alpha", "--limit=3"
    )
    assert status == 0, err
    hits = [json.loads(line) for line in out.splitlines()]
    assert len(hits) == 3
    assert hits[0]["id"] == "r-tea"
    assert {hit["user_id"] for hit in hits} == {"ada"}  # the token's user, whatever was asked

    status, out, err = memkit(capsys, populated, ada, "doctor")
    assert status == 0, out
    checks = {line.split()[1]: line.split()[0] for line in out.splitlines()}
    assert checks == {"health": "ok", "auth": "ok", "indexing": "ok", "dead": "ok"}
    assert "memkit 0.1.0" in out
    assert "a JWT for user ada" in out
    assert "searchable" in out

    status, out, _ = memkit(capsys, populated, ada + "x", "doctor")
    assert status == 1
    assert out.splitlines()[1].startswith("fail  auth")
    assert "skip  indexing" in out
