"""AgentCore memory records as memkit long-term records (docs/agentcore.md "Record mapping").

A record of memory M is a memkit record in namespace M (the memory's own namespace, where
its events' sessions live too), owned by the actor its AgentCore namespace names. What
AgentCore adds (the record's namespace, its strategy, its metadata keys and values, its
expiry) is kept as tags in the record's `topics`, each `agentcore|<kind>|...`, so the
index filters on them inside the search with memkit's own operators:

    agentcore|ns|<namespace>             the namespace, exactly (`namespace`: eq)
    agentcore|path|<namespace>/          the namespace as a path ending in one `/`
                                         (`namespacePath`: startswith, segment-wise)
    agentcore|strategy|<id>              the memory strategy (eq)
    agentcore|key|<key>                  the metadata key is set (EXISTS any, NOT_EXISTS none)
    agentcore|meta|<key>|<value>         a string value, or one member of a string list
                                         (EQUALS_TO eq, CONTAINS all)
    agentcore|expiry|<days>              the record expiry last applied (BatchUpdate reapplies it)

`|` is in none of AgentCore's namespace, strategy id, metadata key or value patterns, so
the tags are injective: each one reads back as exactly what was written. The metadata
itself is kept whole, typed as AgentCore's MetadataValue, in the record's `metadata`.
Numbers are compared after the search (`PostFilter`): the index narrows to the records that
have the key, then the service keeps those whose value passes; the record's own times are
memkit's date filters.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memkit.agentcore.record_models import CREATED_AT_KEY, UPDATED_AT_KEY
from memkit.models.domain import StoredRecord
from memkit.vectors.filters import Condition
from memkit.vectors.protocol import RECORD_KIND

TAG = "agentcore|"
NS = f"{TAG}ns|"
PATH = f"{TAG}path|"
STRATEGY = f"{TAG}strategy|"
KEY = f"{TAG}key|"
META = f"{TAG}meta|"
EXPIRY = f"{TAG}expiry|"
# Every AgentCore record carries this one (and so is never "described" by curation, which
# gives topics only to records created without any).
MARKER = f"{TAG}record"

SYSTEM_DATE_FIELDS = {CREATED_AT_KEY: "created_at", UPDATED_AT_KEY: "updated_at"}

RECORD_ID_PREFIX = "mem-"
RECORD_ID_DIGITS = 40  # mem- + 40 = 44 characters (AgentCore's ids take 40 to 50)

PLACEHOLDERS = ("{actorId}", "{sessionId}", "{memoryStrategyId}")
_PLACEHOLDER = re.compile(r"\{(actorId|sessionId|memoryStrategyId)\}")


# -- record ids --------------------------------------------------------------------------------


def new_record_id() -> str:
    """A fresh record id as AgentCore forms them (`mem-` and 40 random hex digits)."""
    return RECORD_ID_PREFIX + secrets.token_hex(RECORD_ID_DIGITS // 2)


def derived_record_id(*parts: str) -> str:
    """A record id that the same parts always give: a batch retried with its clientToken
    writes the same records again, and a summary replaces its session's previous one."""
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()
    return RECORD_ID_PREFIX + digest[:RECORD_ID_DIGITS]


# -- namespaces --------------------------------------------------------------------------------


def path_of(namespace: str) -> str:
    """A namespace as a path: without its trailing `/`s, then with exactly one. `/users/a`
    and `/users/a/` are the same node; `/` is the root of every namespace starting with `/`."""
    return namespace.rstrip("/") + "/"


def under(namespace: str, path: str) -> bool:
    """Whether `namespace` falls under the hierarchy `path` (whole segments: `/users/a` is
    under `/users/a` and `/users`, never under `/users/al`)."""
    return path_of(namespace).startswith(path_of(path))


@dataclass(frozen=True)
class Template:
    """One namespace template of one of the memory's strategies, e.g.
    `/strategies/{memoryStrategyId}/actors/{actorId}/`."""

    strategy_id: str
    template: str

    def resolve(self, actor_id: str, session_id: str) -> str:
        """The namespace an extraction for this actor and session writes into."""
        values = {"actorId": actor_id, "sessionId": session_id}
        values["memoryStrategyId"] = self.strategy_id
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.template)

    def _pattern(self, text: str) -> re.Pattern[str]:
        parts: list[str] = []
        last = 0
        for match in _PLACEHOLDER.finditer(text):
            parts.append(re.escape(text[last : match.start()]))
            name = match.group(1)
            if name == "actorId":
                parts.append("(?P<actor>.+)")  # an actor id may hold `/`
            elif name == "sessionId":
                parts.append("[^/]+")
            else:
                parts.append(re.escape(self.strategy_id))
            last = match.end()
        parts.append(re.escape(text[last:]))
        return re.compile("".join(parts))

    def actor_in(self, namespace: str) -> str | None:
        """The actor a namespace of this template names (None: it is not one of its
        namespaces, or the template names no actor)."""
        if "{actorId}" not in self.template:
            return None
        match = self._pattern(self.template).fullmatch(namespace)
        return match.group("actor") if match else None

    def actors_at(self, path: str) -> set[str]:
        """The actors a path may name: where it is one of the template's namespaces, or
        stops at the template's actor level (`/users/ada` of `/users/{actorId}/facts`).
        An actor id may hold `/`, so `/users/ada/facts` is ada's, or actor `ada/facts`'s."""
        if "{actorId}" not in self.template:
            return set()
        head = self.template[: self.template.index("{actorId}") + len("{actorId}")]
        trimmed = path.rstrip("/") or path
        found = set()
        for text in (head, self.template, self.template.rstrip("/")):
            match = self._pattern(text).fullmatch(trimmed)
            if match:
                found.add(match.group("actor"))
        return found


def actors_in(namespace: str, templates: Iterable[Template]) -> set[str]:
    """Every actor the memory's templates read in a record's namespace."""
    return {a for t in templates if (a := t.actor_in(namespace)) is not None}


def owner_of(namespace: str | None, templates: Iterable[Template]) -> str | None:
    """The actor (memkit user) that owns a record of `namespace`: the one actor the memory's
    namespace templates read in it; None (a shared record: memory:admin only) when none or
    several do."""
    if namespace is None:
        return None
    actors = actors_in(namespace, templates)
    return next(iter(actors)) if len(actors) == 1 else None


def actors_at(path: str, templates: Iterable[Template]) -> set[str]:
    """The actors a retrieval's namespace or namespacePath may name (empty: none)."""
    return {actor for t in templates for actor in t.actors_at(path)}


# -- metadata ----------------------------------------------------------------------------------

MetadataValue = dict[str, Any]  # exactly one of stringValue, stringListValue, numberValue,
# dateTimeValue (epoch seconds on the wire; kept as ISO 8601 in the record)


def stored_metadata(metadata: Mapping[str, Mapping[str, Any]] | None) -> dict[str, MetadataValue]:
    """AgentCore metadata as the record keeps it (times as ISO 8601 strings)."""
    kept: dict[str, MetadataValue] = {}
    for key, value in (metadata or {}).items():
        if "dateTimeValue" in value:
            kept[key] = {"dateTimeValue": iso_of(value["dateTimeValue"])}
        elif "stringListValue" in value:
            kept[key] = {"stringListValue": list(value["stringListValue"])}
        elif "numberValue" in value:
            kept[key] = {"numberValue": float(value["numberValue"])}
        else:
            kept[key] = {"stringValue": str(value["stringValue"])}
    return kept


def wire_metadata(metadata: Mapping[str, Any]) -> dict[str, MetadataValue]:
    """A record's metadata as AgentCore answers it (times as epoch seconds). Entries that
    are not AgentCore's (a record written through memkit's own API) are left out."""
    shown: dict[str, MetadataValue] = {}
    for key, value in metadata.items():
        if not isinstance(value, dict) or len(value) != 1:
            continue
        ((kind, item),) = value.items()
        if kind == "dateTimeValue" and isinstance(item, str):
            shown[key] = {kind: epoch_of(item)}
        elif kind == "stringValue" and isinstance(item, str):
            shown[key] = {kind: item}
        elif kind == "stringListValue" and isinstance(item, list):
            shown[key] = {kind: [str(v) for v in item]}
        elif kind == "numberValue" and isinstance(item, int | float) and not isinstance(item, bool):
            shown[key] = {kind: item}
    return shown


def iso_of(value: Any) -> str:
    """A wire timestamp (epoch seconds, or a datetime a caller built) as ISO 8601 UTC."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    else:
        moment = datetime.fromtimestamp(float(value), UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def epoch_of(value: str) -> float:
    """An ISO 8601 time as epoch seconds (what rest-json clients parse a timestamp from)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


# -- tags ---------------------------------------------------------------------------------------


def record_tags(
    namespace: str | None,
    strategy_id: str | None,
    metadata: Mapping[str, MetadataValue],
    expiry_days: int | None,
) -> tuple[str, ...]:
    """The topics that say what a record is in AgentCore's terms (see the module's table)."""
    tags = [MARKER]
    if namespace is not None:
        tags += [NS + namespace, PATH + path_of(namespace)]
    if strategy_id is not None:
        tags.append(STRATEGY + strategy_id)
    for key, value in metadata.items():
        tags.append(KEY + key)
        if "stringValue" in value:
            tags.append(f"{META}{key}|{value['stringValue']}")
        for member in value.get("stringListValue", ()):
            tags.append(f"{META}{key}|{member}")
    if expiry_days is not None:
        tags.append(f"{EXPIRY}{expiry_days}")
    return tuple(dict.fromkeys(tags))


@dataclass(frozen=True)
class RecordTags:
    """What a record's tags say (`read_tags`)."""

    namespace: str | None
    strategy_id: str | None
    expiry_days: int | None
    agentcore: bool


def read_tags(topics: Iterable[str]) -> RecordTags:
    namespace = strategy = None
    expiry: int | None = None
    marked = False
    for topic in topics:
        if topic == MARKER:
            marked = True
        elif topic.startswith(NS) and namespace is None:
            namespace = topic[len(NS) :]
        elif topic.startswith(STRATEGY) and strategy is None:
            strategy = topic[len(STRATEGY) :]
        elif topic.startswith(EXPIRY) and topic[len(EXPIRY) :].isdigit():
            expiry = int(topic[len(EXPIRY) :])
    return RecordTags(namespace, strategy, expiry, marked)


def agentcore_scope(topics: Iterable[str]) -> tuple[str | None, str | None] | None:
    """Where an AgentCore record is (its namespace and strategy); None for memkit's own
    records. Compaction merges only records of one scope."""
    tags = read_tags(topics)
    return (tags.namespace, tags.strategy_id) if tags.agentcore else None


# -- where a search looks ----------------------------------------------------------------------


def scope_conditions(
    memory_id: str,
    *,
    namespace: str | None,
    namespace_path: str | None,
    strategy_id: str | None,
    user_id: str | None,
) -> list[Condition]:
    """The index conditions of a retrieval or a listing: the memory's records (never a
    session's messages), in the namespace or under the path, of the strategy, of the user
    (a caller without memory:admin sees only its own actor's records)."""
    conditions = [
        Condition("namespace", "eq", memory_id),
        Condition("kind", "eq", RECORD_KIND),
        Condition("topics", "eq", MARKER),
    ]
    if namespace is not None:
        conditions.append(Condition("topics", "eq", NS + namespace))
    if namespace_path is not None:
        conditions.append(Condition("topics", "startswith", PATH + path_of(namespace_path)))
    if strategy_id is not None:
        conditions.append(Condition("topics", "eq", STRATEGY + strategy_id))
    if user_id is not None:
        conditions.append(Condition("user_id", "eq", user_id))
    return conditions


@dataclass(frozen=True)
class PostFilter:
    """A number compared (the index holds no number of metadata): checked on each record
    the search returns."""

    key: str
    operator: str
    value: float

    def passes(self, record: StoredRecord) -> bool:
        stored = record.metadata.get(self.key)
        number = stored.get("numberValue") if isinstance(stored, dict) else None
        if not isinstance(number, int | float) or isinstance(number, bool):
            return False
        have, want = float(number), self.value
        tests = {
            "EQUALS_TO": have == want,
            "GREATER_THAN": have > want,
            "GREATER_THAN_OR_EQUALS": have >= want,
            "LESS_THAN": have < want,
            "LESS_THAN_OR_EQUALS": have <= want,
        }
        return tests[self.operator]


@dataclass(frozen=True)
class MetadataFilter:
    """One metadataFilters expression, validated (memkit.agentcore.record_models)."""

    key: str
    operator: str
    value: MetadataValue | None = None


def metadata_conditions(
    filters: Sequence[MetadataFilter],
) -> tuple[list[Condition], list[PostFilter]]:
    """Metadata filters as index conditions where memkit's filters hold them (strings,
    string lists, existence, the system times), the rest as post-filters (each with an
    existence condition, so the index still narrows the candidates)."""
    conditions: list[Condition] = []
    post: list[PostFilter] = []
    for item in filters:
        key, operator, value = item.key, item.operator, item.value or {}
        field = SYSTEM_DATE_FIELDS.get(key)
        if field is not None:  # BEFORE or AFTER (the models refuse any other operator)
            bound = epoch_of(iso_of(value["dateTimeValue"]))
            conditions.append(Condition(field, "lt" if operator == "BEFORE" else "gt", bound))
            continue
        if operator == "EXISTS":
            conditions.append(Condition("topics", "eq", KEY + key))
        elif operator == "NOT_EXISTS":
            conditions.append(Condition("topics", "none", [KEY + key]))
        elif operator == "EQUALS_TO" and "stringValue" in value:
            conditions.append(Condition("topics", "eq", f"{META}{key}|{value['stringValue']}"))
        elif operator == "CONTAINS":
            members = [f"{META}{key}|{m}" for m in value["stringListValue"]]
            conditions.append(Condition("topics", "all", members))
        else:  # a number compared: the records with the key, then their values
            conditions.append(Condition("topics", "eq", KEY + key))
            post.append(PostFilter(key, operator, float(value["numberValue"])))
    return conditions, post


def scope_hash(text: str, user_id: str | None, namespace: str | None) -> str:
    """A record's content hash, scoped to its AgentCore namespace as well as its user, so
    the same text in two namespaces is two records (deduplication and compaction compare
    hashes within memkit's namespace, which is the whole memory)."""
    canonical = json.dumps([user_id or "", namespace or "", text.strip()], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
