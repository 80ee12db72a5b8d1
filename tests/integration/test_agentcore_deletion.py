"""An AgentCore memory's deletion on moto: DeleteMemory through the real API handler, its job
through the real worker handler on moto's SQS, the stream delivered to the real indexer.
Until the job is done the memory is DELETING and its data out of reach; afterwards a Scan of
the table and a browse of the index find nothing of it, while another memory's data is
intact (docs/agentcore.md)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from memkit.agentcore.deletion import MemoryDeletion
from memkit.agentcore.extraction import StrategyExtraction
from memkit.agentcore.table import agentcore_table
from memkit.agentcore.wing import DELETE_MEMORY
from memkit.config import ApiSettings
from memkit.handlers.wiring import job_sender
from memkit.handlers.worker import make_lambda_handler as make_worker_handler
from memkit.jobs.curation import Curator, Job
from memkit.jobs.users import UserDeletion
from memkit.llm.local import LocalModel
from memkit.llm.protocol import Turn
from memkit.service.long_term import LongTermService
from memkit.store import keys
from memkit.vectors.filters import Condition
from tests.conftest import ApiResponse, LambdaContextStub
from tests.events import sqs_record
from tests.integration.memory_world import LateWrites, MemoryWorld, build_world
from tests.integration.work_queue import Clock, DelaysOnClock, delivered, received, work_queue

pytestmark = pytest.mark.integration

TENANT = "default"
ACTORS = ("ada", "bob")
STRATEGIES = [
    {"semanticMemoryStrategy": {"name": "facts", "namespaces": ["/users/{actorId}/facts"]}},
    {"summaryMemoryStrategy": {"name": "sums", "namespaces": ["/sums/{actorId}/{sessionId}"]}},
]


def _ok(response: ApiResponse, status: int = 200) -> Any:
    assert response.status == status, response.body
    return response.body


@dataclass
class Deleting:
    """The API with a work queue (moto's SQS) and no grace before a memory's deletion, and
    the memory worker that reads that queue. With `timed`, the worker's deletions run on
    its clock and send to it (DelaysOnClock: SQS's delays pass on the test's clock)."""

    world: MemoryWorld
    sqs: Any
    url: str
    table: str
    timed: DelaysOnClock | None = None

    def api(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
        return self.world.api(method, path, **kwargs)

    def deletion(self, index: Any = None, **options: Any) -> MemoryDeletion:
        """A deletion over `index` (default: the world's) with `options` (monotonic...)."""
        send: Callable[[Job], None] = job_sender(self.url, "us-east-1", None)
        if self.timed is not None:
            send, options = self.timed.send, {"clock": self.timed.clock, **options}
        chosen = index or self.world.vector_index
        return MemoryDeletion(self.world.store, lambda: chosen, send, 0, **options)

    def work(
        self, deletion: MemoryDeletion | None = None, stream: bool = True, rounds: int = 50
    ) -> list[str]:
        """Run the worker over the queue until it is empty, or for `rounds` receives (the
        stream delivered to the indexer after each batch, unless not `stream`); the kinds of
        the jobs it ran, in order (an attempt that failed goes back to the queue)."""
        world = self.world
        handler = self.worker(deletion)
        ran: list[str] = []
        for _ in range(rounds):  # a job queues itself again until done
            messages = received(self.sqs, self.url, self.timed)
            if not messages:
                if stream:
                    world.settle()
                return ran
            records = [sqs_record(m) for m in messages]
            response = dict(handler({"Records": records}, LambdaContextStub()))
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
            for m in messages:
                if m["MessageId"] not in failed:
                    ran.append(Job.from_json(m["Body"]).kind)
                    self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=m["ReceiptHandle"])
            if stream:
                world.settle()
        if rounds < 50:
            return ran
        raise AssertionError("the queue never emptied")

    def worker(self, deletion: MemoryDeletion | None = None) -> Any:
        """The memory worker's handler over the world and `deletion` (default: a new one)."""
        world = self.world
        curator = _curator(world)
        users = UserDeletion(world.store, lambda: world.vector_index, None)
        chosen = deletion or self.deletion()
        return make_worker_handler(lambda: curator, lambda: users, {DELETE_MEMORY: lambda: chosen})

    def handle(self, job: Job) -> dict[str, Any]:
        """The worker's response to a batch of one message, `job` (the queue is not read)."""
        return dict(self.worker()(delivered(job), LambdaContextStub()))

    def items_of(self, memory_id: str, partitions: set[str] = frozenset()) -> set[tuple[str, str]]:  # type: ignore[assignment]
        """The keys of every table item of the memory (its own, its name's claim, its
        actors', everything in its namespace), and of every item of `partitions`."""
        client = boto3.client("dynamodb", region_name="us-east-1")
        found = set()
        for page in client.get_paginator("scan").paginate(TableName=self.table):
            for item in page["Items"]:
                pk = item["PK"]["S"]
                if item.get("namespace", {}).get("S") == memory_id or pk in partitions:
                    found.add((pk, item["SK"]["S"]))
        return found

    def partitions_of(self, memory_id: str) -> set[str]:
        """The partitions of the memory's records (each record's index state beside it)."""
        return {pk for pk, sk in self.items_of(memory_id) if sk == "RECORD"}

    def docs_of(self, memory_id: str) -> set[str]:
        """The ids of the index's docs in the memory's namespace."""
        hits = self.world.vector_index.browse(
            TENANT, 10_000, 0, [Condition("namespace", "eq", memory_id)]
        )
        return {hit.id for hit in hits}


class RefusingIndex:
    """OpenSearch when its bulk requests keep failing: it lists, never removes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def browse(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.browse(*args, **kwargs)

    def remove(self, removals: Any) -> dict[str, str]:
        return {removal.id: "unavailable" for removal in removals}


class Overtaken(LocalModel):
    """The local model, during whose first summary `meanwhile` happens."""

    def __init__(self, meanwhile: Callable[[], Any]) -> None:
        super().__init__()
        self._meanwhile: Callable[[], Any] | None = meanwhile

    def summarize(self, previous: str | None, turns: Sequence[Turn], max_words: int) -> str:
        if self._meanwhile is not None:
            self._meanwhile, meanwhile = None, self._meanwhile
            meanwhile()
        return super().summarize(previous, turns, max_words)


def _curator(world: MemoryWorld, model: LocalModel | None = None, records: Any = None) -> Curator:
    """The memory worker's curator as production builds it (AgentCore's strategies too);
    its strategies write records to `records` (default: the world's store)."""
    store = world.store
    long_term = LongTermService(
        store.records, store.sessions, lambda: world.vector_index, lambda: world.embedder
    )
    model = model or LocalModel()
    strategies = StrategyExtraction(
        agentcore_table(store), records or store.records, long_term, model
    )
    return Curator(store.curation, store.sessions, long_term, model, strategies=[strategies])


def _deleting(table: str, clock: Clock | None = None) -> Deleting:
    sqs, url = work_queue()
    settings = ApiSettings(
        table_name=table,
        region="us-east-1",
        work_queue_url=url,
        agentcore_deletion_grace_seconds=0,
    )
    timed = DelaysOnClock(sqs, url, clock) if clock is not None else None
    return Deleting(build_world(table, settings), sqs, url, table, timed)


@pytest.fixture
def deleting(dynamodb_table: str) -> Deleting:
    return _deleting(dynamodb_table)


@pytest.fixture
def on_clock(dynamodb_table: str) -> Deleting:
    """Deleting whose worker's deletions run on a clock the test moves."""
    return _deleting(dynamodb_table, Clock())


def _memory(deleting: Deleting, name: str) -> str:
    body = {"name": name, "eventExpiryDuration": 30, "memoryStrategies": STRATEGIES}
    return str(_ok(deleting.api("POST", "/memories/create", body=body), 202)["memory"]["id"])


def _fill(deleting: Deleting, memory_id: str, tag: str) -> None:
    """What a memory holds: each actor's events and records; and, through memkit's own API
    in its namespace, a session of a user who is no actor (with a session scratchpad), a
    user scratchpad, a profile and a lifecycle policy. Then the indexer catches up."""
    now = datetime.now(UTC).timestamp()
    for actor in ACTORS:
        turns = [("USER", f"{actor} drinks {tag} tea"), ("ASSISTANT", "Noted")]
        event = {
            "actorId": actor,
            "sessionId": f"{tag}-{actor}",
            "eventTimestamp": now,
            "payload": [{"conversational": {"content": {"text": t}, "role": r}} for r, t in turns],
        }
        _ok(deleting.api("POST", f"/memories/{memory_id}/events", body=event), 201)
        record = {
            "requestIdentifier": "fact",
            "namespaces": [f"/users/{actor}/facts"],
            "content": {"text": f"{actor} likes {tag} tea"},
            "timestamp": now,
        }
        created = deleting.api(
            "POST", f"/memories/{memory_id}/memoryRecords/batchCreate", body={"records": [record]}
        )
        assert _ok(created, 201)["failedRecords"] == []
    ns = {"namespace": memory_id}
    own = {"user_id": "carol", "messages": [{"role": "user", "content": f"carol on {tag}"}]}
    _ok(deleting.api("PUT", f"/v1/working-memory/{tag}-own", query=ns, body=own))
    pad = {"content": "plan: tea"}
    where = {**ns, "user_id": "carol"}
    _ok(deleting.api("PUT", f"/v1/working-memory/{tag}-own/scratchpad", query=where, body=pad))
    _ok(deleting.api("PUT", "/v1/profiles/prefs", query=ns, body={"scope": "user"}))
    mine = {**ns, "profile": "prefs"}
    _ok(deleting.api("PUT", "/v1/users/ada/scratchpad", query=mine, body={"content": "terse"}))
    _ok(deleting.api("PUT", f"/v1/namespaces/{memory_id}/lifecycle", body={"compact": True}))
    deleting.world.settle()


def _filled(deleting: Deleting, name: str = "doomed", tag: str = "green") -> str:
    """A memory `name` that holds what _fill writes."""
    memory_id = _memory(deleting, name)
    _fill(deleting, memory_id, tag)
    return memory_id


def test_delete_memory_answers_deleting_and_its_data_is_out_of_reach_at_once(
    deleting: Deleting,
) -> None:
    memory_id = _filled(deleting)

    answer = deleting.api("DELETE", f"/memories/{memory_id}/delete")

    assert answer.status == 202
    assert answer.body == {"memoryId": memory_id, "status": "DELETING"}
    # Before its job has run: DELETING where the control plane shows it...
    shown = _ok(deleting.api("GET", f"/memories/{memory_id}/details"))["memory"]
    listed = _ok(deleting.api("POST", "/memories", body={}))["memories"]
    assert shown["status"] == "DELETING"
    assert [(m["id"], m["status"]) for m in listed] == [(memory_id, "DELETING")]
    # ...and its data answers as gone
    events = deleting.api("POST", f"/memories/{memory_id}/actor/ada/sessions/green-ada", body={})
    query = {"namespacePath": "/", "searchCriteria": {"searchQuery": "tea"}}
    retrieved = deleting.api("POST", f"/memories/{memory_id}/retrieve", body=query)
    assert (events.status, events.headers["x-amzn-ErrorType"]) == (
        404,
        "ResourceNotFoundException",
    )
    assert retrieved.status == 404
    # ...and its name is free for another memory
    assert _memory(deleting, "doomed") != memory_id


def test_the_job_deletes_everything_the_memory_holds_and_then_the_memory(
    deleting: Deleting,
) -> None:
    doomed, kept = _filled(deleting), _filled(deleting, "kept", "black")
    doomed_partitions, kept_partitions = (
        deleting.partitions_of(doomed),
        deleting.partitions_of(kept),
    )
    kept_items, kept_docs = deleting.items_of(kept, kept_partitions), deleting.docs_of(kept)
    assert any(sk == "INDEX" for _, sk in deleting.items_of(doomed, doomed_partitions))
    assert deleting.docs_of(doomed)

    _ok(deleting.api("DELETE", f"/memories/{doomed}/delete"), 202)
    ran = deleting.work()

    assert "delete_memory" in ran
    gone = deleting.api("GET", f"/memories/{doomed}/details")
    assert (gone.status, gone.headers["x-amzn-ErrorType"]) == (404, "ResourceNotFoundException")
    assert deleting.items_of(doomed, doomed_partitions) == set()
    assert deleting.docs_of(doomed) == set()
    # memkit's own API finds nothing of it either
    ns = {"namespace": doomed}
    assert deleting.api("GET", "/v1/working-memory/green-own", query=ns).status == 404
    assert _ok(deleting.api("GET", "/v1/working-memory", query=ns))["sessions"] == []
    # another memory's data is as it was
    assert deleting.items_of(kept, kept_partitions) == kept_items
    assert deleting.docs_of(kept) == kept_docs
    listed = _ok(deleting.api("POST", "/memories", body={}))["memories"]
    assert [m["id"] for m in listed] == [kept]


def _steps() -> Callable[[], float]:
    """A clock a second later at each look: a run's deadline passes after a few steps."""
    ticks = itertools.count()
    return lambda: float(next(ticks))


def test_a_deletion_longer_than_a_run_goes_on_in_later_runs_until_done(
    deleting: Deleting,
) -> None:
    doomed = _filled(deleting)
    partitions = deleting.partitions_of(doomed)
    _ok(deleting.api("DELETE", f"/memories/{doomed}/delete"), 202)

    ran = deleting.work(deleting.deletion(monotonic=_steps()))

    assert ran.count("delete_memory") > 1  # each run stopped early and queued the rest
    assert deleting.api("GET", f"/memories/{doomed}/details").status == 404
    assert deleting.items_of(doomed, partitions) == set()
    assert deleting.docs_of(doomed) == set()


def test_delete_memory_again_while_it_is_deleting_is_the_same_deletion(
    deleting: Deleting,
) -> None:
    doomed = _memory(deleting, "doomed")

    first = deleting.api("DELETE", f"/memories/{doomed}/delete")
    again = deleting.api("DELETE", f"/memories/{doomed}/delete")
    ran = deleting.work()

    assert first.body == again.body == {"memoryId": doomed, "status": "DELETING"}
    assert ran.count("delete_memory") == 1
    assert deleting.api("DELETE", f"/memories/{doomed}/delete").status == 404


def test_an_extraction_that_comes_while_its_memory_is_deleted_writes_nothing(
    deleting: Deleting,
) -> None:
    doomed = _filled(deleting)
    _ok(deleting.api("DELETE", f"/memories/{doomed}/delete"), 202)
    before = deleting.items_of(doomed)

    # (its stamp: after the session's last write, as a job queued after the quiet period)
    job = Job("extract", TENANT, doomed, "green-ada", stamp="9999")
    outcome = _curator(deleting.world).run(job)

    assert outcome == "memory deleted"
    assert deleting.items_of(doomed) == before


def test_an_extraction_its_memorys_deletion_overtakes_writes_nothing_more(
    deleting: Deleting,
) -> None:
    doomed = _filled(deleting)
    before = deleting.items_of(doomed)

    def delete() -> None:
        _ok(deleting.api("DELETE", f"/memories/{doomed}/delete"), 202)

    # While the model reads the session, DeleteMemory comes
    job = Job("extract", TENANT, doomed, "green-ada", stamp="9999")
    outcome = _curator(deleting.world, Overtaken(delete)).run(job)

    assert outcome == "memory deleted"
    written = {key for key in deleting.items_of(doomed) - before if key[1] == "RECORD"}
    assert written == set()


def test_a_deletion_whose_job_failed_starts_again_with_the_next_delete_memory(
    deleting: Deleting,
) -> None:
    doomed = _filled(deleting)
    _ok(deleting.api("DELETE", f"/memories/{doomed}/delete"), 202)
    # Given its job failed every attempt the queue allows (the index refused every removal,
    # and the stream's removals have not reached it yet)
    deleting.work(deleting.deletion(RefusingIndex(deleting.world.vector_index)), stream=False)
    marked = agentcore_table(deleting.world.store).get_agent_memory(TENANT, doomed)
    failed = deleting.world.store.users.get_job(TENANT, marked.deletion_job)
    assert failed.status == "failed"
    shown = _ok(deleting.api("GET", f"/memories/{doomed}/details"))["memory"]
    assert shown["status"] == "DELETING"

    # When DeleteMemory is called again
    again = deleting.api("DELETE", f"/memories/{doomed}/delete")
    ran = deleting.work()

    # Then a new job deletes it
    assert again.body == {"memoryId": doomed, "status": "DELETING"}
    assert "delete_memory" in ran
    assert deleting.api("GET", f"/memories/{doomed}/details").status == 404
    assert deleting.docs_of(doomed) == set()


# -- what a job that read the memory's data before its deletion writes after it -----------------


def _doomed(on_clock: Deleting) -> tuple[str, LateWrites]:
    """A memory that holds what _fill writes, and the table as a job that read its data
    writes to it: DeleteMemory, and its job run until the memory is gone (what it queues
    after that left on the queue), come between that job's last look and its write."""
    doomed = _filled(on_clock)
    assert on_clock.timed is not None
    on_clock.timed.clock.catch_up()

    def delete() -> None:
        _ok(on_clock.api("DELETE", f"/memories/{doomed}/delete"), 202)
        assert on_clock.work(stream=False, rounds=1) == ["delete_memory"]
        assert on_clock.api("GET", f"/memories/{doomed}/details").status == 404

    return doomed, LateWrites(on_clock.world.store.records, delete)


def _written_late(on_clock: Deleting, memory_id: str) -> set[tuple[str, str]]:
    """The records of the memory in the table once the indexer has caught up."""
    on_clock.world.settle()
    return {key for key in on_clock.items_of(memory_id) if key[1] == "RECORD"}


def _assert_swept_again(on_clock: Deleting, memory_id: str, written: set[tuple[str, str]]) -> None:
    """The follow-up the deletion queued for once the longest job that read the memory's
    data has ended (the worker's and the indexer's timeout, and a margin) left nothing of
    what was `written` after the memory was gone, and its own job says it is done."""
    assert on_clock.timed is not None
    on_clock.work()
    assert on_clock.items_of(memory_id, {pk for pk, _ in written}) == set()
    assert on_clock.docs_of(memory_id) == set()
    assert on_clock.timed.delays == [150]
    [follow_up] = on_clock.timed.sent
    job = _ok(on_clock.api("GET", f"/v1/jobs/{follow_up.job_id}"))
    assert (follow_up.follow_up, job["kind"], job["status"]) == (1, "delete_memory", "done")


def test_what_an_extraction_running_through_the_memorys_deletion_writes_goes_in_a_follow_up(
    on_clock: Deleting,
) -> None:
    # Given a strategy's extraction of a session that found the memory ACTIVE, and
    # DeleteMemory done, its job and all, between that look and the strategy's write
    doomed, late = _doomed(on_clock)
    job = Job("extract", TENANT, doomed, "green-ada", stamp="9999")

    # When the extraction writes what it found after the memory is gone
    outcome = _curator(on_clock.world, records=late).run(job)
    written = _written_late(on_clock, doomed)

    # Then a follow-up sweep deleted it
    assert outcome == "extracted"
    assert written
    _assert_swept_again(on_clock, doomed, written)


def test_what_a_promotion_running_through_the_memorys_deletion_writes_goes_in_a_follow_up(
    on_clock: Deleting,
) -> None:
    # Given the indexer promoting a pending memory in the memory's namespace (memkit's own
    # API), and DeleteMemory done, its job and all, between its look at the pending memory
    # and its write of the record
    doomed, late = _doomed(on_clock)
    pending = {"user_id": "carol", "memories": [{"id": "carol-tea", "text": "Carol likes tea"}]}
    ns = {"namespace": doomed}
    _ok(on_clock.api("PUT", "/v1/working-memory/green-own", query=ns, body=pending))

    # When the promotion writes the record after the memory is gone
    on_clock.world.index(on_clock.world.read_stream(), on_clock.world.indexer_over(late))
    written = _written_late(on_clock, doomed)

    # Then a follow-up sweep deleted it
    assert written == {(keys.record_pk(TENANT, "carol-tea"), "RECORD")}
    _assert_swept_again(on_clock, doomed, written)


def test_a_follow_up_message_naming_its_running_job_with_another_scope_is_refused(
    on_clock: Deleting,
) -> None:
    # Given a memory's deletion done, its follow-up sweep due (taken off the queue), and
    # another memory with its data
    doomed, kept = _filled(on_clock), _filled(on_clock, "kept", "black")
    kept_partitions = on_clock.partitions_of(kept)
    kept_items, kept_docs = on_clock.items_of(kept, kept_partitions), on_clock.docs_of(kept)
    assert on_clock.timed is not None
    on_clock.timed.clock.catch_up()
    _ok(on_clock.api("DELETE", f"/memories/{doomed}/delete"), 202)
    assert on_clock.work(rounds=1) == ["delete_memory"]
    follow_up = on_clock.timed.take()

    # When its job's id comes naming the other memory, or as a user's deletion there
    forged = [
        replace(follow_up, namespace=kept),
        replace(follow_up, kind="delete_user", namespace=kept, user_id="ada"),
    ]
    responses = [on_clock.handle(job) for job in forged]
    on_clock.world.settle()
    running = _ok(on_clock.api("GET", f"/v1/jobs/{follow_up.job_id}"))

    # Then each is refused (the queue retries it, then moves it to the dead-letter queue)
    # and the other memory's data is as it was; the genuine follow-up still sweeps
    assert [len(r["batchItemFailures"]) for r in responses] == [1, 1]
    assert running["status"] == "running"
    assert on_clock.items_of(kept, kept_partitions) == kept_items
    assert on_clock.docs_of(kept) == kept_docs
    assert on_clock.handle(follow_up) == {"batchItemFailures": []}
    done = _ok(on_clock.api("GET", f"/v1/jobs/{follow_up.job_id}"))
    assert (done["kind"], done["status"]) == ("delete_memory", "done")
