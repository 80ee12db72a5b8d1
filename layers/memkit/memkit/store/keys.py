"""The single-table key scheme. Every partition key starts with the tenant.

    profile             PK T#<tenant>#PROFILES#<namespace>        SK P#<name>
    session             PK T#<tenant>#S#<namespace>#<session_id>  SK META        LSI1SK META
    message             PK T#<tenant>#S#<namespace>#<session_id>  SK MSG#<id>    LSI1SK M#<µs>#<id>
    pending memory      PK T#<tenant>#S#<namespace>#<session_id>  SK MEM#<id>
    session scratchpad  PK T#<tenant>#S#<namespace>#<session_id>  SK PAD#<profile>
    user scratchpad     PK T#<tenant>#U#<namespace>#<user_id>     SK PAD#<profile>
    long-term record    PK T#<tenant>#R#<id>                      SK RECORD
    its index state     PK T#<tenant>#R#<id>                      SK INDEX
    record by hash      GSI1PK T#<tenant>#HASH#<namespace>#<hash> GSI1SK <created µs>#<id>
    session by expiry   GSI3PK EXP#<shard>                 GSI3SK <expires_at>#<PK>
    record by namespace GSI3PK T#<tenant>#RECS#<namespace> GSI3SK <user_id>#<created µs>#<id>
    request quota       PK T#<tenant>#QUOTA                       SK M#<epoch minute>

The AgentCore wing keeps its own items in this table, under partitions of its own named from
these parts (memkit.agentcore.table: T#<tenant>#AC...).

GSI3 is the lifecycle index: a session document that expires is listed by its expiry time
(sharded, so no one partition takes every session's writes) and a cleanup run reads only the
due ones; a long-term record is listed by namespace then user (forgetting and compaction of a
namespace, deletion of a user). Only session metas with `expires_at` and records carry it.

A long-term record is found by its id alone (AMS's GET /v1/long-term-memory/{id} names no
namespace), so ids are unique per tenant.

A session and everything of it share one partition (one Query deletes or pages it). A message
is keyed by its id, so writing it again is idempotent whatever its `created_at`; the local
index LSI1 orders messages by created_at then id, and its keys sort M#... < META, so one
descending LSI1 Query from META returns the session and its newest messages
(docs/design-sessions.md). Components are escaped so that a `#` or `%` in a caller's id can
never forge another key.
"""

from __future__ import annotations

import zlib

# Key components are escaped and shortened by memkit.keyparts (the vector table's too).
from memkit.keyparts import MAX_PART_BYTES as MAX_PART_BYTES
from memkit.keyparts import part as part
from memkit.keyparts import within

Key = tuple[str, str]

SESSION_META = "META"
MESSAGE_PREFIX = "MSG#"
ORDER_PREFIX = "M#"
MEMORY_PREFIX = "MEM#"
PAD_PREFIX = "PAD#"
# The key the health check reads (memkit.api.routes.health): no item has it.
HEALTH_PROBE_PK = "HEALTH"
# Microseconds since the epoch, zero-padded so text order is time order until year 2286.
TIME_DIGITS = 16


MAX_SORT_KEY_BYTES = 1_024


def sort_key(head: str, tail: str) -> str:
    """`head` + `tail` within DynamoDB's sort key size: `tail` is shortened (a digest) only
    when the whole would not fit, so every sort key that fitted before is unchanged."""
    return head + within(tail, MAX_SORT_KEY_BYTES - len(head.encode()))


def profiles_pk(tenant: str, namespace: str) -> str:
    return f"T#{part(tenant)}#PROFILES#{part(namespace)}"


def profile_key(tenant: str, namespace: str, name: str) -> Key:
    return profiles_pk(tenant, namespace), f"P#{part(name)}"


def session_pk(tenant: str, namespace: str, session_id: str) -> str:
    return f"T#{part(tenant)}#S#{part(namespace)}#{part(session_id)}"


def sessions_prefix(tenant: str) -> str:
    """What every session partition key of the tenant starts with."""
    return f"T#{part(tenant)}#S#"


def session_key(tenant: str, namespace: str, session_id: str) -> Key:
    return session_pk(tenant, namespace, session_id), SESSION_META


def session_pad_key(tenant: str, namespace: str, session_id: str, profile: str) -> Key:
    return session_pk(tenant, namespace, session_id), f"PAD#{part(profile)}"


def user_pk(tenant: str, namespace: str, user_id: str) -> str:
    return f"T#{part(tenant)}#U#{part(namespace)}#{part(user_id)}"


def user_pad_key(tenant: str, namespace: str, user_id: str, profile: str) -> Key:
    return user_pk(tenant, namespace, user_id), f"PAD#{part(profile)}"


def pad_key(
    tenant: str,
    namespace: str,
    user_scoped: bool,
    session_id: str | None,
    user_id: str | None,
    profile: str,
) -> Key:
    """The scratchpad's key: the user's partition for user scope, else the session's."""
    if user_scoped:
        assert user_id is not None
        return user_pad_key(tenant, namespace, user_id, profile)
    assert session_id is not None
    return session_pad_key(tenant, namespace, session_id, profile)


def message_order(created_at_us: int, message_id: str) -> str:
    """A message's LSI1 sort key: ordered by created_at, then id (ties at the same µs)."""
    if not 0 <= created_at_us < 10**TIME_DIGITS:
        raise ValueError("created_at is outside the representable range")
    return f"{ORDER_PREFIX}{created_at_us:0{TIME_DIGITS}d}#{part(message_id)}"


def message_sk(message_id: str) -> str:
    return f"{MESSAGE_PREFIX}{part(message_id)}"


def message_key(tenant: str, namespace: str, session_id: str, message_id: str) -> Key:
    return session_pk(tenant, namespace, session_id), message_sk(message_id)


def memory_key(tenant: str, namespace: str, session_id: str, memory_id: str) -> Key:
    """A pending structured memory of a session (promoted to long-term memory later)."""
    return session_pk(tenant, namespace, session_id), f"{MEMORY_PREFIX}{part(memory_id)}"


def sessions_by_namespace(tenant: str, namespace: str) -> str:
    """GSI1 partition listing a namespace's sessions (sort key: session_list_sk)."""
    return f"T#{part(tenant)}#SESSIONS#{part(namespace)}"


def sessions_by_user(tenant: str, namespace: str, user_id: str) -> str:
    """GSI2 partition listing a user's sessions in a namespace (sort key: session_list_sk)."""
    return f"T#{part(tenant)}#SESSIONS#{part(namespace)}#U#{part(user_id)}"


def session_list_sk(created_at_us: int, session_id: str) -> str:
    return f"{created_at_us:0{TIME_DIGITS}d}#{part(session_id)}"


RECORD_SK = "RECORD"
INDEX_STATE_SK = "INDEX"


def record_pk(tenant: str, record_id: str) -> str:
    return f"T#{part(tenant)}#R#{part(record_id)}"


def record_key(tenant: str, record_id: str) -> Key:
    return record_pk(tenant, record_id), RECORD_SK


def index_state_key(tenant: str, record_id: str) -> Key:
    return record_pk(tenant, record_id), INDEX_STATE_SK


# A record's earlier versions and what a delete leaves, in its partition, by its life (the
# µs of its recorded_at: a record created again under a deleted one's id starts anew).
VERSION_PREFIX = "V#"
DELETED_PREFIX = "DELETED#"
VERSION_DIGITS = 10


def _padded(number: int, digits: int) -> str:
    return str(number).rjust(digits, "0")


def record_version_key(tenant: str, record_id: str, life: int, number: int) -> Key:
    sk = f"{VERSION_PREFIX}{_padded(life, TIME_DIGITS)}#{_padded(number, VERSION_DIGITS)}"
    return record_pk(tenant, record_id), sk


def deleted_record_key(tenant: str, record_id: str, life: int) -> Key:
    return record_pk(tenant, record_id), f"{DELETED_PREFIX}{_padded(life, TIME_DIGITS)}"


def slot_key(tenant: str, namespace: str, user_id: str | None, slot: str) -> Key:
    """Which record is current in a slot (what a fact is about) of a user in a namespace: in
    the user's partition (a user's deletion takes it), or the namespace's for no user."""
    if user_id:
        return user_pk(tenant, namespace, user_id), sort_key("SLOT#", part(slot))
    return namespace_slots_pk(tenant, namespace), sort_key("SLOT#", part(slot))


def namespace_slots_pk(tenant: str, namespace: str) -> str:
    """The partition of the slots of a namespace's records of no user."""
    return f"T#{part(tenant)}#SLOTS#{part(namespace)}"


def records_by_hash(tenant: str, namespace: str, memory_hash: str) -> str:
    """GSI1 partition of a namespace's records with one content hash (the hash covers the
    user, so two users' equal texts never collide)."""
    return f"T#{part(tenant)}#HASH#{part(namespace)}#{part(memory_hash)}"


# -- lifecycle (GSI3) ------------------------------------------------------------------------

# Expiry entries are spread over this many partitions (by the item's partition key).
EXPIRY_SHARDS = 16
EXPIRY_DIGITS = 10  # epoch seconds, zero-padded: text order is time order until 2286


def expiry_shard(pk: str) -> int:
    return zlib.crc32(pk.encode()) % EXPIRY_SHARDS


def expiry_pk(shard: int) -> str:
    """GSI3 partition of the expiry entries of one shard."""
    return f"EXP#{shard:02d}"


def expiry_entry(pk: str, expires_at: int) -> Key:
    """The GSI3 keys of a session meta that expires at `expires_at` (epoch seconds)."""
    return expiry_pk(expiry_shard(pk)), sort_key(f"{expires_at:0{EXPIRY_DIGITS}d}#", pk)


def expiry_before(expires_at: int) -> str:
    """A GSI3SK bound: entries that sort below it expire before `expires_at`."""
    return f"{expires_at:0{EXPIRY_DIGITS}d}#"


def quota_key(tenant: str, minute: int) -> Key:
    """A tenant's request counter for one minute (epoch minutes)."""
    return f"T#{part(tenant)}#QUOTA", f"M#{minute}"


def records_by_namespace(tenant: str, namespace: str) -> str:
    """GSI3 partition listing a namespace's long-term records (sort key: record_listing_sk)."""
    return f"T#{part(tenant)}#RECS#{part(namespace)}"


def user_records_prefix(user_id: str | None) -> str:
    """The GSI3SK prefix of one user's records in a namespace ("" user: records of none)."""
    return f"{part(user_id or '')}#"


def record_listing_sk(user_id: str | None, created_us: int, record_id: str) -> str:
    head = f"{user_records_prefix(user_id)}{created_us:0{TIME_DIGITS}d}#"
    return sort_key(head, part(record_id))


def message_order_prefix(created_at_us: int, message_id_prefix: str) -> str:
    """The LSI1 sort keys of a session's messages written at `created_at_us` whose ids start
    with `message_id_prefix` (an AgentCore event's payloads) all start with this."""
    return f"{ORDER_PREFIX}{created_at_us:0{TIME_DIGITS}d}#{part(message_id_prefix)}"
