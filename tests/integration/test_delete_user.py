"""A user's full deletion on moto: DELETE /v1/users/{user_id} through the real API handler,
the stream delivered to the real indexer, jobs through the real worker handler on moto's
SQS. Afterwards a Scan of the table and a browse of the index find nothing of the user in
that namespace, while another user's data and the user's other namespaces are intact, and
the keys that act as the user no longer pass the real API-key authorizer. On the local exact
index and on the DynamoDB vector table."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import boto3
import pytest

from memkit.handlers.wiring import api_services
from memkit.handlers.wiring import job_sender as sqs_job_sender
from memkit.handlers.worker import make_lambda_handler as make_worker_handler
from memkit.jobs.curation import Curator, Job
from memkit.jobs.deletion import FOLLOW_UP_HOPS, LATE_WRITES_SECONDS, MAX_FAILURES
from memkit.jobs.users import UserDeletion
from memkit.models.domain import Owner
from memkit.service.long_term import LongTermService
from memkit.store import keys
from memkit.store.users import job_key
from tests.conftest import ApiResponse, LambdaContextStub, call_api
from tests.events import sqs_record
from tests.integration.memory_world import BACKENDS, LateWrites, MemoryWorld, backend_world
from tests.integration.work_queue import Clock, DelaysOnClock, delivered, received, work_queue

pytestmark = pytest.mark.integration


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest, dynamodb_table: str) -> Iterator[MemoryWorld]:
    """The local exact index, or the DynamoDB vector table (VectorStore dynamodb)."""
    with backend_world(request.param, dynamodb_table) as built:
        yield built


ADA, BOB = "u-ada", "u-bob"
OTHER = "elsewhere"  # another namespace
TENANT = "default"


# -- building a user's memory ------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """What `_populate` wrote for one user in one namespace."""

    user_id: str
    namespace: str
    sessions: tuple[str, ...]
    records: tuple[str, ...]

    def partitions(self) -> set[str]:
        """Every table partition that holds only this user's data in this namespace."""
        return {
            *(keys.session_pk(TENANT, self.namespace, s) for s in self.sessions),
            keys.user_pk(TENANT, self.namespace, self.user_id),
            *(keys.record_pk(TENANT, r) for r in self.records),
        }


def _ok(response: ApiResponse, status: int = 200) -> Any:
    assert response.status == status, response.body
    return response.body


def _exchange(tag: str, first: int, said: str, answer: str) -> list[dict[str, str]]:
    """A user's message and the assistant's answer, numbered from `first`."""
    return [
        {"id": f"{tag}-m{first}", "role": "user", "content": said},
        {"id": f"{tag}-m{first + 1}", "role": "assistant", "content": answer},
    ]


def _populate(world: MemoryWorld, user_id: str, namespace: str) -> Stored:
    """Two sessions (messages, a pending memory, a session scratchpad), a user scratchpad and
    two long-term records, for `user_id` in `namespace`."""
    tag = f"{user_id}-{namespace}"
    ns = {"namespace": namespace}
    first, second = f"{tag}-chat-1", f"{tag}-chat-2"
    said = _exchange(tag, 1, "I moved to Lisbon.", "How is the weather?")
    memory = {"id": f"{tag}-pm", "text": "The user lives in Lisbon"}
    body = {"user_id": user_id, "messages": said, "memories": [memory]}
    _ok(world.api("PUT", f"/v1/working-memory/{first}", query=ns, body=body))
    appended = {"user_id": user_id, "messages": _exchange(tag, 3, "I like tea.", "Noted, tea.")}
    _ok(world.api("POST", f"/v1/working-memory/{second}/messages", query=ns, body=appended), 201)
    _ok(
        world.api(
            "PUT",
            f"/v1/working-memory/{first}/scratchpad",
            query={**ns, "user_id": user_id},
            body={"content": "plan: find a flat"},
        )
    )
    _ok(world.api("PUT", "/v1/profiles/prefs", query=ns, body={"scope": "user"}))
    _ok(
        world.api(
            "PUT",
            f"/v1/users/{user_id}/scratchpad",
            query={**ns, "profile": "prefs"},
            body={"content": "prefers short answers"},
        )
    )
    records = (f"{tag}-r1", f"{tag}-r2")
    _ok(
        world.api(
            "POST",
            "/v1/long-term-memory/",
            body={
                "memories": [
                    {"id": records[0], "text": "Works as a nurse", "user_id": user_id, **ns},
                    {"id": records[1], "text": "Has a cat named Miso", "user_id": user_id, **ns},
                ]
            },
        )
    )
    return Stored(user_id, namespace, (first, second), (*records, f"{tag}-pm"))


# -- what is left ------------------------------------------------------------------------------


def _table(table: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    items: list[dict[str, Any]] = []
    for page in client.get_paginator("scan").paginate(TableName=table):
        items.extend(page["Items"])
    return items


def _namespace_of(item: dict[str, Any]) -> str | None:
    value = item.get("namespace", {}).get("S")
    return str(value) if value is not None else None


def _leftovers(table: str, stored: Stored) -> list[dict[str, Any]]:
    """Items in the user's partitions, or whose attributes name the user, in the namespace."""
    doomed = stored.partitions()
    return [
        item
        for item in _table(table)
        if item["PK"]["S"] in doomed
        or (stored.user_id in json.dumps(item) and _namespace_of(item) == stored.namespace)
    ]


def _docs(world: MemoryWorld, stored: Stored) -> list[Any]:
    """The index's docs of the user in the namespace."""
    return [
        hit
        for hit in world.indexed(TENANT)
        if hit.fields.get("user_id") == stored.user_id
        and hit.fields.get("namespace") == stored.namespace
    ]


def _snapshot(world: MemoryWorld, table: str, stored: Stored) -> tuple[int, int]:
    return len(_leftovers(table, stored)), len(_docs(world, stored))


def _snapshots(world: MemoryWorld, table: str, kept: list[Stored]) -> list[tuple[int, int]]:
    return [_snapshot(world, table, stored) for stored in kept]


def _assert_gone(world: MemoryWorld, table: str, stored: Stored) -> None:
    """Nothing of the user in the namespace is left in the table or the index."""
    assert _leftovers(table, stored) == []
    assert _docs(world, stored) == []


@dataclass(frozen=True)
class Everyone:
    """Ada's memory in the default namespace, and what must survive her deletion: Bob's in
    the same namespace and Ada's own in another (`before`: their items and docs)."""

    world: MemoryWorld
    table: str
    ada: Stored
    kept: list[Stored]
    before: list[tuple[int, int]]

    def ada_left(self) -> tuple[int, int]:
        """How many of Ada's table items and docs in the default namespace there are now."""
        return _snapshot(self.world, self.table, self.ada)

    def assert_only_ada_gone(self) -> None:
        """Nothing of Ada's in the namespace is left, and all that was to survive is there."""
        _assert_gone(self.world, self.table, self.ada)
        assert _snapshots(self.world, self.table, self.kept) == self.before


@pytest.fixture
def everyone(world: MemoryWorld, dynamodb_table: str) -> Everyone:
    ada = _populate(world, ADA, "default")
    kept = [_populate(world, BOB, "default"), _populate(world, ADA, OTHER)]
    world.settle()  # pending memories become records, messages and records are indexed
    world.settle()  # the promoted records are indexed
    return Everyone(world, dynamodb_table, ada, kept, _snapshots(world, dynamodb_table, kept))


def _drop_session_meta(table: str, session_id: str) -> str:
    """Delete a session's meta item alone, as TTL or the cleanup run does while the messages
    index_all_messages keeps stay; the session's partition."""
    pk, sk = keys.session_key(TENANT, "default", session_id)
    boto3.client("dynamodb", region_name="us-east-1").delete_item(
        TableName=table, Key={"PK": {"S": pk}, "SK": {"S": sk}}
    )
    return pk


def _steps() -> Callable[[], float]:
    """A clock a second later at each look: a deadline passes after a few steps."""
    ticks = itertools.count()
    return lambda: float(next(ticks))


def _ada() -> Owner:
    return Owner(tenant=TENANT, namespace="default", user_id=ADA)


class WrappedIndex:
    """A double of OpenSearch over the world's local index: it lists what that one holds."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def browse(self, tenant: str, k: int, offset: int, conditions: Any = ()) -> Any:
        return self.inner.browse(tenant, k, offset, conditions)


class RefusingIndex(WrappedIndex):
    """OpenSearch when its bulk requests keep failing: it lists, never removes."""

    def remove(self, removals: Any) -> dict[str, str]:
        return {removal.id: "unavailable" for removal in removals}


class LaggingIndex(WrappedIndex):
    """OpenSearch between refreshes: it takes a removal at once, but lists the doc until its
    next refresh (`refresh`)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.pending: list[Any] = []

    def remove(self, removals: Any) -> dict[str, str]:
        self.pending.extend(removals)
        return {}

    def refresh(self, _seconds: float = 0.0) -> None:
        self.inner.remove(self.pending)
        self.pending = []


# -- the API with a queue, and the worker --------------------------------------------------------


@dataclass
class Queued:
    """An API handler over the world's table and index with a work queue (moto's SQS) and a
    deletion budget, and the memory worker that reads that queue.

    With `timed`, the queue and the deletions run on its clock (`send`): moto's SQS holds
    each message undelayed and the test's clock stands in for the time SQS's delay would
    wait."""

    world: MemoryWorld
    sqs: Any
    url: str
    api_handler: Any
    timed: DelaysOnClock | None = None
    store: Any = None  # the deletions' store (default: the world's)

    @property
    def clock(self) -> Clock | None:
        return self.timed.clock if self.timed is not None else None

    @property
    def delays(self) -> list[int]:
        """Each message's DelaySeconds, as the deletions sent it."""
        assert self.timed is not None
        return self.timed.delays

    @property
    def sent(self) -> list[Job]:
        """Each message the queue took from the deletions, in order."""
        assert self.timed is not None
        return self.timed.sent

    def refuse(self, sends: int) -> None:
        """The work queue refuses the next `sends` sends (as SQS refuses one to a queue that
        is gone)."""
        assert self.timed is not None
        self.timed.refusals = sends

    def api(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
        return call_api(self.api_handler, method, path, **kwargs)

    def send(self, job: Job) -> None:
        """The work queue on the test's clock (DelaysOnClock)."""
        assert self.timed is not None
        self.timed.send(job)

    def take(self) -> Job:
        """The next message, taken off the queue when SQS gives it (the clock moved there)."""
        assert self.timed is not None
        return self.timed.take()

    def deletion(self, index: Any = None, **options: Any) -> UserDeletion:
        """A deletion over `index` (default: the world's) with `options` (clock, window...)."""
        chosen = index or self.world.vector_index
        if self.clock is not None:
            options = {"clock": self.clock, **options}
            return UserDeletion(self.store, lambda: chosen, self.send, **options)
        send = sqs_job_sender(self.url, "us-east-1", None)
        return UserDeletion(self.world.store, lambda: chosen, send, **options)

    def work(
        self, deletion: UserDeletion | None = None, rounds: int = 50, model: Any = None
    ) -> list[dict[str, Any]]:
        """Run the worker over the queue until it is empty, or for `rounds` receives (on a
        clock, one message each), its curation jobs with `model` (default: the local
        model); its responses."""
        from memkit.llm.local import LocalModel

        handler = self.worker(deletion, model or LocalModel())
        responses = []
        for _ in range(rounds):  # a job queues itself again until done
            messages = received(self.sqs, self.url, self.timed)
            if not messages:
                return responses
            event = {"Records": [sqs_record(m) for m in messages]}
            response = dict(handler(event, LambdaContextStub()))
            responses.append(response)
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
            for m in messages:
                if m["MessageId"] not in failed:
                    self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=m["ReceiptHandle"])
        if rounds < 50:
            return responses
        raise AssertionError("the queue never emptied")

    def worker(self, deletion: UserDeletion | None, model: Any) -> Any:
        """The memory worker's handler over the world, `deletion` (default: a new one) and
        `model` for its curation jobs."""
        world = self.world
        store = world.store
        long_term = LongTermService(
            store.records, store.sessions, lambda: world.vector_index, lambda: world.embedder
        )
        curator = Curator(store.curation, store.sessions, long_term, model)
        chosen = deletion or self.deletion()
        return make_worker_handler(lambda: curator, lambda: chosen)

    def handle(self, job: Job, deletion: UserDeletion) -> dict[str, Any]:
        """The worker's response to a batch of one message, `job` (the queue is not read)."""
        from memkit.llm.local import LocalModel

        return dict(self.worker(deletion, LocalModel())(delivered(job), LambdaContextStub()))


def _api_over(
    world: MemoryWorld, table: str, index: Any = None, queue: Queued | None = None, **settings: Any
) -> Any:
    """An API handler over the world's table, and over `index` (a factory; default: the
    world's index); with `queue` on a clock, its deletions run on that queue and clock."""
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler

    api_settings = ApiSettings(table_name=table, region="us-east-1", **settings)
    store, timed = world.store, {}
    if queue is not None and queue.clock is not None:
        store, timed = queue.store, {"send": queue.send, "clock": queue.clock}
    services = api_services(
        store,
        api_settings,
        index=index or (lambda: world.vector_index),
        embedder=lambda: world.embedder,
        **timed,
    )
    return make_lambda_handler(lambda: services)


@pytest.fixture
def queued(world: MemoryWorld, dynamodb_table: str) -> Queued:
    """The API with no time at all for a deletion: every deletion becomes a job."""
    sqs, url = work_queue()
    handler = _api_over(world, dynamodb_table, user_deletion_budget_seconds=0, work_queue_url=url)
    return Queued(world, sqs, url, handler)


@pytest.fixture
def on_clock(world: MemoryWorld, dynamodb_table: str) -> Queued:
    """A work queue whose delays pass on the test's clock, which the table's store (with the
    API keys' stamps) and the deletions read too. Its API handler is built by the test."""
    from memkit.config import ApiSettings
    from memkit.store.dynamodb import DynamoStore

    sqs, url = work_queue()
    timed = DelaysOnClock(sqs, url, Clock())
    settings = ApiSettings(table_name=dynamodb_table, region="us-east-1")
    store = DynamoStore(settings, clock=timed.clock, index_messages=True)
    return Queued(world, sqs, url, None, timed=timed, store=store)


# -- deletion within the request ---------------------------------------------------------------


def test_deleting_a_user_leaves_nothing_of_them_in_the_table_or_the_index(
    world: MemoryWorld, everyone: Everyone
) -> None:
    ada_items, ada_docs = everyone.ada_left()

    response = world.api("DELETE", f"/v1/users/{ADA}")
    world.settle()  # the stream's REMOVE records reach the indexer too

    assert response.status == 200, response.body
    assert response.body == {
        "status": "done",
        "deleted": {
            "sessions": 2,
            "items": ada_items,
            "records": 3,
            "vectors": ada_docs,
            "api_keys": 0,
        },
    }
    assert (ada_items, ada_docs) == (15, 7)  # what was there: 4 messages + 3 records indexed
    everyone.assert_only_ada_gone()


def test_deleting_a_user_erases_the_history_of_their_records_too(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given a user whose records have history: a slot superseded twice, an edit, a record
    # deleted (its history kept for a restore), and another user's record with history
    ltm = "/v1/long-term-memory"
    for city in ("Paris", "Berlin", "Oslo"):
        home = {"id": f"home-{city}", "text": f"Lives in {city}", "user_id": ADA, "key": "city"}
        _ok(world.api("POST", f"{ltm}/", body={"memories": [home]}))
    _ok(world.api("PATCH", f"{ltm}/home-Oslo", body={"topics": ["home"]}))
    _ok(
        world.api(
            "POST",
            f"{ltm}/",
            body={"memories": [{"id": "tea", "text": "Likes tea", "user_id": ADA}]},
        )
    )
    _ok(world.api("DELETE", ltm, query={"memory_ids": ["tea"]}))
    bobs = {"id": "bob-job", "text": "Works at Acme", "user_id": BOB}
    _ok(world.api("POST", f"{ltm}/", body={"memories": [bobs]}))
    _ok(world.api("PATCH", f"{ltm}/bob-job", body={"text": "Works at Globex"}))
    world.settle()
    before = _table(dynamodb_table)
    assert any(item["SK"]["S"].startswith("V#") for item in before)

    # When the user is deleted
    _ok(world.api("DELETE", f"/v1/users/{ADA}"))
    world.settle()

    # Then nothing of theirs is left: no record, version, tombstone or slot, no history to
    # read or restore; the other user's history is untouched
    left = _table(dynamodb_table)
    assert [item for item in left if ADA in json.dumps(item)] == []
    for record_id in ("home-Paris", "home-Oslo", "tea"):
        assert world.api("GET", f"{ltm}/{record_id}/history").status == 404
    bob = world.api("GET", f"{ltm}/bob-job/history")
    assert [v["change"] for v in bob.body["versions"]] == ["edit", "create"]


def test_nothing_of_the_user_is_searchable_before_the_stream_catches_up(
    world: MemoryWorld, everyone: Everyone
) -> None:
    ada = everyone.ada

    world.api("DELETE", f"/v1/users/{ADA}")  # no settle: the stream has not been read
    search = world.api(
        "POST",
        "/v1/long-term-memory/search",
        body={"text": "", "user_id": {"eq": ADA}, "namespace": {"eq": "default"}},
    )

    assert _docs(world, ada) == []
    assert search.body["memories"] == []


def test_the_namespace_query_deletes_only_that_namespace(
    world: MemoryWorld, dynamodb_table: str, everyone: Everyone
) -> None:
    elsewhere = next(s for s in everyone.kept if s.namespace == OTHER)
    default_before = everyone.ada_left()

    response = world.api("DELETE", f"/v1/users/{ADA}", query={"namespace": OTHER})
    world.settle()

    assert response.body["deleted"]["sessions"] == 2
    _assert_gone(world, dynamodb_table, elsewhere)
    assert everyone.ada_left() == default_before


@pytest.mark.usefixtures("everyone")
def test_deleting_a_user_again_or_one_with_nothing_stored_answers_done_with_zero_counts(
    world: MemoryWorld,
) -> None:
    world.api("DELETE", f"/v1/users/{ADA}")
    world.settle()

    again = world.api("DELETE", f"/v1/users/{ADA}")
    nobody = world.api("DELETE", "/v1/users/u-nobody", query={"namespace": "default"})

    zero = {"sessions": 0, "items": 0, "records": 0, "vectors": 0, "api_keys": 0}
    assert (again.status, again.body) == (200, {"status": "done", "deleted": zero})
    assert (nobody.status, nobody.body) == (200, {"status": "done", "deleted": zero})


def test_the_user_scratchpad_routes_still_answer_beside_the_users_route(
    world: MemoryWorld,
) -> None:
    world.api("PUT", "/v1/profiles/prefs", body={"scope": "user"})
    world.api(
        "PUT", f"/v1/users/{ADA}/scratchpad", query={"profile": "prefs"}, body={"content": "x"}
    )

    world.api("DELETE", f"/v1/users/{ADA}")
    pad = world.api("GET", f"/v1/users/{ADA}/scratchpad", query={"profile": "prefs"})

    assert pad.status == 200
    assert pad.body["content"] is None  # deleted by the user's deletion, not by this route


@pytest.mark.parametrize(
    ("path", "query", "field"),
    [
        (f"/v1/users/{'u' * 257}", {}, "user_id"),
        (f"/v1/users/{ADA}", {"namespace": ""}, "namespace"),
    ],
)
def test_an_invalid_user_or_namespace_is_422_and_deletes_nothing(
    world: MemoryWorld, path: str, query: dict[str, str], field: str, everyone: Everyone
) -> None:
    before = everyone.ada_left()

    response = world.api("DELETE", path, query=query)

    assert response.status == 422
    assert response.body["errors"][0]["field"] == field
    assert everyone.ada_left() == before


def test_more_vectors_than_one_listing_reaches_all_go_though_the_index_lists_removals_late(
    world: MemoryWorld, dynamodb_table: str, everyone: Everyone
) -> None:
    _drop_session_meta(
        dynamodb_table, everyone.ada.sessions[1]
    )  # its messages: named by the index alone
    lagging = LaggingIndex(world.vector_index)
    # Listings two docs deep; the index refreshes while the deletion waits for it.
    deletion = UserDeletion(world.store, lambda: lagging, None, window=2, wait=lagging.refresh)

    outcome = deletion.delete(_ada(), 10.0)
    lagging.refresh()

    assert outcome.job is None
    assert outcome.counts.vectors == 7
    everyone.assert_only_ada_gone()


# -- deletion as a job -------------------------------------------------------------------------


def test_a_deletion_out_of_time_answers_202_and_the_worker_finishes_it(
    queued: Queued, everyone: Everyone
) -> None:
    ada_items, ada_docs = everyone.ada_left()

    response = queued.api("DELETE", f"/v1/users/{ADA}")
    job_id = response.body["job_id"]
    running = queued.api("GET", f"/v1/jobs/{job_id}")
    responses = queued.work()
    finished = queued.api("GET", f"/v1/jobs/{job_id}")
    queued.world.settle()

    assert response.status == 202
    assert response.body == {"status": "running", "job_id": job_id}
    assert response.headers["Location"] == f"/v1/jobs/{job_id}"
    assert running.body["status"] == "running"
    assert all(r == {"batchItemFailures": []} for r in responses)
    assert finished.status == 200
    assert finished.body["job_id"] == job_id
    assert finished.body["kind"] == "delete_user"
    assert finished.body["status"] == "done"
    counts = {"sessions": 2, "items": ada_items, "records": 3, "vectors": ada_docs, "api_keys": 0}
    assert finished.body["counts"] == counts
    assert finished.body["updated_at"] >= finished.body["created_at"]
    everyone.assert_only_ada_gone()


def test_a_job_resumes_where_a_deletion_cut_short_stopped(
    queued: Queued, everyone: Everyone
) -> None:
    ada_items, _ = everyone.ada_left()
    deletion = queued.deletion(monotonic=_steps())  # the run stops after a few steps

    outcome = deletion.delete(_ada(), 3.0)
    partial = everyone.ada_left()[0]
    queued.work()
    assert outcome.job is not None
    job = queued.api("GET", f"/v1/jobs/{outcome.job.job_id}").body

    assert 0 < outcome.counts.items < ada_items  # some of it in the request, not all
    assert partial == ada_items - outcome.counts.items
    assert job["status"] == "done"
    assert job["counts"]["items"] == ada_items
    everyone.assert_only_ada_gone()


def test_a_deletion_the_index_did_not_catch_up_with_in_time_is_finished_by_the_job(
    queued: Queued, everyone: Everyone
) -> None:
    lagging = LaggingIndex(queued.world.vector_index)
    # Listings two docs deep on an index that does not refresh during the request.
    request = queued.deletion(lagging, window=2, wait=lambda _: None)

    outcome = request.delete(_ada(), 10.0)
    lagging.refresh()
    queued.work(queued.deletion(lagging, window=2, wait=lagging.refresh))
    lagging.refresh()
    assert outcome.job is not None
    job = queued.api("GET", f"/v1/jobs/{outcome.job.job_id}").body

    assert job["status"] == "done"
    everyone.assert_only_ada_gone()


def test_a_session_too_large_for_the_budget_goes_page_by_page_and_the_job_finishes_it(
    queued: Queued, dynamodb_table: str
) -> None:
    world = queued.world
    session = "long-chat"
    for batch in range(3):
        messages = [{"id": f"m{batch}-{n}", "role": "user", "content": "hello"} for n in range(100)]
        _ok(
            world.api(
                "POST",
                f"/v1/working-memory/{session}/messages",
                body={"user_id": ADA, "messages": messages},
            ),
            201,
        )
    stored = Stored(ADA, "default", (session,), ())
    items = len(_leftovers(dynamodb_table, stored))
    deletion = queued.deletion(monotonic=_steps())  # the run stops after a few steps

    outcome = deletion.delete(_ada(), 2.0)
    meanwhile = world.api("GET", f"/v1/working-memory/{session}")
    queued.work()
    assert outcome.job is not None
    job = queued.api("GET", f"/v1/jobs/{outcome.job.job_id}").body

    assert 0 < outcome.counts.items < items  # the request stopped inside the session
    assert meanwhile.status == 200  # the session item goes last: the job finds it again
    assert job["status"] == "done"
    assert (job["counts"]["sessions"], job["counts"]["items"]) == (1, items)
    assert _leftovers(dynamodb_table, stored) == []


@pytest.mark.usefixtures("everyone")
def test_a_job_that_fails_every_attempt_the_queue_allows_is_reported_failed(
    queued: Queued,
) -> None:

    job_id = queued.api("DELETE", f"/v1/users/{ADA}").body["job_id"]

    responses = queued.work(queued.deletion(RefusingIndex(queued.world.vector_index)))
    job = queued.api("GET", f"/v1/jobs/{job_id}").body

    failures = [r for r in responses if r["batchItemFailures"]]
    assert len(failures) == MAX_FAILURES  # each attempt returned to the queue, then no more
    assert job["status"] == "failed"


@pytest.mark.usefixtures("everyone")
def test_a_job_item_names_no_user_and_expires_a_week_after_it_started(
    queued: Queued, dynamodb_table: str
) -> None:
    job_id = queued.api("DELETE", f"/v1/users/{ADA}").body["job_id"]
    [item] = [i for i in _table(dynamodb_table) if i["PK"]["S"].endswith(f"#JOB#{job_id}")]

    assert ADA not in json.dumps(item)
    created = item["created_at"]["S"]
    from datetime import datetime

    started = datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    assert int(item["expires_at"]["N"]) - int(started) == 7 * 24 * 3600


@pytest.mark.usefixtures("everyone")
def test_an_unknown_job_and_another_tenants_job_are_404(
    queued: Queued, dynamodb_table: str
) -> None:
    job_id = queued.api("DELETE", f"/v1/users/{ADA}").body["job_id"]
    other_tenant = _api_over(queued.world, dynamodb_table, default_tenant="someone-else")

    unknown = queued.api("GET", "/v1/jobs/01JNOSUCHJOB0000000000000")
    foreign = call_api(other_tenant, "GET", f"/v1/jobs/{job_id}")

    assert (unknown.status, unknown.body["code"]) == (404, "not_found")
    assert (foreign.status, foreign.body["code"]) == (404, "not_found")


# -- a session's deletion ----------------------------------------------------------------------


def test_deleting_a_session_removes_its_message_vectors_at_once_and_keeps_its_records(
    world: MemoryWorld, everyone: Everyone
) -> None:
    ada = everyone.ada
    session = ada.sessions[0]
    promoted = f"{ADA}-default-pm"  # the pending memory, now a long-term record

    def session_docs() -> list[Any]:
        return [h for h in _docs(world, ada) if h.fields.get("session_id") == session]

    before = {h.fields["memory_type"] for h in session_docs()}
    response = world.api("DELETE", f"/v1/working-memory/{session}")  # no settle

    assert response.status == 200
    assert before == {"message", "semantic"}
    assert [(h.fields["memory_type"], h.fields["record_id"]) for h in session_docs()] == [
        ("semantic", promoted)
    ]
    assert world.api("GET", f"/v1/long-term-memory/{promoted}").status == 200


def test_a_session_delete_answers_200_when_the_index_cannot_be_built(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    def unreachable() -> Any:
        raise RuntimeError("no route to the search domain")

    api = _api_over(world, dynamodb_table, index=unreachable)
    message = {"role": "user", "content": "hi"}
    world.api("PUT", "/v1/working-memory/chat", body={"messages": [message]})
    world.settle()  # the message is indexed
    indexed = len(world.indexed(TENANT, 10))

    deleted = call_api(api, "DELETE", "/v1/working-memory/chat")
    again = call_api(api, "DELETE", "/v1/working-memory/chat")  # nothing left to delete
    world.settle()  # the stream's REMOVE records take the vector out

    assert (deleted.status, again.status) == (200, 200)
    assert world.api("GET", "/v1/working-memory/chat").status == 404
    assert (indexed, len(world.indexed(TENANT, 10))) == (1, 0)


def test_messages_that_outlived_their_session_are_found_through_the_index_and_deleted(
    world: MemoryWorld, dynamodb_table: str, everyone: Everyone
) -> None:
    # No table listing names the session's messages now.
    pk = _drop_session_meta(dynamodb_table, everyone.ada.sessions[1])
    left = [i for i in _table(dynamodb_table) if i["PK"]["S"] == pk]

    response = world.api("DELETE", f"/v1/users/{ADA}")
    world.settle()

    assert len(left) == 2  # the two messages
    assert response.body["deleted"]["sessions"] == 1  # the one the user's listing names
    everyone.assert_only_ada_gone()


def test_a_record_the_lifecycle_index_does_not_list_is_found_through_the_vector_index(
    world: MemoryWorld, dynamodb_table: str, everyone: Everyone
) -> None:
    # A record written before the lifecycle index existed carries none of its keys.
    pk, sk = keys.record_key(TENANT, everyone.ada.records[0])
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=dynamodb_table,
        Key={"PK": {"S": pk}, "SK": {"S": sk}},
        UpdateExpression="REMOVE GSI3PK, GSI3SK",
    )
    world.settle()  # the change reaches the indexer (nothing it indexes changed)

    response = world.api("DELETE", f"/v1/users/{ADA}")
    world.settle()

    assert response.body["deleted"]["records"] == 3
    everyone.assert_only_ada_gone()


# -- the user's API keys -------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyedApi:
    """The API in `AuthMode=apikey` over a world's table and index, reached as API Gateway
    does: each request's key goes through the real authorizer handler first, and the API gets
    the context it answered (`requestContext.authorizer.lambda`). The gateway keeps each
    answer (ApiKeyCacheSeconds); a request `cached` is let in on the key's kept answer."""

    handler: Any
    keys: Any  # ApiKeyService over the same table
    cache: dict[str, dict[str, Any]] = field(default_factory=dict)

    def authorized(self, plain: str) -> bool:
        return bool(self._authorize(plain)["isAuthorized"])

    def api(
        self, plain: str, method: str, path: str, cached: bool = False, **kwargs: Any
    ) -> ApiResponse:
        answer = self.cache[plain] if cached else self._authorize(plain)
        assert answer["isAuthorized"], "the gateway answers 403 without calling the API"
        self.cache[plain] = answer
        return call_api(
            self.handler, method, path, authorizer={"lambda": answer["context"]}, **kwargs
        )

    def _authorize(self, plain: str) -> dict[str, Any]:
        from memkit.handlers import authorizer
        from tests.events import authorizer_event

        handler = authorizer.make_lambda_handler(lambda: self.keys)
        return dict(handler(authorizer_event(f"Bearer {plain}"), LambdaContextStub()))


def _keyed(
    world: MemoryWorld, table: str, queue: Queued | None = None, **settings: Any
) -> KeyedApi:
    """The keyed API; with `queue` on a clock, its deletions and keys run on that clock and
    send to that queue."""
    from memkit.config import ApiKeySettings
    from memkit.service.api_keys import ApiKeyService
    from memkit.store.apikeys import api_key_table

    handler = _api_over(world, table, queue=queue, auth_mode="apikey", **settings)
    clock = queue.clock if queue is not None and queue.clock is not None else time.time
    keys = ApiKeyService(api_key_table(ApiKeySettings(table_name=table)), clock=clock)
    return KeyedApi(handler, keys)


def test_deleting_a_user_revokes_the_keys_that_act_as_them(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    keyed = _keyed(world, dynamodb_table)
    ada = keyed.keys.create(TENANT, ["memory:read", "memory:write"], ADA).plain
    ada_admin = keyed.keys.create(TENANT, ["memory:admin", "memory:read"], ADA).plain
    bob = keyed.keys.create(TENANT, ["memory:read", "memory:write"], BOB).plain
    backend = keyed.keys.create(TENANT, ["memory:admin", "memory:read", "memory:write"]).plain
    said = {"messages": [{"role": "user", "content": "hi"}]}
    before = keyed.api(ada, "PUT", "/v1/working-memory/chat", body=said)

    deleted = keyed.api(backend, "DELETE", f"/v1/users/{ADA}")
    keys = keyed.keys.keys_of(TENANT)

    assert before.status == 200, before.body
    assert deleted.status == 200, deleted.body
    assert deleted.body["deleted"]["api_keys"] == 2
    assert (keyed.authorized(ada), keyed.authorized(ada_admin)) == (False, False)
    assert (keyed.authorized(bob), keyed.authorized(backend)) == (True, True)
    # Revoked as `memkit keys revoke` does: the records stay listed, marked revoked.
    statuses = sorted((k.user_id or "", k.status(0), k.revoked_at is not None) for k in keys)
    assert statuses == [
        ("", "active", False),
        (ADA, "revoked", True),
        (ADA, "revoked", True),
        (BOB, "active", False),
    ]


def test_a_deletion_that_becomes_a_job_revokes_the_keys_at_once(
    world: MemoryWorld, dynamodb_table: str, queued: Queued
) -> None:
    keyed = _keyed(world, dynamodb_table, user_deletion_budget_seconds=0, work_queue_url=queued.url)
    ada = keyed.keys.create(TENANT, ["memory:read", "memory:write"], ADA).plain
    backend = keyed.keys.create(TENANT, ["memory:admin", "memory:read", "memory:write"]).plain
    _populate(world, ADA, "default")

    running = keyed.api(backend, "DELETE", f"/v1/users/{ADA}")
    refused_before_the_job_ran = not keyed.authorized(ada)
    queued.work()
    job = keyed.api(backend, "GET", f"/v1/jobs/{running.body['job_id']}")

    assert running.status == 202, running.body
    assert refused_before_the_job_ran
    assert (job.body["status"], job.body["counts"]["api_keys"]) == ("done", 1)


READ_WRITE = ["memory:read", "memory:write"]
BACKEND = ["memory:admin", "memory:read", "memory:write"]


def test_a_key_that_keeps_changing_is_left_to_the_job_while_the_rest_is_deleted(
    world: MemoryWorld,
    dynamodb_table: str,
    queued: Queued,
    monkeypatch: pytest.MonkeyPatch,
    debug_log: Any,
) -> None:
    from botocore.exceptions import ClientError

    from memkit.service.api_keys import key_hash

    keyed = _keyed(world, dynamodb_table, work_queue_url=queued.url)
    racing = keyed.keys.create(TENANT, READ_WRITE, ADA).plain
    calm = keyed.keys.create(TENANT, READ_WRITE, ADA).plain
    backend = keyed.keys.create(TENANT, BACKEND).plain
    stored = _populate(world, ADA, "default")
    world.settle()
    # Every revocation of one key is cancelled by a conflict (as when the authorizer writes
    # its last use at that moment), for as long as the request runs.
    client = world.store.table.items.connection.client
    send = client.transact_write_items
    contested = f"APIKEY#{key_hash(racing)}"

    def conflicting(**request: Any) -> Any:
        first = request["TransactItems"][0]
        if first.get("Delete", {}).get("Key", {}).get("PK", {}).get("S") == contested:
            reasons = [{"Code": "TransactionConflict"}, {"Code": "None"}]
            error = {"Code": "TransactionCanceledException", "Message": "conflict"}
            raise ClientError({"Error": error, "CancellationReasons": reasons}, "Transact")
        return send(**request)

    monkeypatch.setattr(client, "transact_write_items", conflicting)
    deleted = keyed.api(backend, "DELETE", f"/v1/users/{ADA}")
    racing_then = keyed.authorized(racing)
    calm_then = keyed.authorized(calm)
    left_then = _snapshot(world, dynamodb_table, stored)
    monkeypatch.setattr(client, "transact_write_items", send)  # the race is over
    queued.work()
    job = keyed.api(backend, "GET", f"/v1/jobs/{deleted.body.get('job_id')}")
    logged = [json.loads(line) for line in debug_log.getvalue().splitlines()]

    assert deleted.status == 202, deleted.body  # never a 4xx after writes
    assert (racing_then, calm_then) == (True, False)
    assert left_then == (0, 0)  # the rest of the user went within the request
    assert [line["api_keys_failed"] for line in logged if "api_keys_failed" in line] == [1]
    assert (job.body["status"], job.body["counts"]["api_keys"]) == ("done", 2)
    assert not keyed.authorized(racing)


# -- what a key the gateway still accepts writes after the deletion ------------------------------

# What Ada's key writes after her deletion, on an answer the gateway cached before it.
LATE = Stored(ADA, "default", ("late-chat",), ("late-r",))
# A session of Ada's.
TALK = {"user_id": ADA, "messages": [{"id": "m1", "role": "user", "content": "I moved."}]}
# The run that removes a session queues a follow-up before it does: due after the run's
# deadline (the budget, or the invocation's if sooner) and the longest run of an extraction
# or a promotion (and a margin).
AFTER_AN_EXTRACTION = range(LATE_WRITES_SECONDS + 1, LATE_WRITES_SECONDS + 11)


def _signed_in(keyed: KeyedApi) -> tuple[str, str]:
    """A key of Ada's and a backend key; Ada's has made a request, so the gateway keeps its
    answer."""
    ada = keyed.keys.create(TENANT, READ_WRITE, ADA).plain
    backend = keyed.keys.create(TENANT, BACKEND).plain
    _ok(keyed.api(ada, "PUT", "/v1/working-memory/chat", body={"messages": []}))
    return ada, backend


def _revoked_by_hand(keyed: KeyedApi, clock: Clock, seconds_ago: int) -> str:
    """Ada's key, revoked `seconds_ago` by `memkit keys revoke`; a backend key."""
    ada = keyed.keys.create(TENANT, READ_WRITE, ADA)
    keyed.keys.revoke(TENANT, ada.key.key_id)
    clock.now += seconds_ago
    return str(keyed.keys.create(TENANT, BACKEND).plain)


def _write_late(keyed: KeyedApi, ada: str) -> None:
    """Ada's key, let in on its cached answer, writes a session and a long-term record."""
    said = {"messages": [{"role": "user", "content": "I moved to Porto."}]}
    _ok(keyed.api(ada, "PUT", "/v1/working-memory/late-chat", cached=True, body=said))
    record = {"id": "late-r", "text": "Lives in Porto", "user_id": ADA, "namespace": "default"}
    body = {"memories": [record]}
    _ok(keyed.api(ada, "POST", "/v1/long-term-memory/", cached=True, body=body))


def test_what_a_cached_key_writes_after_its_users_deletion_goes_once_the_cache_expired(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued
) -> None:
    keyed = _keyed(world, dynamodb_table, on_clock)
    ada, backend = _signed_in(keyed)

    deleted = keyed.api(backend, "DELETE", f"/v1/users/{ADA}")
    refused = not keyed.authorized(ada)
    _write_late(keyed, ada)
    world.settle()
    written_after_done = _snapshot(world, dynamodb_table, LATE)
    on_clock.work(on_clock.deletion())
    world.settle()

    assert (deleted.status, deleted.body["deleted"]["api_keys"]) == (200, 1)
    assert refused  # the authorizer refuses the key; the gateway's cached answer does not
    assert min(written_after_done) > 0  # its items in the table, its docs in the index
    # A follow-up sweep, queued for the gateway's cache (300 s) and a request (30 s) later;
    # it found the late session, so another sweeps after that session's extraction.
    first, then = on_clock.delays
    assert (first, then in AFTER_AN_EXTRACTION) == (330, True)
    _assert_gone(world, dynamodb_table, LATE)


def test_a_key_made_for_the_user_after_the_deletion_outlives_the_follow_up(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued
) -> None:
    keyed = _keyed(world, dynamodb_table, on_clock)
    _, backend = _signed_in(keyed)

    _ok(keyed.api(backend, "DELETE", f"/v1/users/{ADA}"))
    again = keyed.keys.create(TENANT, READ_WRITE, ADA).plain  # the operator's, after "done"
    on_clock.work(on_clock.deletion())

    assert on_clock.delays == [330]
    assert keyed.authorized(again)


def test_a_follow_up_further_away_than_sqs_delays_waits_in_steps_and_sweeps_at_the_end(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued
) -> None:
    keyed = _keyed(world, dynamodb_table, on_clock, api_key_cache_seconds=3600)
    ada, backend = _signed_in(keyed)
    deletion = on_clock.deletion(key_cache_seconds=3600)
    started = on_clock.clock()

    _ok(keyed.api(backend, "DELETE", f"/v1/users/{ADA}"))
    on_clock.work(deletion, rounds=4)  # SQS delays a message at most 900 s
    _write_late(keyed, ada)  # an hour on: the cached answer is still the gateway's
    world.settle()
    on_clock.work(deletion)
    world.settle()

    # The follow-up found the late session: the next sweeps after its extraction
    *steps, next_one = on_clock.delays
    assert steps == [900, 900, 900, 900, 30]
    assert next_one in AFTER_AN_EXTRACTION
    assert on_clock.clock() - started == 3630 + next_one
    _assert_gone(world, dynamodb_table, LATE)


def test_a_key_revoked_by_hand_before_the_deletion_is_swept_after_from_its_revocation(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued
) -> None:
    keyed = _keyed(world, dynamodb_table, on_clock)
    backend = _revoked_by_hand(keyed, on_clock.clock, seconds_ago=100)

    deleted = keyed.api(backend, "DELETE", f"/v1/users/{ADA}")

    assert (deleted.status, deleted.body["deleted"]["api_keys"]) == (200, 0)
    assert on_clock.delays == [230]


def test_a_user_with_no_key_revoked_lately_costs_no_follow_up(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued
) -> None:
    on_clock.clock.now += 0.25  # as time.time() reads: a second and a fraction
    keyed = _keyed(world, dynamodb_table, on_clock)
    backend = _revoked_by_hand(keyed, on_clock.clock, seconds_ago=330)  # no longer accepted

    deleted = keyed.api(backend, "DELETE", f"/v1/users/{ADA}")
    bob = keyed.api(backend, "DELETE", f"/v1/users/{BOB}")  # never had a key

    assert (deleted.status, bob.status) == (200, 200)
    assert on_clock.delays == []


def test_a_deletion_a_job_finished_sweeps_again_once_the_cache_expired(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued
) -> None:
    keyed = _keyed(world, dynamodb_table, on_clock, user_deletion_budget_seconds=0)
    ada, backend = _signed_in(keyed)
    deletion = on_clock.deletion()

    running = keyed.api(backend, "DELETE", f"/v1/users/{ADA}")
    on_clock.work(deletion, rounds=1)  # the job: done, and a follow-up queued
    job = keyed.api(backend, "GET", f"/v1/jobs/{running.body['job_id']}")
    _write_late(keyed, ada)
    world.settle()
    on_clock.work(deletion)
    world.settle()

    assert running.status == 202
    assert job.body["status"] == "done"
    queued, first, then = on_clock.delays
    assert (queued, first, then in AFTER_AN_EXTRACTION) == (0, 330, True)
    _assert_gone(world, dynamodb_table, LATE)


# -- what an extraction running through the deletion writes after it -----------------------------

# The session whose extraction runs through Ada's deletion, and what it writes after "done".
EXTRACTED = Stored(ADA, "default", ("talk",), ())


def _assert_swept_again(
    on_clock: Queued,
    table: str,
    stored: Stored,
    deleted: list[ApiResponse],
    answers: tuple[int, ...] = (200,),
) -> None:
    """What a job wrote after the deletion answered (`deleted`, as `answers`) was there once
    the indexer caught up, and the one follow-up sweep the deletion queued, for once the
    longest such job has ended (the worker's and the indexer's timeout, and a margin),
    deleted it."""
    world = on_clock.world
    world.settle()
    written_after_done = _snapshot(world, table, stored)
    on_clock.work(on_clock.deletion())
    world.settle()

    assert tuple(response.status for response in deleted) == answers
    assert min(written_after_done) > 0  # the record in the table, its doc in the index
    [delay] = on_clock.delays
    assert delay in AFTER_AN_EXTRACTION
    _assert_gone(world, table, stored)


def _model_thinking_through(during: Callable[[], None], fact: str) -> Any:
    """Bedrock Converse as the worker uses it (the real client and the model's parsing; only
    the endpoint's answer is made here, before anything is sent) finding `fact` in what it
    is shown; `during()` runs while it thinks, once."""
    from memkit.llm.bedrock import ConverseModel

    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    pending = [during]

    class Answered:
        status_code = 200

    def answer(**_: Any) -> tuple[Any, dict[str, Any]]:
        while pending:
            pending.pop()()
        text = json.dumps({"memories": [{"text": fact, "memory_type": "semantic"}]})
        message = {"role": "assistant", "content": [{"text": text}]}
        usage = {"inputTokens": 120, "outputTokens": 40, "totalTokens": 160}
        parsed = {"output": {"message": message}, "stopReason": "end_turn", "usage": usage}
        return Answered(), {**parsed, "metrics": {"latencyMs": 420}, "ResponseMetadata": {}}

    client.meta.events.register("before-call.bedrock-runtime.Converse", answer)
    return ConverseModel(client, "amazon.nova-lite-v1:0", sleep=lambda _: None)


def _extracting(world: MemoryWorld, on_clock: Queued, during: Callable[[], None]) -> Any:
    """Ada's session `talk` (written) indexed and its extraction job on the queue; the model
    the worker runs it with, finding a fact in her turns, and running `during()` meanwhile."""
    world.settle()
    on_clock.clock.catch_up()
    meta = world.store.sessions.session_meta(Owner(tenant=TENANT, namespace="default"), "talk")
    assert meta is not None
    extract = Job("extract", TENANT, "default", "talk", meta.updated_at)
    on_clock.sqs.send_message(QueueUrl=on_clock.url, MessageBody=extract.to_json())
    return _model_thinking_through(during, "Ada moved house")


@pytest.mark.parametrize(
    ("refusals", "answers"), [(0, (200,)), (1, (503, 200))], ids=["sent", "refused_then_retried"]
)
def test_what_an_extraction_running_through_the_deletion_writes_goes_in_a_follow_up(
    world: MemoryWorld,
    dynamodb_table: str,
    on_clock: Queued,
    refusals: int,
    answers: tuple[int, ...],
) -> None:
    api = _api_over(world, dynamodb_table, queue=on_clock)
    _ok(world.api("PUT", "/v1/working-memory/talk", body=TALK))
    deleted: list[ApiResponse] = []

    def deleted_until_done() -> None:
        on_clock.refuse(refusals)  # sends the work queue refuses first
        for _ in answers:  # the client repeats a 503
            deleted.append(call_api(api, "DELETE", f"/v1/users/{ADA}"))

    # Given Ada's session's extraction job in the worker, and Ada's deletion (no API key:
    # no follow-up for keys; maybe refused by the work queue once, then retried) answered
    # while the model reads her turns
    model = _extracting(world, on_clock, deleted_until_done)

    # When the job writes what the model found after "done"
    on_clock.work(on_clock.deletion(), rounds=1, model=model)

    # Then one follow-up sweep (queued by the retry, if the queue refused it) deleted it
    _assert_swept_again(on_clock, dynamodb_table, EXTRACTED, deleted, answers)


def test_a_job_finishing_a_deletion_whose_request_removed_the_sessions_sweeps_again(
    world: MemoryWorld, on_clock: Queued
) -> None:
    _populate(world, ADA, "default")
    world.settle()
    world.settle()
    on_clock.clock.catch_up()
    # Given a deletion whose request removes Ada's sessions and records, then meets an index
    # that shows removed docs until its next refresh, so a job finishes the rest
    lagging = LaggingIndex(world.vector_index)
    request = on_clock.deletion(lagging, window=2, wait=lambda _: None)
    outcome = request.delete(_ada(), 10.0)
    lagging.refresh()

    # When the worker runs the job (its runs find no session left) and what it queues
    job = on_clock.deletion(lagging, window=2, wait=lagging.refresh)
    on_clock.work(job)
    assert outcome.job is not None
    state = job.job(TENANT, outcome.job.job_id)

    # Then the job, done, still sweeps again once an extraction's longest run has passed:
    # the sessions went in its request, which queued it
    assert outcome.counts.sessions == 2
    assert (state.status, state.counts.sessions) == ("done", 2)
    [delay] = [delay for delay in on_clock.delays if delay]
    assert delay in AFTER_AN_EXTRACTION


def test_a_job_whose_follow_up_the_queue_refused_queues_it_when_retried(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued
) -> None:
    api = _api_over(world, dynamodb_table, queue=on_clock, user_deletion_budget_seconds=0)
    _populate(world, ADA, "default")
    world.settle()
    world.settle()
    on_clock.clock.catch_up()
    running = call_api(api, "DELETE", f"/v1/users/{ADA}")

    # When the work queue refuses the job's first send, and the queue retries the job
    on_clock.refuse(1)
    responses = on_clock.work(on_clock.deletion())
    job = call_api(api, "GET", f"/v1/jobs/{running.body['job_id']}")

    assert running.status == 202
    assert responses[0]["batchItemFailures"]  # the attempt went back to the queue
    assert (job.body["status"], job.body["counts"]["sessions"]) == ("done", 2)
    # Then the retry queued the follow-up that the refusal lost, and it ran
    [follow_up] = [message for message in on_clock.sent if message.not_before is not None]
    swept = call_api(api, "GET", f"/v1/jobs/{follow_up.job_id}")
    assert swept.body["status"] == "done"


def test_what_an_extraction_running_through_a_follow_up_writes_goes_in_the_next(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued
) -> None:
    keyed = _keyed(world, dynamodb_table, on_clock)
    ada, backend = _signed_in(keyed)
    _ok(keyed.api(backend, "DELETE", f"/v1/users/{ADA}"))
    # Given a session Ada's key writes after "done" on its cached answer, whose extraction
    # reads her turns while the first follow-up runs (and deletes the session)
    said = {"messages": TALK["messages"]}
    _ok(keyed.api(ada, "PUT", "/v1/working-memory/talk", cached=True, body=said))
    first = on_clock.take()  # the follow-up for the keys' cached answers, when due
    ran: list[str] = []
    model = _extracting(world, on_clock, lambda: ran.append(on_clock.deletion().resume(first, 7.5)))

    # When the extraction writes what the model found after that follow-up, then the queue
    # is worked on
    on_clock.work(on_clock.deletion(), rounds=1, model=model)
    world.settle()
    written_after_the_follow_up = _snapshot(world, dynamodb_table, EXTRACTED)
    on_clock.work(on_clock.deletion())
    world.settle()

    assert ran == ["follow_up_done"]
    assert min(written_after_the_follow_up) > 0
    # Then the follow-up that found a session queued the next, which deleted it
    _assert_gone(world, dynamodb_table, EXTRACTED)
    first, then = on_clock.delays
    assert (first, then in AFTER_AN_EXTRACTION) == (330, True)
    assert [message.follow_up for message in on_clock.sent] == [1, 2]


def test_a_follow_up_that_never_finishes_gives_up_and_fails_into_the_dead_letter_queue(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued, debug_log: Any
) -> None:
    api = _api_over(world, dynamodb_table, queue=on_clock)
    _ok(world.api("PUT", "/v1/working-memory/talk", body=TALK))
    world.settle()
    on_clock.clock.catch_up()
    _ok(call_api(api, "DELETE", f"/v1/users/{ADA}"))
    late = [{"id": f"late-{n}", "text": f"Fact {n}", "user_id": ADA} for n in range(3)]
    _ok(world.api("POST", "/v1/long-term-memory/", body={"memories": late}))
    world.settle()
    # Given an index that never shows the removals (no refresh), listing two docs at a time
    stuck = LaggingIndex(world.vector_index)

    # When the follow-up runs, unfinished, again and again
    responses = on_clock.work(on_clock.deletion(stuck, window=2, wait=lambda _: None))
    [follow_up, *again] = on_clock.sent
    job = call_api(api, "GET", f"/v1/jobs/{follow_up.job_id}")
    logged = [json.loads(line) for line in debug_log.getvalue().splitlines()]
    given_up = [line for line in logged if line.get("message") == "follow-up sweep given up"]

    # Then it stops after FOLLOW_UP_HOPS messages: each attempt then fails, up to the queue's
    # limit (the message goes to the dead-letter queue), and its job says it failed
    assert [message.hops for message in again] == list(range(1, FOLLOW_UP_HOPS + 1))
    assert len([r for r in responses if r["batchItemFailures"]]) == MAX_FAILURES
    assert job.body["status"] == "failed"
    assert len(given_up) == MAX_FAILURES
    assert ADA not in json.dumps(given_up)


def test_a_follow_up_message_no_deletion_queued_deletes_nothing(
    queued: Queued, everyone: Everyone, debug_log: Any
) -> None:
    ada_before = everyone.ada_left()
    # Given messages on the work queue that name Ada with a due time, as the follow-up's
    # did, without a job item a deletion wrote: none, a made-up one, a wrong type
    body = {"job": "delete_user", "tenant": TENANT, "namespace": "default", "session_id": ""}
    forged = {**body, "stamp": "2026-11-27T08:00:00.000Z", "user_id": ADA, "not_before": 0}
    made_up = {**forged, "job_id": "01JNOSUCHJOB0000000000000", "follow_up": 1}
    for message in (forged, made_up, {**made_up, "not_before": "0"}):
        queued.sqs.send_message(QueueUrl=queued.url, MessageBody=json.dumps(message))

    # When the worker receives them (the refused ones again and again)
    responses = queued.work(rounds=3)

    # Then nothing of Ada's is deleted: two are refused (they end in the dead-letter
    # queue), the made-up job is gone
    assert all(len(r["batchItemFailures"]) == 2 for r in responses)
    assert everyone.ada_left() == ada_before


# -- what a promotion running through the deletion writes after it -----------------------------

# Ada's session with a pending memory, and the record its promotion writes.
PROMOTED = Stored(ADA, "default", ("chat",), ("ada-lisbon",))


def _pending_memory(world: MemoryWorld) -> None:
    """Ada's session `chat` with a pending memory that the indexer has not promoted yet."""
    said = _exchange("chat", 1, "I moved to Lisbon.", "How is the weather?")
    memory = {"id": "ada-lisbon", "text": "Ada lives in Lisbon"}
    body = {"user_id": ADA, "messages": said, "memories": [memory]}
    _ok(world.api("PUT", "/v1/working-memory/chat", body=body))


def test_a_pending_memory_the_indexer_reaches_after_the_deletion_is_never_promoted(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given Ada's pending memory, its stream records not yet delivered to the indexer
    _pending_memory(world)
    lagging = world.read_stream()

    # When her deletion is done before the indexer reaches them
    response = world.api("DELETE", f"/v1/users/{ADA}")
    world.index(lagging)
    world.settle()

    # Then the promotion finds the pending memory gone and writes no record
    assert response.status == 200, response.body
    _assert_gone(world, dynamodb_table, PROMOTED)


def test_what_a_promotion_running_through_the_deletion_writes_goes_in_a_follow_up(
    world: MemoryWorld, dynamodb_table: str, on_clock: Queued
) -> None:
    api = _api_over(world, dynamodb_table, queue=on_clock)
    _pending_memory(world)
    assert on_clock.clock is not None
    on_clock.clock.catch_up()
    deleted: list[ApiResponse] = []
    # Given the indexer promoting Ada's pending memory, and Ada's deletion answered between
    # its look at the pending memory and its write of the record
    late = LateWrites(
        world.store.records, lambda: deleted.append(call_api(api, "DELETE", f"/v1/users/{ADA}"))
    )

    # When the promotion writes the record after "done"
    world.index(world.read_stream(), world.indexer_over(late))

    # Then one follow-up sweep deleted it
    _assert_swept_again(on_clock, dynamodb_table, PROMOTED, deleted)


# -- a message bound to its job's scope ----------------------------------------------------------


def _assert_refused_forgeries(
    on_clock: Queued, everyone: Everyone, api: Any, message: Job, debug_log: Any
) -> None:
    """`message` (a running job's) naming Bob instead, or Ada's other namespace, is refused
    by the worker (the queue retries it, then moves it to the dead-letter queue), logged
    with neither an id nor the scope, and deletes nothing; the job is still running."""
    ada_before = everyone.ada_left()
    deletion = on_clock.deletion()
    forged = [replace(message, user_id=BOB), replace(message, namespace=OTHER)]

    responses = [on_clock.handle(job, deletion) for job in forged]
    job = call_api(api, "GET", f"/v1/jobs/{message.job_id}")
    logged = [json.loads(line) for line in debug_log.getvalue().splitlines()]
    refusals = [line for line in logged if str(line.get("message")).startswith("deletion message")]

    assert [len(r["batchItemFailures"]) for r in responses] == [1, 1]
    assert job.body["status"] == "running"
    assert everyone.ada_left() == ada_before
    assert _snapshots(everyone.world, everyone.table, everyone.kept) == everyone.before
    assert len(refusals) == 2
    logged_text = json.dumps(refusals)
    assert [s for s in (ADA, BOB, OTHER, str(message.job_id)) if s in logged_text] == []


def test_a_deletion_message_naming_its_running_job_with_another_scope_is_refused(
    world: MemoryWorld, dynamodb_table: str, everyone: Everyone, on_clock: Queued, debug_log: Any
) -> None:
    # Given Ada's deletion queued as a job, its message taken off the queue
    api = _api_over(world, dynamodb_table, queue=on_clock, user_deletion_budget_seconds=0)
    on_clock.clock.catch_up()
    running = call_api(api, "DELETE", f"/v1/users/{ADA}")
    message = on_clock.take()

    # When the job's id comes with Bob, or another namespace: refused, nothing deleted
    _assert_refused_forgeries(on_clock, everyone, api, message, debug_log)

    # Then the genuine message still runs the deletion, and its follow-ups
    genuine = on_clock.handle(message, on_clock.deletion())
    on_clock.work(on_clock.deletion())
    world.settle()
    assert running.status == 202
    assert genuine == {"batchItemFailures": []}
    assert call_api(api, "GET", f"/v1/jobs/{message.job_id}").body["status"] == "done"
    everyone.assert_only_ada_gone()


def test_a_follow_up_message_naming_its_running_job_with_another_scope_is_refused(
    world: MemoryWorld, dynamodb_table: str, everyone: Everyone, on_clock: Queued, debug_log: Any
) -> None:
    # Given Ada's deletion done, and its follow-up sweep due (taken off the queue)
    api = _api_over(world, dynamodb_table, queue=on_clock)
    on_clock.clock.catch_up()
    _ok(call_api(api, "DELETE", f"/v1/users/{ADA}"))
    follow_up = on_clock.take()
    assert follow_up.not_before is not None
    on_clock.clock.now = max(on_clock.clock.now, follow_up.not_before)

    # When its job's id comes with Bob, or another namespace: refused, nothing deleted
    _assert_refused_forgeries(on_clock, everyone, api, follow_up, debug_log)

    # Then the genuine follow-up still sweeps, and its job is done
    genuine = on_clock.handle(follow_up, on_clock.deletion())
    world.settle()
    assert genuine == {"batchItemFailures": []}
    assert call_api(api, "GET", f"/v1/jobs/{follow_up.job_id}").body["status"] == "done"
    everyone.assert_only_ada_gone()


def test_a_job_stored_before_job_items_kept_their_scope_still_runs(
    queued: Queued, everyone: Everyone, dynamodb_table: str
) -> None:
    # Given a deletion's job whose item has no scope digest, as items written before had none
    job_id = queued.api("DELETE", f"/v1/users/{ADA}").body["job_id"]
    pk, sk = job_key(TENANT, job_id)
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=dynamodb_table,
        Key={"PK": {"S": pk}, "SK": {"S": sk}},
        UpdateExpression="REMOVE scope_digest",
        ConditionExpression="attribute_exists(scope_digest)",
    )

    # When the worker runs its message
    responses = queued.work()

    # Then the deletion is done as before
    assert all(r == {"batchItemFailures": []} for r in responses)
    assert queued.api("GET", f"/v1/jobs/{job_id}").body["status"] == "done"
    everyone.assert_only_ada_gone()
