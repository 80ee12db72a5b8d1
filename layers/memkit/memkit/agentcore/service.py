"""AgentCore Memory over memkit's own model (docs/agentcore.md): no second store.

- A memory is a tenant's configuration item (its name, event expiry, strategies with their
  namespace templates). Its id, `{name}-{10 alphanumerics}`, is the memkit namespace every
  one of its sessions lives in, so nothing of it mixes with another memory or another app.
- An actor is a memkit user; a session is a memkit session of that user in that namespace.
- An event is a run of the session's messages, one a payload item, in the payload's order:
  a conversational turn is a message of role user, assistant, tool or other (OTHER: neither
  the user's words nor the agent's); a blob or JSON payload is a message of role `data`
  holding the JSON text. Each message's metadata carries the event's own fields
  (`agentcore`: event id, part, kind, metadata, branch, extraction mode, request digest).
  The event id is `<epoch millis>#<16 hex>`: the messages' ids are `<event id>/<part>` and
  their time the event's (to the millisecond), so an event's messages are adjacent in the
  session's log and one Query reads them.
- A client token makes CreateEvent idempotent: the event id is derived from it, and
  memkit's appends are idempotent by message id. The memory's event expiry is the
  session's TTL.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from memkit.agentcore.models import (
    MEMORY_ARN_PREFIX,
    AgentMemory,
    CreateEventInput,
    CreateMemoryInput,
    EventFilter,
    ListEventsInput,
    Listing,
    MemoryPage,
    MemoryStrategy,
    MetadataFilter,
    Payload,
    Role,
    StrategyKind,
)
from memkit.agentcore.table import AgentCoreTable
from memkit.errors import (
    FieldProblem,
    Forbidden,
    IdempotencyMismatch,
    NameTaken,
    NotFound,
    ResourceConflict,
    TooLarge,
    ValidationFailed,
    VersionConflict,
)
from memkit.models.budget import LIST_BYTE_BUDGET
from memkit.models.domain import Owner, StoredMessage
from memkit.models.session import MAX_FUTURE_SECONDS, AppendMessages, Message
from memkit.observability import metrics
from memkit.service.sessions import SessionService

# The key of a message's metadata that holds its event's fields.
EVENT_KEY = "agentcore"
DAY_SECONDS = 86_400
ROLES = {Role.USER: "user", Role.ASSISTANT: "assistant", Role.TOOL: "tool", Role.OTHER: "other"}
ROLES_BACK = {value: key.value for key, value in ROLES.items()}
DATA_ROLE = "data"
# Messages a ListEvents call reads at most (filters may skip many): past it the page ends
# early, with a nextToken, as AWS's own lists may.
SCAN_BUDGET = 2_000
# A memory's configuration is one item (DynamoDB's 400 KB, with room to spare).
MAX_MEMORY_BYTES = 190_000
# A page of events stops adding events past this many bytes (a Lambda answer holds 6 MB).
EVENTS_BYTE_BUDGET = LIST_BYTE_BUDGET
ALPHANUMERICS = string.ascii_letters + string.digits
SESSION_NAMESPACE = "/strategies/{memoryStrategyId}/actors/{actorId}/sessions/{sessionId}"
# Each strategy's namespace when CreateMemory names none (AgentCore's defaults).
DEFAULT_NAMESPACES = {
    StrategyKind.SEMANTIC: "/strategies/{memoryStrategyId}/actors/{actorId}",
    StrategyKind.USER_PREFERENCE: "/strategies/{memoryStrategyId}/actors/{actorId}",
    StrategyKind.SUMMARIZATION: SESSION_NAMESPACE,
    StrategyKind.EPISODIC: SESSION_NAMESPACE,
    StrategyKind.CUSTOM: "/strategies/{memoryStrategyId}/actors/{actorId}",
}


@dataclass(frozen=True)
class AgentEvent:
    """An event as AgentCore shows it (payload in its wire form)."""

    memory_id: str
    actor_id: str
    session_id: str
    event_id: str
    timestamp: float
    payload: list[dict[str, Any]]
    branch: dict[str, str] | None = None
    metadata: dict[str, dict[str, str]] | None = None
    digest: str = ""
    skip_extraction: bool = False

    @property
    def branch_name(self) -> str:
        return self.branch["name"] if self.branch else "main"


@dataclass(frozen=True)
class EventPage:
    events: list[AgentEvent]
    next_token: str | None


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _suffix(seed: str | None) -> str:
    """10 alphanumerics: derived from `seed` (a client token), else random."""
    if seed is None:
        return "".join(secrets.choice(ALPHANUMERICS) for _ in range(10))
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:16], "big")
    chars = []
    for _ in range(10):
        number, digit = divmod(number, len(ALPHANUMERICS))
        chars.append(ALPHANUMERICS[digit])
    return "".join(chars)


def memory_id_of(named: str) -> str:
    """The memory id a data-plane path names: its id, or the id inside its ARN."""
    import re

    found = re.match(MEMORY_ARN_PREFIX, named)
    return found.group("id") if found else named


def event_ms(event_id: str) -> int:
    return int(event_id.split("#", 1)[0])


def _event_fields(message: StoredMessage) -> dict[str, Any] | None:
    fields = (message.metadata or {}).get(EVENT_KEY)
    return fields if isinstance(fields, dict) and isinstance(fields.get("event"), str) else None


def _payload_item(message: StoredMessage, kind: str) -> dict[str, Any] | None:
    if kind == "conversational":
        role = ROLES_BACK.get(message.role, Role.OTHER.value)
        return {"conversational": {"content": {"text": message.content}, "role": role}}
    if kind == "blob":
        return {"blob": json.loads(message.content)}
    if kind == "json":
        return {"json": {"content": json.loads(message.content)}}
    return None  # the stand-in message of an event without payload


def event_of(
    memory_id: str, actor_id: str, session_id: str, messages: list[StoredMessage]
) -> AgentEvent | None:
    """The event these messages (all of one event, any order) make; None when they carry
    no event (a message written through memkit's own API)."""
    parts = [(f, m) for m in messages if (f := _event_fields(m)) is not None]
    if not parts:
        return None
    parts.sort(key=lambda pair: int(pair[0].get("part", 0)))
    first = parts[0][0]
    payload = [
        item
        for fields, m in parts
        if (item := _payload_item(m, str(fields.get("kind")))) is not None
    ]
    event_id = str(first["event"])
    return AgentEvent(
        memory_id=memory_id,
        actor_id=actor_id,
        session_id=session_id,
        event_id=event_id,
        timestamp=event_ms(event_id) / 1000,
        payload=payload,
        branch=first.get("branch"),
        metadata=first.get("metadata"),
        digest=str(first.get("digest", "")),
        skip_extraction=bool(first.get("skip")),
    )


def _event_key(message: StoredMessage) -> str:
    """Which event a message of the log is part of (a message memkit's own API wrote is its
    own, and no event: event_of skips it)."""
    fields = _event_fields(message)
    return str(fields["event"]) if fields else f"memkit:{message.id}"


def _metadata_matches(event: AgentEvent, filters: list[MetadataFilter]) -> bool:
    metadata = event.metadata or {}
    for condition in filters:
        key = condition.left.metadata_key
        if condition.operator == "EXISTS" and key not in metadata:
            return False
        if condition.operator == "NOT_EXISTS" and key in metadata:
            return False
        if condition.operator == "EQUALS_TO":
            assert condition.right is not None
            wanted = condition.right.metadata_value.string_value
            if metadata.get(key, {}).get("stringValue") != wanted:
                return False
    return True


# A branch filter with its parents: (branch name, the newest event id of it that counts;
# None: all of them).
Chain = list[tuple[str, str | None]]


def _encode_token(log_token: str, chain: Chain | None) -> str:
    import base64

    raw = json.dumps({"log": log_token, "chain": chain}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str | None) -> tuple[str | None, Chain | None]:
    import base64
    import binascii

    if token is None:
        return None, None
    bad = ValidationFailed(
        "invalid nextToken", [FieldProblem("nextToken", "not a token of this list")]
    )
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise bad from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("log"), str):
        raise bad
    chain = raw.get("chain")
    valid_chain = chain is None or (
        isinstance(chain, list)
        and all(
            isinstance(link, list)
            and len(link) == 2
            and isinstance(link[0], str)
            and (link[1] is None or isinstance(link[1], str))
            for link in chain
        )
    )
    if not valid_chain:
        raise bad
    return raw["log"], None if chain is None else [(str(a), b) for a, b in chain]


class AgentCoreService:
    """AgentCore Memory's operations over memkit's sessions and the memory items."""

    def __init__(
        self,
        agentcore: AgentCoreTable,
        sessions: SessionService,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._agentcore = agentcore
        self._sessions = sessions
        self._clock = clock

    # -- the control plane -------------------------------------------------------------------

    def create_memory(self, tenant: str, body: CreateMemoryInput) -> AgentMemory:
        """A new memory, ACTIVE at once; the same again for a retry with its client token."""
        request = body.model_dump(mode="json", exclude={"client_token"})
        digest = _digest(request)
        seed = f"{tenant}\n{body.client_token}" if body.client_token else None
        memory_id = f"{body.name}-{_suffix(seed)}"
        now = self._clock()
        strategies = []
        for n, wrapper in enumerate(body.memory_strategies):
            strategy_seed = f"{memory_id}/{n}"
            kind, strategy = wrapper.chosen()
            namespaces = strategy.namespace_templates or strategy.namespaces
            strategies.append(
                MemoryStrategy(
                    strategy_id=f"{strategy.name}-{_suffix(strategy_seed)}",
                    name=strategy.name,
                    kind=kind,
                    namespaces=tuple(namespaces or (DEFAULT_NAMESPACES[kind],)),
                    description=strategy.description,
                    configuration=strategy.configuration,
                )
            )
        memory = AgentMemory(
            memory_id=memory_id,
            name=body.name,
            event_expiry_days=body.event_expiry_duration,
            created_at=now,
            updated_at=now,
            request_digest=digest,
            description=body.description,
            strategies=tuple(strategies),
            indexed_keys=tuple(k.model_dump(by_alias=True) for k in body.indexed_keys or ()),
        )
        size = len(json.dumps(memory.as_json(), ensure_ascii=False).encode())
        if size > MAX_MEMORY_BYTES:
            raise TooLarge(
                f"the memory's configuration takes {size} bytes; at most {MAX_MEMORY_BYTES}",
                [FieldProblem("memoryStrategies", "descriptions and configurations too large")],
            )
        try:
            self._agentcore.create_agent_memory(tenant, memory)
        except NameTaken as exc:
            # AgentCore's words: the bedrock-agentcore SDK's create_or_get_memory reads a
            # ValidationException that says "already exists" as "find that memory".
            raise ResourceConflict(
                f"Memory with name {body.name} already exists",
                [FieldProblem("name", "another memory of this account has this name")],
            ) from exc
        except VersionConflict:
            existing = self._agentcore.get_agent_memory(tenant, memory_id)
            if existing is None or existing.request_digest != digest:
                raise IdempotencyMismatch(
                    "this clientToken was used with other parameters",
                    [FieldProblem("clientToken", "already used for another request")],
                ) from None
            return existing
        metrics.add_metric(name="AgentCoreMemoriesCreated", unit="Count", value=1)
        return memory

    def described(self, tenant: str, memory_id: str) -> AgentMemory:
        """The memory `memory_id` (or its ARN) names, DELETING ones too (GetMemory,
        DeleteMemory); 404 when the tenant has none such."""
        found = self._agentcore.get_agent_memory(tenant, memory_id_of(memory_id))
        if found is None:
            raise NotFound(f"memory {memory_id} does not exist")
        return found

    def memory(self, tenant: str, memory_id: str) -> AgentMemory:
        """The memory whose data an operation reads or writes: 404 when the tenant has none
        such, or it is being deleted (its data is going)."""
        found = self.described(tenant, memory_id)
        if found.deleting:
            raise NotFound(f"memory {memory_id} is being deleted")
        return found

    def list_memories(self, tenant: str, limit: int, token: str | None) -> MemoryPage:
        return self._agentcore.list_agent_memories(tenant, limit, token)

    # -- events ------------------------------------------------------------------------------

    def create_event(self, owner: Owner, memory: AgentMemory, body: CreateEventInput) -> AgentEvent:
        """Store the event as the session's messages (creating the session), idempotently
        when it carries a client token."""
        assert owner.user_id is not None
        now = self._clock()
        stamp = body.event_timestamp.timestamp()
        if stamp > now + MAX_FUTURE_SECONDS:
            raise ValidationFailed(
                "eventTimestamp is in the future",
                [FieldProblem("eventTimestamp", f"more than {MAX_FUTURE_SECONDS} s ahead")],
            )
        request = body.model_dump(mode="json", by_alias=True, exclude={"client_token"})
        digest = _digest(request)[:32]
        token = body.client_token
        seed = f"{owner.tenant}\n{memory.memory_id}\n{owner.user_id}\n{body.session_id}\n{token}"
        session_id = body.session_id or f"session-{_suffix(seed if token else None)}"
        hex_part = hashlib.sha256(seed.encode()).hexdigest()[:16] if token else secrets.token_hex(8)
        millis = math.floor(stamp * 1000)
        event_id = f"{millis:013d}#{hex_part}"
        messages = self._messages(event_id, millis, body, digest)
        append = AppendMessages(
            messages=messages, ttl_seconds=memory.event_expiry_days * DAY_SECONDS
        )
        try:
            result = self._sessions.append(owner, session_id, append)
        except Forbidden as exc:
            raise ResourceConflict(
                f"session {session_id} belongs to another actor of this memory",
                [FieldProblem("sessionId", "names another actor's session")],
            ) from exc
        retried = not result.appended
        if retried:
            stored = self.get_event(owner, memory, session_id, event_id)
            if stored.digest != digest:
                raise IdempotencyMismatch(
                    "this clientToken was used with other parameters",
                    [FieldProblem("clientToken", "already used for another event")],
                )
        if result.created or retried:
            expires = int(now) + 2 * memory.event_expiry_days * DAY_SECONDS
            self._agentcore.note_actor(owner.tenant, memory.memory_id, owner.user_id, expires)
        metrics.add_metric(name="AgentCoreEvents", unit="Count", value=1)
        return AgentEvent(
            memory_id=memory.memory_id,
            actor_id=owner.user_id,
            session_id=session_id,
            event_id=event_id,
            timestamp=millis / 1000,
            payload=[
                p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in body.payload
            ],
            branch=body.branch.model_dump(by_alias=True, exclude_none=True)
            if body.branch
            else None,
            metadata=(
                {k: v.model_dump(by_alias=True) for k, v in body.metadata.items()}
                if body.metadata
                else None
            ),
            digest=digest,
            skip_extraction=body.extraction_mode == "SKIP",
        )

    @staticmethod
    def _messages(event_id: str, millis: int, body: CreateEventInput, digest: str) -> list[Message]:
        from datetime import UTC, datetime

        created = datetime.fromtimestamp(millis / 1000, UTC)
        shared: dict[str, Any] = {"event": event_id, "digest": digest}
        if body.metadata:
            shared["metadata"] = {k: v.model_dump(by_alias=True) for k, v in body.metadata.items()}
        if body.branch:
            shared["branch"] = body.branch.model_dump(by_alias=True, exclude_none=True)
        if body.extraction_mode == "SKIP":
            shared["skip"] = True
        items: list[tuple[str, str, str]] = [_message_of(payload) for payload in body.payload] or [
            ("empty", DATA_ROLE, "[]")
        ]
        return [
            Message(
                id=f"{event_id}.{n:03d}",
                role=role,
                content=content,
                created_at=created,
                metadata={EVENT_KEY: {**shared, "part": n, "kind": kind}},
            )
            for n, (kind, role, content) in enumerate(items)
        ]

    def _event_messages(self, owner: Owner, session_id: str, event_id: str) -> list[StoredMessage]:
        """The messages of event `event_id` in the session (one Query)."""
        return self._agentcore.messages_with_prefix(
            owner, session_id, event_ms(event_id) * 1000, f"{event_id}."
        )

    def get_event(
        self, owner: Owner, memory: AgentMemory, session_id: str, event_id: str
    ) -> AgentEvent:
        assert owner.user_id is not None
        messages = self._event_messages(owner, session_id, event_id)
        event = event_of(memory.memory_id, owner.user_id, session_id, messages)
        if event is None:
            raise NotFound(f"event {event_id} does not exist in session {session_id}")
        return event

    def delete_event(
        self, owner: Owner, memory: AgentMemory, session_id: str, event_id: str
    ) -> str:
        messages = self._event_messages(owner, session_id, event_id)
        if not messages:
            raise NotFound(f"event {event_id} does not exist in session {session_id}")
        self._sessions.remove_messages(owner, session_id, [m.id for m in messages])
        return event_id

    def list_events(
        self, owner: Owner, memory: AgentMemory, session_id: str, body: ListEventsInput
    ) -> EventPage:
        """A page of the session's events, newest first, filtered by branch and metadata."""
        assert owner.user_id is not None
        actor = owner.user_id
        log_token, chain = _decode_token(body.next_token)
        log = self._agentcore.session_log(owner, session_id, log_token, newest_first=True)
        if log is None:
            return EventPage([], None)
        wanted = body.filter or EventFilter()
        if chain is None and wanted.branch is not None:
            chain = [(wanted.branch.name, None)]
        events: list[AgentEvent] = []
        gathered: list[StoredMessage] = []
        size = 0

        def accept(event: AgentEvent) -> bool:
            nonlocal chain
            if wanted.branch is not None:
                assert chain is not None
                forked = event.branch_name == wanted.branch.name and event.branch is not None
                if forked and wanted.branch.include_parent_branches and len(chain) == 1:
                    chain = self._parents(owner, memory, session_id, event, chain)
                if not any(
                    event.branch_name == name and (bound is None or event.event_id <= bound)
                    for name, bound in chain
                ):
                    return False
            return _metadata_matches(event, wanted.event_metadata or [])

        def close() -> AgentEvent | None:
            event = event_of(memory.memory_id, actor, session_id, gathered)
            if event is None or not accept(event):
                return None
            if not body.include_payloads:
                event = replace(event, payload=[])
            return event

        def token_after(message: StoredMessage) -> str:
            return _encode_token(self._agentcore.log_token(owner, session_id, message), chain)

        for read, message in enumerate(log, start=1):
            if gathered and _event_key(gathered[0]) != _event_key(message):
                event = close()
                if event is not None:
                    events.append(event)
                    if body.include_payloads:
                        size += sum(m.response_bytes for m in gathered)
                boundary = gathered[-1]
                gathered = []
                full = len(events) >= body.max_results or size > EVENTS_BYTE_BUDGET
                if full or read > SCAN_BUDGET:
                    return EventPage(events, token_after(boundary))
            gathered.append(message)
        if gathered:
            event = close()
            if event is not None:
                events.append(event)
        return EventPage(events, None)

    def _parents(
        self,
        owner: Owner,
        memory: AgentMemory,
        session_id: str,
        event: AgentEvent,
        chain: Chain,
    ) -> Chain:
        """The chain of `event`'s branch: its name (all of its events), then each parent
        branch up to the event it forked from."""
        links = list(chain)
        branch = event.branch
        seen = {links[0][0]}
        while branch and branch.get("rootEventId"):
            root_id = branch["rootEventId"]
            try:
                root = self.get_event(owner, memory, session_id, root_id)
            except NotFound:
                break
            if root.branch_name in seen:
                break
            seen.add(root.branch_name)
            links.append((root.branch_name, root_id))
            branch = root.branch
        return links

    # -- sessions and actors -----------------------------------------------------------------

    def list_sessions(
        self, owner: Owner, limit: int, token: str | None, with_events: bool
    ) -> Listing:
        return self._agentcore.list_actor_sessions(owner, limit, token, with_events)

    def list_actors(
        self, tenant: str, memory: AgentMemory, only: str | None, limit: int, token: str | None
    ) -> Listing:
        """The memory's actors; `only`: a caller confined to its own user sees itself alone
        (when it has written an event)."""
        if only is not None:
            if token is not None:
                return Listing([], None)
            found = self._agentcore.has_actor(tenant, memory.memory_id, only)
            return Listing([only] if found else [], None)
        return self._agentcore.list_actors(tenant, memory.memory_id, limit, token)


def _message_of(payload: Payload) -> tuple[str, str, str]:
    """(kind, role, content) of the message a payload item becomes."""
    if payload.conversational is not None:
        turn = payload.conversational
        return "conversational", ROLES[turn.role], turn.content.text
    if payload.json_ is not None:
        return "json", DATA_ROLE, json.dumps(payload.json_.content, ensure_ascii=False)
    return "blob", DATA_ROLE, json.dumps(payload.blob, ensure_ascii=False)
