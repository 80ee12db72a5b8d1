"""What `memkit import` reads (memkit_dev.transfer.shapes) and when the CLI draws progress,
without a stack: every accepted shape becomes memkit export lines; what is not is a Problem
naming where it is."""

from __future__ import annotations

import io
import json

import pytest

from memkit_dev.progress import Progress
from memkit_dev.transfer.shapes import (
    Defaults,
    Entry,
    Problem,
    Reader,
    Unreadable,
    decoded,
)


def read(text: str | bytes, **options: object) -> list[Entry | Problem]:
    raw = text.encode() if isinstance(text, str) else text
    reader = Reader(**options)  # type: ignore[arg-type]
    return list(reader.read(decoded(io.BytesIO(raw))))


def test_json_lines_are_read_one_by_one_and_a_bad_line_is_a_problem_in_place() -> None:
    text = "\n".join(
        [
            json.dumps({"kind": "memkit-export", "version": 1}),
            json.dumps({"kind": "memory", "id": "a", "text": "one"}),
            "{oops",
            "",
            json.dumps({"kind": "memory", "id": "b", "text": "two"}),
        ]
    )
    found = read(text + "\n")
    assert [type(x).__name__ for x in found] == ["Entry", "Problem", "Entry"]
    assert found[1].where == "line 3"
    assert found[2].where == "line 5"


def test_a_line_that_is_not_utf8_is_reported_not_guessed() -> None:
    raw = b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "\xff\xfe"}\n'
    found = read(raw)
    assert isinstance(found[0], Entry)
    assert found[1] == Problem("line 2", "not UTF-8")


def test_memkit_lines_need_the_header_and_a_version_this_memkit_reads() -> None:
    found = read(json.dumps({"kind": "memory", "id": "a", "text": "x"}) + "\n")
    assert isinstance(found[0], Problem)
    assert "header" in found[0].reason
    with pytest.raises(Unreadable, match="version 2"):
        read(json.dumps({"kind": "memkit-export", "version": 2}) + "\n")


def test_an_ams_working_memory_document_becomes_a_session_and_chunks_of_messages() -> None:
    messages = [{"role": "user", "content": f"turn {n}", "id": f"m{n}"} for n in range(250)]
    document = {
        "session_id": "s1",
        "messages": messages,
        "user_id": "u",
        "data": {"a": 1},
        "created_at": "2026-01-01T00:00:00Z",
        "context_percentage_total_used": 3.0,
    }
    found = read(json.dumps(document, indent=2), defaults=Defaults(namespace="ns"))
    kinds = [x.value["kind"] for x in found if isinstance(x, Entry)]
    assert kinds == ["session", "messages", "messages", "messages"]
    session = found[0].value  # type: ignore[union-attr]
    assert (session["namespace"], session["user_id"], session["data"]) == ("ns", "u", {"a": 1})
    assert "created_at" not in session  # the server's
    assert [len(x.value["messages"]) for x in found[1:]] == [100, 100, 50]  # type: ignore[union-attr]


def test_a_message_without_an_id_gets_the_same_id_on_every_read() -> None:
    document = json.dumps({"session_id": "s", "messages": [{"role": "user", "content": "hi"}]})
    first, second = read(document), read(document)
    assert first[1].value["messages"][0]["id"] == second[1].value["messages"][0]["id"]  # type: ignore[union-attr]
    assert first[1].value["messages"][0]["id"].startswith("imp-")  # type: ignore[union-attr]


def test_mem0_get_all_maps_its_fields_and_keeps_the_rest_under_metadata() -> None:
    output = {
        "results": [
            {
                "id": "u1",
                "memory": "Likes tea",
                "user_id": None,
                "run_id": "r",
                "agent_id": "a",
                "categories": ["food"],
                "score": 0.3,
                "updated_at": None,
                "created_at": "2025-01-01T00:00:00-07:00",
            }
        ]
    }
    (entry,) = read(json.dumps(output), defaults=Defaults(user_id="ada"))
    assert isinstance(entry, Entry)
    assert entry.origin == "mem0"
    assert entry.value == {
        "kind": "memory",
        "id": "u1",
        "text": "Likes tea",
        "memory_type": "semantic",
        "namespace": "default",
        "user_id": "ada",
        "session_id": "r",
        "topics": ["food"],
        "created_at": "2025-01-01T00:00:00-07:00",
        "metadata": {"mem0": {"agent_id": "a"}},
    }


def test_ams_records_alone_in_a_list_or_as_a_search_answer() -> None:
    record = {"id": "r", "text": "x", "access_count": 2, "memory_type": "semantic"}
    for value in (record, [record], {"memories": [record], "total": 1, "next_offset": None}):
        (entry,) = read(json.dumps(value))
        assert isinstance(entry, Entry)
        assert entry.value == {
            "kind": "memory",
            "id": "r",
            "text": "x",
            "memory_type": "semantic",
            "namespace": "default",
        }


def test_format_refuses_another_shape_and_unknown_shapes_are_named() -> None:
    found = read(json.dumps({"id": "r", "text": "x"}), format="mem0")
    assert isinstance(found[0], Problem)
    assert "not --format mem0" in found[0].reason
    (problem,) = read(json.dumps({"hello": 1}))
    assert isinstance(problem, Problem)
    assert "not a shape memkit imports" in problem.reason


def test_a_file_that_is_neither_jsonl_nor_json_is_one_problem() -> None:
    (problem,) = read("{\n  oops\n")
    assert isinstance(problem, Problem)
    assert problem.where == "line 2"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_and_nothing_is_written_when_piped() -> None:
    piped, terminal = io.StringIO(), Terminal()
    for stream in (piped, terminal):
        with Progress("import", total=10, stream=stream) as bar:
            bar.advance(5)
            bar.show({"messages": 5, "failed": 0})
    assert piped.getvalue() == ""
    assert "import:" in terminal.getvalue()  # the bar (tqdm redraws it at most 10 times a second)


def test_records_that_supersede_others_are_imported_after_the_records_they_name() -> None:
    from memkit_dev.transfer.importer import superseding_last

    def entry(rid: str, *named: str) -> Entry:
        return Entry(f"record {rid}", {"kind": "memory", "id": rid, "supersedes": list(named)})

    # An export lists the newest first: c supersedes b, which superseded a; d stands alone
    given = [entry("c", "b"), entry("d", "x"), entry("b", "a"), entry("a")]

    ordered = [e.value["id"] for e in superseding_last(given)]

    assert ordered.index("a") < ordered.index("b") < ordered.index("c")
    assert sorted(ordered) == ["a", "b", "c", "d"]


def test_a_cycle_of_supersessions_in_a_file_is_imported_once_each() -> None:
    from memkit_dev.transfer.importer import superseding_last

    given = [
        Entry("1", {"kind": "memory", "id": "p", "supersedes": ["q"]}),
        Entry("2", {"kind": "memory", "id": "q", "supersedes": ["p"]}),
    ]

    assert sorted(e.value["id"] for e in superseding_last(given)) == ["p", "q"]
