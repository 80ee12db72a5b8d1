"""Rebuilding the vector index from the table (memkit reindex): on moto with the local exact
index and with the DynamoDB vector table (its generations, through the local stand-in), and on
moto with the real OpenSearch adapter against the strict loopback OpenSearch (a managed
domain, as the local stack runs it). The API writes, the real indexer indexes the stream, then
a rebuild replaces the index while searches keep answering."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from memkit.embeddings.local import LocalEmbedder
from memkit.embeddings.protocol import Purpose
from memkit.handlers.reindex import make_lambda_handler
from memkit.jobs.phases import Deadline
from memkit.jobs.reindex import OutOfTime, Reindexer
from memkit.vectors.opensearch import OpenSearchIndex
from memkit_dev.local.opensearch import LoopbackOpenSearch
from tests.conftest import LambdaContextStub
from tests.integration.memory_world import (
    BACKENDS,
    CountingEmbedder,
    MemoryWorld,
    backend_world,
    build_world,
)

pytestmark = pytest.mark.integration


class FifteenMinutes(LambdaContextStub):
    """An invocation with the ReindexFunction's timeout ahead of it."""

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


LTM = "/v1/long-term-memory"
INDEX = "memkit-memories"
REGION = "us-east-1"
RECORDS = {
    "tea": "Ada drinks green tea every morning",
    "oslo": "Ada is flying to Oslo on Friday for a conference",
    "cat": "Bob has a grey cat called Pixel",
}
MESSAGES = {
    "m0": "Let's plan the trip to Lisbon",
    "m1": "My passport number ends in 4471",
}


class ShorterEmbedder:
    """A new embedding model: the local model's vectors cut to `dimensions` (a change of
    dimensions, as from Titan 1024 to 256)."""

    def __init__(self, dimensions: int = 64) -> None:
        self._inner = LocalEmbedder()
        self._dimensions = dimensions

    @property
    def model_id(self) -> str:
        return f"{self._inner.model_id}-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str], purpose: Purpose = "document") -> list[list[float]]:
        vectors = np.asarray(self._inner.embed(texts, purpose))[:, : self._dimensions]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return [list(map(float, row)) for row in vectors / np.where(norms > 0, norms, 1)]


def _stock(world: MemoryWorld) -> None:
    memories = [{"id": rid, "text": text, "user_id": "ada"} for rid, text in RECORDS.items()]
    response = world.api("POST", f"{LTM}/", body={"memories": memories})
    assert response.status == 200, response.body
    messages = [{"id": mid, "role": "user", "content": text} for mid, text in MESSAGES.items()]
    response = world.api(
        "POST", "/v1/working-memory/chat-1/messages", body={"messages": messages, "user_id": "ada"}
    )
    assert response.status in (200, 201), response.body
    world.settle()


def _search(world: MemoryWorld, text: str) -> list[str]:
    response = world.api(
        "POST",
        f"{LTM}/search",
        query={"optimize_query": "false"},
        body={"text": text, "search_mode": "semantic", "limit": 3},
    )
    assert response.status == 200, response.body
    return [m["id"] for m in response.body["memories"]]


def _nearest(index: Any, embedder: Any, text: str) -> str:
    vector = embedder.embed([text], "query")[0]
    return str(index.search("default", vector, 1)[0].fields["record_id"])


ALL_IDS = set(RECORDS) | set(MESSAGES)


# -- the local exact index ----------------------------------------------------------------


@pytest.fixture
def local_world(dynamodb_table: str) -> MemoryWorld:
    """conftest's `world`: the local exact index and the counting local embedder."""
    return build_world(dynamodb_table)


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest, dynamodb_table: str) -> Iterator[MemoryWorld]:
    """The local exact index, or the DynamoDB vector table (a rebuild of the same
    dimensions: a new model of another size needs a new vector table there)."""
    with backend_world(request.param, dynamodb_table) as built:
        yield built


def test_a_reindex_with_new_dimensions_holds_every_record_and_indexed_message(
    local_world: MemoryWorld,
) -> None:
    # Given records and indexed messages in the index of the old model
    _stock(local_world)
    embedder = ShorterEmbedder(64)

    # When the index is rebuilt with a model of other dimensions
    report = Reindexer(local_world.store, local_world.vector_index, embedder, segments=3).run()

    # Then every record and message is there, as the new model embeds them
    assert report.switched
    assert report.failed == 0
    assert report.indexed == len(ALL_IDS)
    assert local_world.vector_index.dimensions == 64
    assert local_world.index_ids() == ALL_IDS
    assert _nearest(local_world.vector_index, embedder, "what does Ada drink?") == "tea"
    assert _nearest(local_world.vector_index, embedder, "passport number") == "m1"


def test_a_reindex_leaves_system_messages_out(world: MemoryWorld) -> None:
    # Given records and messages, and a session's system message (stamped for indexing
    # like every message of its session)
    _stock(world)
    system = {"id": "s0", "role": "system", "content": "You are a travel agent."}
    body = {"messages": [system], "user_id": "ada"}
    response = world.api("POST", "/v1/working-memory/chat-2/messages", body=body)
    assert response.status == 201, response.body
    world.settle()

    # When the index is rebuilt from the table
    report = Reindexer(world.store, world.vector_index, LocalEmbedder()).run()

    # Then it holds the records and the messages, not the instructions
    assert report.switched
    assert world.index_ids() == ALL_IDS


def test_searches_answer_from_the_old_index_until_the_switch(world: MemoryWorld) -> None:
    _stock(world)
    during: list[list[str]] = []

    Reindexer(world.store, world.vector_index, CountingEmbedder()).run(
        before_switch=lambda: during.append(_search(world, "what does Ada drink?"))
    )

    assert during[0][0] == "tea"  # the copy is done, the old index still answers
    assert _search(world, "what does Ada drink?")[0] == "tea"


def test_an_item_written_during_the_rebuild_is_searchable_after(world: MemoryWorld) -> None:
    # Given a rebuild whose copy has finished
    _stock(world)

    def write_during_the_rebuild() -> None:
        # the indexer writes it to the index that is live now (the old one)
        memory = {"id": "late", "text": "Cy bought a red bicycle yesterday", "user_id": "cy"}
        assert world.api("POST", f"{LTM}/", body={"memories": [memory]}).status == 200
        world.settle()

    # When a record is written before the switch (no clock margin: only it is caught up)
    report = Reindexer(world.store, world.vector_index, CountingEmbedder(), catch_up_margin=0).run(
        before_switch=write_during_the_rebuild
    )

    # Then the catch-up after the switch indexed it into the new index
    assert report.caught_up == 1
    assert world.index_ids() == ALL_IDS | {"late"}
    assert _search(world, "who bought a bicycle?")[0] == "late"


def test_a_dry_run_counts_and_changes_nothing(world: MemoryWorld) -> None:
    _stock(world)
    before = world.embedded_texts

    report = Reindexer(world.store, world.vector_index, CountingEmbedder()).run(dry_run=True)

    assert report.indexable == len(ALL_IDS)
    assert report.indexed == 0
    assert not report.switched
    assert world.embedded_texts == before
    assert world.index_ids() == ALL_IDS


# -- OpenSearch (the loopback domain) through the real adapter -----------------------------


@pytest.fixture
def server() -> Iterator[LoopbackOpenSearch]:
    with LoopbackOpenSearch(LocalEmbedder().dimensions) as server:
        yield server
    assert server.rejected == []


def _adapter(server: LoopbackOpenSearch, dimensions: int) -> OpenSearchIndex:
    from memkit.config import IndexSettings
    from memkit.vectors.opensearch import opensearch_index

    settings = IndexSettings(
        opensearch_endpoint=server.url, opensearch_auth="none", opensearch_index=INDEX
    )
    return opensearch_index(settings, REGION, dimensions)


@pytest.fixture
def os_world(dynamodb_table: str, server: LoopbackOpenSearch) -> MemoryWorld:
    embedder = CountingEmbedder()
    return build_world(
        dynamodb_table, index=_adapter(server, embedder.dimensions), embedder=embedder
    )


def test_the_first_reindex_turns_the_plain_index_into_an_alias(
    os_world: MemoryWorld, server: LoopbackOpenSearch
) -> None:
    # Given a deployment whose index is a plain index by the configured name
    _stock(os_world)
    assert server.indices() == {INDEX: []}

    # When it is rebuilt, twice
    first = Reindexer(os_world.store, os_world.vector_index, CountingEmbedder()).run()
    after_first = server.indices()
    second = Reindexer(os_world.store, os_world.vector_index, CountingEmbedder()).run()

    # Then the name became an alias of generation 1, then of generation 2, and the
    # replaced index is deleted each time; searches through the name find everything
    assert (first.generation, second.generation) == (f"{INDEX}-gen1", f"{INDEX}-gen2")
    assert after_first == {f"{INDEX}-gen1": [INDEX]}
    assert server.indices() == {f"{INDEX}-gen2": [INDEX]}
    assert os_world.index_ids() == ALL_IDS
    assert _search(os_world, "what does Ada drink?")[0] == "tea"


def test_a_reindex_to_new_dimensions_on_opensearch(
    os_world: MemoryWorld, server: LoopbackOpenSearch
) -> None:
    _stock(os_world)
    embedder = ShorterEmbedder(64)

    report = Reindexer(os_world.store, os_world.vector_index, embedder, segments=2).run()

    # the functions, deployed with the new model, search the alias with 64 dimensions
    redeployed = _adapter(server, 64)
    assert report.indexed == len(ALL_IDS)
    assert report.failed == 0
    assert _nearest(redeployed, embedder, "what does Ada drink?") == "tea"
    assert {hit.fields["record_id"] for hit in redeployed.browse("default", 100, 0)} == ALL_IDS


def test_on_opensearch_searches_answer_during_the_rebuild_and_late_writes_survive(
    os_world: MemoryWorld, server: LoopbackOpenSearch
) -> None:
    # Given a rebuild of the loopback domain whose copy has finished
    _stock(os_world)
    seen: dict[str, Any] = {}

    def meanwhile() -> None:
        seen["search"] = _search(os_world, "what does Ada drink?")
        seen["indices"] = server.indices()
        memory = {"id": "late", "text": "Cy bought a red bicycle yesterday", "user_id": "cy"}
        assert os_world.api("POST", f"{LTM}/", body={"memories": [memory]}).status == 200
        os_world.settle()  # the indexer writes through the name: the old index

    # When a record is written before the switch
    report = Reindexer(
        os_world.store, os_world.vector_index, CountingEmbedder(), catch_up_margin=0
    ).run(before_switch=meanwhile)

    # Then the old index answered meanwhile, and the record is in the new one after
    assert seen["search"][0] == "tea"
    assert seen["indices"] == {INDEX: [], f"{INDEX}-gen1": []}
    assert report.caught_up == 1
    assert os_world.index_ids() == ALL_IDS | {"late"}
    assert _search(os_world, "who bought a bicycle?")[0] == "late"


def test_a_rebuild_out_of_time_deletes_its_new_index(
    os_world: MemoryWorld, server: LoopbackOpenSearch
) -> None:
    _stock(os_world)

    with pytest.raises(OutOfTime):
        Reindexer(os_world.store, os_world.vector_index, CountingEmbedder()).run(
            deadline=Deadline.after(-1)
        )

    assert server.indices() == {INDEX: []}
    assert os_world.index_ids() == ALL_IDS


def test_the_cli_rebuilds_with_a_progress_line(
    os_world: MemoryWorld,
    server: LoopbackOpenSearch,
    dynamodb_table: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from memkit_dev.cli import main

    _stock(os_world)

    code = main(
        [
            "reindex",
            "--table",
            dynamodb_table,
            "--opensearch-endpoint",
            server.url,
            "--opensearch-auth",
            "none",
            "--index",
            INDEX,
            "--segments",
            "2",
        ]
    )

    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert code == 0
    assert "reindex: " in err
    assert "[########################] 9/~9 items (100%)" in err  # the bar, full at the end
    assert "indexed 5" in err
    assert "items/s" in err
    assert summary["indexed"] == len(ALL_IDS)
    assert summary["generation"] == f"{INDEX}-gen1"
    assert server.indices() == {f"{INDEX}-gen1": [INDEX]}
    assert os_world.index_ids() == ALL_IDS


def test_the_cli_refuses_a_rebuild_without_an_opensearch_endpoint(
    dynamodb_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from memkit_dev.cli import main

    code = main(["reindex", "--table", dynamodb_table])

    assert code == 2
    assert "--opensearch-endpoint" in capsys.readouterr().err


def _reindex_function_environment(
    monkeypatch: pytest.MonkeyPatch, server: LoopbackOpenSearch, **more: str
) -> None:
    """template.yaml's ReindexFunction environment, pointed at the loopback OpenSearch."""
    for name, value in {
        "MEMKIT_OPENSEARCH_ENDPOINT": server.url,
        "MEMKIT_OPENSEARCH_AUTH": "none",
        "MEMKIT_OPENSEARCH_INDEX": INDEX,
        **more,
    }.items():
        monkeypatch.setenv(name, value)


def test_the_lambda_handler_rebuilds_from_its_environment(
    os_world: MemoryWorld, server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the function's environment (template.yaml's ReindexFunction, pointed at loopback)
    _stock(os_world)
    _reindex_function_environment(monkeypatch, server, MEMKIT_EMBEDDER="local")

    # When an operator invokes it with a payload
    result = make_lambda_handler()({"segments": 2}, FifteenMinutes())

    # Then it rebuilt and switched within the invocation, and says what it did
    assert result["switched"] is True
    assert result["indexed"] == len(ALL_IDS)
    assert server.indices() == {f"{INDEX}-gen1": [INDEX]}


def test_the_lambda_handler_refuses_an_unknown_payload_field() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        make_lambda_handler()({"segmnets": 2}, FifteenMinutes())


def test_the_cli_names_a_bad_option_instead_of_a_traceback(
    dynamodb_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from memkit_dev.cli import main

    code = main(["reindex", "--table", dynamodb_table, "--segments", "0", "--dry-run"])

    assert code == 2
    assert "reindex_segments" in capsys.readouterr().err


def test_the_cli_reports_an_unreachable_index_and_switches_nothing(
    local_world: MemoryWorld, dynamodb_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from memkit_dev.cli import main

    _stock(local_world)
    unreachable = ["--opensearch-endpoint", "http://127.0.0.1:9", "--opensearch-auth", "none"]

    code = main(["reindex", "--table", dynamodb_table, *unreachable])

    err = capsys.readouterr().err
    assert code == 1
    assert "memkit reindex: the vector index is unavailable" in err
    assert "Traceback" not in err


class Ticks:
    """A clock that moves one second each time it is read (a deadline passes after so many
    pages, whatever the machine's speed)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_a_paused_rebuild_resumes_where_it_stopped(
    os_world: MemoryWorld, server: LoopbackOpenSearch
) -> None:
    # Given a rebuild that reads one small page a time, paused after two pages
    _stock(os_world)
    ticks = Ticks()
    deadline = Deadline(at=3.0, clock=ticks)

    def reindexer() -> Reindexer:
        return Reindexer(
            os_world.store, os_world.vector_index, CountingEmbedder(), segments=1, page_size=2
        )

    paused = reindexer().run(deadline=deadline, pause=True)

    # Then nothing is switched, its generation waits, and it says where to go on
    assert not paused.switched
    assert paused.continuation is not None
    assert paused.indexed < len(ALL_IDS)
    assert server.indices() == {INDEX: [], f"{INDEX}-gen1": []}
    assert _search(os_world, "what does Ada drink?")[0] == "tea"  # the old index serves

    # When it is resumed with its continuation
    finished = reindexer().run(resume=paused.continuation)

    # Then it copied the rest, switched, and every record and message is there once
    assert finished.switched
    assert paused.indexed + finished.indexed == len(ALL_IDS)
    assert server.indices() == {f"{INDEX}-gen1": [INDEX]}
    assert os_world.index_ids() == ALL_IDS


def test_the_lambda_handler_pauses_and_resumes_across_invocations(
    os_world: MemoryWorld, server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the function's environment and an invocation with too little time to copy
    _stock(os_world)
    _reindex_function_environment(monkeypatch, server)
    handler = make_lambda_handler()

    first = handler({"segments": 2}, LambdaContextStub())  # 10 s left: no time to copy

    # When the operator invokes it again with the continuation it returned
    second = handler(json.loads(json.dumps({"resume": first["continuation"]})), FifteenMinutes())

    # Then the first paused with its generation unswitched, and the second finished it
    assert first["switched"] is False
    assert first["continuation"]["generation"] == f"{INDEX}-gen1"
    assert second["switched"] is True
    assert second["continuation"] is None
    assert server.indices() == {f"{INDEX}-gen1": [INDEX]}
    assert os_world.index_ids() == ALL_IDS


def test_a_stale_continuation_is_refused(os_world: MemoryWorld, server: LoopbackOpenSearch) -> None:
    from memkit.errors import BadRequest

    # Given a paused rebuild, then another rebuild that finished meanwhile
    _stock(os_world)
    paused = Reindexer(os_world.store, os_world.vector_index, CountingEmbedder()).run(
        deadline=Deadline.after(-1), pause=True
    )
    Reindexer(os_world.store, os_world.vector_index, CountingEmbedder()).run()
    assert paused.continuation is not None

    # When the paused one is resumed, it is refused: the index it would replace is gone
    with pytest.raises(BadRequest):
        Reindexer(os_world.store, os_world.vector_index, CountingEmbedder()).run(
            resume=paused.continuation
        )
    assert server.indices() == {f"{INDEX}-gen1": [INDEX]}
