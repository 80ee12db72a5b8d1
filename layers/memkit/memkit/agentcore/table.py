"""AgentCore memories on DynamoDB: their configuration items, their actors, and the reads of
a session's log that AgentCore's events need (an event is a run of a session's messages:
memkit.agentcore.service). The wing's items live in memkit's one table beside the core's,
under partitions of their own, and never leave this module:

    AgentCore memory    PK T#<tenant>#ACMEM                       SK M#<memory_id>
    its name's claim    PK T#<tenant>#ACNAME                      SK N#<name>
    its actor           PK T#<tenant>#ACACT#<memory_id>           SK A#<actor_id>

An AgentCore memory is a tenant's configuration item; its events are a session's messages in
the namespace named by the memory id, its actors are users, each listed once in the memory's
actor partition (ListActors) when its first session is written. A memory's name is unique in
its tenant: the claim item is written in the same transaction as the memory, in a partition
of its own (ListMemories reads only the memories'). Sessions and messages are the core's
(memkit.store.keys); their item classes are the store's, and the wing's item classes are
declared as kinds of the store's bound base class (`agent_items`).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import DoesNotExist

from memkit.agentcore.models import AgentMemory, Listing, MemoryPage, SessionSummary
from memkit.errors import BadRequest, FieldProblem, NameTaken, VersionConflict
from memkit.models.domain import Owner, SessionMeta, StoredMessage
from memkit.store import keys
from memkit.store.base import PageCursor, Table
from memkit.store.cursor import decode_cursor, encode_cursor
from memkit.store.failures import translated
from memkit.store.sessions import SessionTable, to_message, to_meta
from memkit.times import now_iso

if TYPE_CHECKING:
    from memkit.store.dynamodb import DynamoStore

LOG_PAGE = 200
NEW_ITEM = "attribute_not_exists(PK)"
CONDITION_FAILED = "ConditionalCheckFailed"
TRANSACTION_CONFLICT = "TransactionConflict"
# A CreateMemory whose transaction meets another one on its items (two creations of one
# name at once) tries this many times, pausing up to this long between tries.
CREATE_ATTEMPTS = 5
CONFLICT_PAUSE_SECONDS = 0.05


def agent_memories_pk(tenant: str) -> str:
    """The partition of a tenant's AgentCore memories (ListMemories is one Query of it)."""
    return f"T#{keys.part(tenant)}#ACMEM"


def agent_memory_key(tenant: str, memory_id: str) -> keys.Key:
    return agent_memories_pk(tenant), f"M#{keys.part(memory_id)}"


def agent_name_key(tenant: str, name: str) -> keys.Key:
    """The claim on a memory name (one memory a name in a tenant)."""
    return f"T#{keys.part(tenant)}#ACNAME", f"N#{keys.part(name)}"


def agent_actors_pk(tenant: str, memory_id: str) -> str:
    """The partition listing the actors of one AgentCore memory."""
    return f"T#{keys.part(tenant)}#ACACT#{keys.part(memory_id)}"


def agent_actor_key(tenant: str, memory_id: str, actor_id: str) -> keys.Key:
    return agent_actors_pk(tenant, memory_id), f"A#{keys.part(actor_id)}"


@dataclass(frozen=True)
class AgentItems:
    """The wing's item classes, kinds of one bound base class (memkit.store.items)."""

    memory: Any
    name: Any
    actor: Any


@lru_cache(maxsize=8)
def agent_items(base: Any) -> AgentItems:
    """The wing's item classes over `base`, the store's item class bound to a table (one set
    per base: a kind registers itself with its base's discriminator)."""

    class AgentMemoryItem(base, discriminator="agentcore_memory"):  # type: ignore[misc, call-arg]
        """An AgentCore memory's configuration, its spec as JSON; `deletion_job` is set once
        DeleteMemory has started its deletion."""

        memory_id = UnicodeAttribute()
        name = UnicodeAttribute()
        spec = UnicodeAttribute()
        deletion_job = UnicodeAttribute(null=True)

    class AgentNameItem(base, discriminator="agentcore_name"):  # type: ignore[misc, call-arg]
        """The claim on an AgentCore memory's name: the memory that holds it."""

        memory_id = UnicodeAttribute()
        name = UnicodeAttribute()

    class AgentActorItem(base, discriminator="agentcore_actor"):  # type: ignore[misc, call-arg]
        """An actor (a user) of an AgentCore memory: what ListActors lists."""

        memory_id = UnicodeAttribute()
        actor_id = UnicodeAttribute()

    return AgentItems(AgentMemoryItem, AgentNameItem, AgentActorItem)


def _cancellation_codes(exc: ClientError) -> list[str | None]:
    """Why a transaction was cancelled, item by item in its order (None: not that item)."""
    reasons = exc.response.get("CancellationReasons") or []
    return [None if r.get("Code") in (None, "None") else r.get("Code") for r in reasons]


def _to_memory(item: Any) -> AgentMemory:
    memory = AgentMemory.from_json(json.loads(item.spec))
    return replace(memory, deletion_job=item.deletion_job)


def _everything(item: Any) -> bool:
    return True


def _token_problem(field: str = "nextToken") -> BadRequest:
    return BadRequest("invalid nextToken", [FieldProblem(field, "not a token of this list")])


class AgentCoreTable:
    """AgentCore's configuration items and the event reads over session logs."""

    def __init__(self, table: Table, sessions: SessionTable) -> None:
        self._table = table
        self._items = table.items
        self._agent = agent_items(table.items.base)
        self._clock = table.clock
        self._sessions = sessions

    # -- memories ----------------------------------------------------------------------------

    def create_agent_memory(self, tenant: str, memory: AgentMemory) -> None:
        """Store a new memory and the claim on its name, both or neither (one transaction):
        VersionConflict when its id exists already (a retry of its CreateMemory), NameTaken
        when another memory of the tenant holds its name."""
        memory_key = agent_memory_key(tenant, memory.memory_id)
        item = self._agent_item(self._agent.memory, memory_key, tenant, memory)
        item.spec = json.dumps(memory.as_json(), ensure_ascii=False, separators=(",", ":"))
        claim = self._agent_item(
            self._agent.name, agent_name_key(tenant, memory.name), tenant, memory
        )
        table = self._items.base.Meta.table_name
        actions = []
        for new in (item, claim):
            new.version = 1
            put = {"TableName": table, "Item": new.serialize(), "ConditionExpression": NEW_ITEM}
            actions.append({"Put": put})
        with translated("create memory"):
            for attempt in range(1, CREATE_ATTEMPTS + 1):
                try:
                    self._items.connection.client.transact_write_items(TransactItems=actions)
                    return
                except ClientError as exc:
                    failed = _cancellation_codes(exc)
                    if failed[:1] == [CONDITION_FAILED]:
                        raise VersionConflict("create memory: its id exists") from exc
                    if failed[1:2] == [CONDITION_FAILED]:
                        raise NameTaken(f"the memory name {memory.name!r} is taken") from exc
                    if TRANSACTION_CONFLICT not in failed or attempt == CREATE_ATTEMPTS:
                        raise
                # Another transaction held an item a moment: the next attempt sees its outcome.
                time.sleep(random.uniform(0, CONFLICT_PAUSE_SECONDS))  # noqa: S311 (jitter)

    @staticmethod
    def _agent_item(item_cls: Any, key: keys.Key, tenant: str, memory: AgentMemory) -> Any:
        """A new item of the memory (its configuration, or the claim on its name)."""
        stamp = now_iso(memory.created_at)
        return item_cls(
            *key,
            tenant=tenant,
            namespace=memory.memory_id,
            created_at=stamp,
            updated_at=stamp,
            memory_id=memory.memory_id,
            name=memory.name,
        )

    def get_agent_memory(self, tenant: str, memory_id: str) -> AgentMemory | None:
        pk, sk = agent_memory_key(tenant, memory_id)
        with translated("read memory"):
            try:
                item = self._agent.memory.get(pk, sk, consistent_read=True)
            except DoesNotExist:
                return None
        return _to_memory(item)

    def mark_agent_memory_deleting(
        self, tenant: str, memory_id: str, job_id: str, replacing: str | None
    ) -> AgentMemory | None:
        """Record that job `job_id` deletes the memory, if its deletion job is still
        `replacing` (None: it has none yet): the memory as marked, or None when it is gone
        or another request marked it first."""
        item_cls = self._agent.memory
        pk, sk = agent_memory_key(tenant, memory_id)
        current = (
            item_cls.deletion_job.does_not_exist()
            if replacing is None
            else item_cls.deletion_job == replacing
        )
        item = item_cls(pk, sk)
        try:
            with translated("mark memory deleting"):
                item.update(
                    actions=[
                        item_cls.deletion_job.set(job_id),
                        item_cls.updated_at.set(now_iso(self._clock())),
                    ],
                    condition=item_cls.pk.exists() & current,
                    add_version_condition=False,
                )
        except VersionConflict:
            return None
        return _to_memory(item)

    def delete_agent_memory(self, tenant: str, memory: AgentMemory) -> bool:
        """Delete the memory (its deletion freed its name when it started); False when it was
        gone already."""
        pk, sk = agent_memory_key(tenant, memory.memory_id)
        item_cls = self._agent.memory
        try:
            with translated("delete memory"):
                item_cls(pk, sk).delete(condition=item_cls.pk.exists(), add_version_condition=False)
        except VersionConflict:
            return False
        return True

    def free_agent_memory_name(self, tenant: str, memory: AgentMemory) -> None:
        """Delete the claim on the memory's name if this memory holds it (idempotent)."""
        claim_cls = self._agent.name
        claim = claim_cls(*agent_name_key(tenant, memory.name))
        try:
            with translated("free memory name"):
                claim.delete(
                    condition=claim_cls.memory_id == memory.memory_id, add_version_condition=False
                )
        except VersionConflict:
            pass  # freed already, or another memory's claim

    def list_agent_memories(self, tenant: str, limit: int, token: str | None) -> MemoryPage:
        items, last = self._page(self._agent.memory, agent_memories_pk(tenant), limit, token)
        return MemoryPage([_to_memory(item) for item in items], encode_cursor(last))

    def _page(
        self, item_cls: Any, pk: str, limit: int, token: str | None
    ) -> tuple[list[Any], dict[str, Any] | None]:
        """One page of partition `pk` from `token`: its items and DynamoDB's last key."""
        start = self._start(token, pk)
        with translated("list"):
            results = item_cls.query(
                pk, limit=limit, last_evaluated_key=start, consistent_read=True
            )
            return list(results), results.last_evaluated_key

    # -- actors ------------------------------------------------------------------------------

    def note_actor(
        self, tenant: str, memory_id: str, actor_id: str, expires_at: int | None
    ) -> None:
        """List `actor_id` among the memory's actors (idempotent; it lives as long as the
        actor's newest session)."""
        pk, sk = agent_actor_key(tenant, memory_id, actor_id)
        stamp = now_iso(self._clock())
        item = self._agent.actor(
            pk,
            sk,
            tenant=tenant,
            namespace=memory_id,
            created_at=stamp,
            updated_at=stamp,
            expires_at=expires_at,
            memory_id=memory_id,
            actor_id=actor_id,
        )
        with translated("write actor"):
            item.save(add_version_condition=False)

    def list_actors(self, tenant: str, memory_id: str, limit: int, token: str | None) -> Listing:
        """A page of the memory's actors (live ones), in id order."""
        pk = agent_actors_pk(tenant, memory_id)
        items, last = self._page(self._agent.actor, pk, limit, token)
        actors = [item.actor_id for item in items if self._table.live(item)]
        return Listing(actors, encode_cursor(last))

    def has_actor(self, tenant: str, memory_id: str, actor_id: str) -> bool:
        key = agent_actor_key(tenant, memory_id, actor_id)
        return self._table.live(self._table.batch_get([key]).get(key))

    def agent_memory_actors(self, tenant: str, memory_id: str) -> Iterator[str]:
        """Every actor the memory has listed, expired ones included (its deletion)."""
        pk = agent_actors_pk(tenant, memory_id)
        with translated("list actors"):
            for item in self._agent.actor.query(pk, page_size=LOG_PAGE):
                yield item.actor_id

    def delete_agent_actors_page(
        self, tenant: str, memory_id: str, after: PageCursor | None = None
    ) -> tuple[int, PageCursor | None]:
        """One page of the memory's actor items deleted: how many, and where the next page
        starts (None: the end)."""
        pk = agent_actors_pk(tenant, memory_id)
        return self._table.delete_page(pk, _everything, after, "delete actors")

    # -- sessions ----------------------------------------------------------------------------

    def list_actor_sessions(
        self, owner: Owner, limit: int, token: str | None, with_events: bool
    ) -> Listing:
        """A page of the actor's (owner.user_id's) live sessions in the namespace, newest
        first; `with_events`: only those holding at least one message (one BatchGetItem of
        the page's sessions)."""
        assert owner.user_id is not None
        session_cls = self._items.session
        hash_key = keys.sessions_by_user(owner.tenant, owner.namespace, owner.user_id)
        start = self._start(token, hash_key, "GSI2PK")
        live = session_cls.expires_at.does_not_exist() | (session_cls.expires_at > self._clock())
        with translated("list sessions"):
            results = session_cls.by_user.query(
                hash_key,
                filter_condition=live,
                scan_index_forward=False,
                limit=limit,
                last_evaluated_key=start,
            )
            items = list(results)
            last = results.last_evaluated_key
        if with_events and items:
            metas = self._table.batch_get(
                keys.session_key(owner.tenant, owner.namespace, item.session_id) for item in items
            )
            items = [
                item
                for item in items
                if int(
                    getattr(
                        metas.get(keys.session_key(owner.tenant, owner.namespace, item.session_id)),
                        "message_count",
                        0,
                    )
                    or 0
                )
                > 0
            ]
        summaries = [
            SessionSummary(
                session_id=item.session_id,
                actor_id=owner.user_id,
                created_at=int(item.gsi2sk.split("#", 1)[0]) / 1_000_000,
            )
            for item in items
        ]
        return Listing(summaries, encode_cursor(last))

    # -- a session's log, as events read it --------------------------------------------------

    def _actor_session(self, owner: Owner, session_id: str) -> SessionMeta | None:
        """The live session if it is the actor's (owner.user_id's): a session of another
        actor of the memory is none of this actor's, as one that does not exist."""
        key = keys.session_key(owner.tenant, owner.namespace, session_id)
        item = self._table.batch_get([key]).get(key)
        if item is None or not self._table.live(item) or item.user_id != owner.user_id:
            return None
        return to_meta(item)

    def messages_with_prefix(
        self, owner: Owner, session_id: str, created_at_us: int, id_prefix: str
    ) -> list[StoredMessage]:
        """The live session's messages written at `created_at_us` whose ids start with
        `id_prefix`, in order (one Query): an event's payloads."""
        meta = self._actor_session(owner, session_id)
        if meta is None:
            return []
        pk = keys.session_pk(owner.tenant, owner.namespace, session_id)
        prefix = keys.message_order_prefix(created_at_us, id_prefix)
        with translated("read event"):
            results = self._items.base.by_order.query(
                pk,
                range_key_condition=self._items.base.order.startswith(prefix),
                consistent_read=True,
            )
            return [to_message(item) for item in results if self._sessions.belongs(item, meta)]

    def session_log(
        self, owner: Owner, session_id: str, token: str | None, newest_first: bool
    ) -> Iterator[StoredMessage] | None:
        """The live session's whole log from `token` (a log_token; None: its start), lazily;
        None when the session does not exist."""
        pk = keys.session_pk(owner.tenant, owner.namespace, session_id)
        start = self._start(token, pk)
        if start is not None and set(start) != {"PK", "SK", "LSI1SK"}:
            raise _token_problem()
        meta = self._actor_session(owner, session_id)
        if meta is None:
            return None

        def read() -> Iterator[StoredMessage]:
            with translated("read events"):
                log = self._sessions.log(owner, meta, not newest_first, LOG_PAGE, start)
                for item in log:
                    yield to_message(item)

        return read()

    @staticmethod
    def log_token(owner: Owner, session_id: str, message: StoredMessage) -> str:
        """A token that resumes session_log right after `message`."""
        pk = keys.session_pk(owner.tenant, owner.namespace, session_id)
        key = {
            "PK": {"S": pk},
            "SK": {"S": keys.message_sk(message.id)},
            "LSI1SK": {"S": message.order},
        }
        token = encode_cursor(key)
        assert token is not None
        return token

    @staticmethod
    def _start(token: str | None, pk: str, attribute: str = "PK") -> dict[str, Any] | None:
        """The start key a nextToken stands for; a ValidationException for any other."""
        try:
            return decode_cursor(token, pk, attribute)
        except BadRequest as exc:
            raise _token_problem() from exc


def agentcore_table(store: DynamoStore) -> AgentCoreTable:
    """The wing's table over `store`'s (its items beside the core's, in the one table)."""
    return AgentCoreTable(store.table, store.sessions)
