"""DynamoDB for the local stack: moto in process, behind a loopback server.

One request at a time (a single-threaded server), so each request is atomic as DynamoDB's
per-item operations are: concurrent conditional writes from several execution environments
race exactly as they would on AWS, and none is half-applied.

`serialize_in_process_moto()` gives moto's in-process mock (`mock_aws`, used by the tests and
the benchmarks) the same rule: its backends are not thread-safe, and memkit's stores write
from thread pools. Two concurrent writes to a table with a stream can get the same stream
sequence number there (moto numbers a record by the shard's length before appending it),
and a reader that pages with AFTER_SEQUENCE_NUMBER then reads the last record forever.

`mend_moto_transactions()` mends how moto runs a transaction. It deep-copied each table it
touches before every transaction (once per action), so time and memory grew with the table;
and it undid a cancelled one by putting that copy back, stream shard included, so every
shard iterator handed out before (the stream pumps', Lambda's poller's) read the discarded
shard and saw nothing new, ever: indexing and curation stopped for good, with nothing logged.
DynamoDB's stream never loses its shard to a cancelled transaction.

`quicken_moto_attribute_values()` makes moto write an attribute value into a response
without asking its attribute picker about each of the value's ten possible members (the
picker tries six aliases a member): a vector of 1,024 numbers took ten thousand picker calls,
and serializing Scan, GetItem and GetRecords answers was two thirds of moto's time in the
restart tests. The answer is the same JSON.
"""

from __future__ import annotations

import copy
import threading
from collections import defaultdict
from typing import Any, Self

from memkit_dev.local.loopback import LoopbackServer


class MotoDynamoDB(LoopbackServer):
    """moto's DynamoDB (and Streams) server on 127.0.0.1, in a thread of this process."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )

        class QuietHandler(MotoRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                """One line per DynamoDB call would drown the stack's own output."""

        dispatcher = DomainDispatcherApplication(create_backend_app)

        def app(environ: dict[str, Any], start_response: Any) -> Any:
            # One request at a time with the in-process mock too (they share backends).
            with _serial:
                return dispatcher(environ, start_response)

        super().__init__("moto-dynamodb", host, port, app=app, threaded=False, handler=QuietHandler)

    @property
    def endpoint(self) -> str:
        return self.url

    def start(self) -> Self:
        mend_moto_transactions()
        quicken_moto_attribute_values()
        return super().start()


_serial = threading.RLock()


def serialize_in_process_moto() -> None:
    """Make moto's in-process mock answer one request at a time, as the loopback server
    above does (idempotent; the lock is re-entrant for moto's own nested calls)."""
    from moto.core.botocore_stubber import BotocoreStubber

    if getattr(BotocoreStubber, "_memkit_serialized", False):
        return
    unserialized = BotocoreStubber.__call__

    def one_at_a_time(self: BotocoreStubber, *args: Any, **kwargs: Any) -> Any:
        with _serial:
            return unserialized(self, *args, **kwargs)

    BotocoreStubber.__call__ = one_at_a_time  # type: ignore[method-assign]
    BotocoreStubber._memkit_serialized = True  # type: ignore[attr-defined]
    mend_moto_transactions()
    quicken_moto_attribute_values()


_transacting = threading.local()


class _SnapshotCopy:
    """Stands in for the `copy` module inside moto's DynamoDB backend: while memkit's
    transact_write_items runs, the deep copy of a table moto takes before a transaction
    becomes a snapshot of the table's item maps (the items the transaction targets deep
    copied, the others shared: a Put or Delete replaces an item, it never changes one in
    place). Everywhere else it is the copy module itself."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:
        from moto.dynamodb.models.table import Table

        targets = getattr(_transacting, "targets", None)
        if targets is None or not isinstance(value, Table):
            return copy.deepcopy(value, memo)
        snapshot = copy.copy(value)
        snapshot.items = defaultdict(dict)
        for hash_key, held in value.items.items():
            snapshot.items[hash_key] = dict(held) if value.has_range_key else held
        for hash_key, range_key in targets.get(value.name, ()):
            if value.has_range_key and range_key in value.items.get(hash_key, {}):
                snapshot.items[hash_key][range_key] = copy.deepcopy(
                    value.items[hash_key][range_key]
                )
            elif not value.has_range_key and hash_key in value.items:
                snapshot.items[hash_key] = copy.deepcopy(value.items[hash_key])
        return snapshot


def _targets(backend: Any, transact_items: list[dict[str, Any]]) -> dict[str, set[Any]]:
    """table name -> the (hash, range) keys the transaction's actions name, as moto types."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    found: dict[str, set[Any]] = {}
    for action in transact_items:
        op = next(iter(action.values()), None)
        if not isinstance(op, dict):
            continue  # moto refuses it itself
        table = backend.tables.get(op.get("TableName"))
        if table is None:
            continue
        key = op.get("Key") or op.get("Item") or {}
        hash_value = key.get(table.hash_key_attr)
        range_value = key.get(table.range_key_attr) if table.range_key_attr else None
        if hash_value is not None:
            found.setdefault(table.name, set()).add(
                (DynamoType(hash_value), DynamoType(range_value) if range_value else None)
            )
    return found


def mend_moto_transactions() -> None:
    """moto's transact_write_items, mended twice (idempotent):

    - before a transaction it deep-copied every table it touches, once per action: time and
      memory grow with the table (a server grew by gigabytes under concurrent appends, and
      slow transactions widened every race into 409s). The copy is now a snapshot of the
      item maps (see _SnapshotCopy): the same rollback, at the cost of one dict per item;
    - its rollback put that copy back with its own stream shard, so every shard iterator
      handed out before read a dead shard: after a rollback each table keeps its live shard,
      less the records the cancelled writes added."""
    from moto.dynamodb import models

    DynamoDBBackend = models.DynamoDBBackend
    if getattr(DynamoDBBackend, "_memkit_mended", False):
        return
    as_moto_does = DynamoDBBackend.transact_write_items
    setattr(models, "copy", _SnapshotCopy())  # noqa: B010 (a module global, replaced)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        live = {
            name: (table, table.stream_shard, len(table.stream_shard.items))
            for name, table in self.tables.items()
            if table.stream_shard is not None
        }
        _transacting.targets = _targets(self, transact_items)
        try:
            as_moto_does(self, transact_items)
        except Exception:
            for name, (table, shard, length) in live.items():
                restored = self.tables.get(name)
                if restored is not None and restored is not table:
                    del shard.items[length:]
                    shard.table = restored
                    restored.stream_shard = shard
            raise
        finally:
            _transacting.targets = None

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    DynamoDBBackend._memkit_mended = True  # type: ignore[attr-defined]
    # moto's own, for tests of what a reader does when a shard goes stale all the same.
    DynamoDBBackend._memkit_rollback_loses_shards = as_moto_does  # type: ignore[attr-defined]


# The members of DynamoDB's (and DynamoDB Streams') AttributeValue shape.
_ATTRIBUTE_VALUE_MEMBERS = frozenset({"S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL"})


def quicken_moto_attribute_values() -> None:
    """moto's JSON serializer, writing an AttributeValue (idempotent).

    For every member of a structure's shape moto's serializer asks its attribute picker for
    the member's value, and the picker tries each alias of the member's name (the shape's
    name, a prefix-less name, the snake_case forms) before the name itself. An AttributeValue
    holds one of its ten members, as a dict keyed by the member's name: when every key of
    the dict is a member's name, no alias can match another key (none of them is a member's
    name), so the picker finds each member under its own name or not at all. Such a value is
    now written from its own keys, in the shape's member order, each through the serializer
    as before (strings, blobs in base64, sets, and the M and L values within); any other
    value (not a dict, a key outside the members) goes the picker's way.
    """
    from moto.core.serialize import BaseJSONSerializer

    if getattr(BaseJSONSerializer, "_memkit_quick_values", False):
        return
    as_moto_does = BaseJSONSerializer._serialize_type_structure

    def _serialize_type_structure(
        self: Any, serialized: Any, value: Any, shape: Any, key: str
    ) -> None:
        if (
            not key
            or shape.name != "AttributeValue"
            or type(value) is not dict
            or not value.keys() <= _ATTRIBUTE_VALUE_MEMBERS
            or not value.keys() <= shape.members.keys()
        ):
            as_moto_does(self, serialized, value, shape, key)
            return
        wrapper = self.MAP_TYPE()
        for member_key, member_shape in shape.members.items():
            member_value = value.get(member_key)
            if member_value is not None:
                member_shape.parent = shape
                self._serialize(wrapper, member_value, member_shape, member_key)
        self._default_serialize(serialized, wrapper, shape, key)

    BaseJSONSerializer._serialize_type_structure = _serialize_type_structure  # type: ignore[method-assign]
    BaseJSONSerializer._memkit_quick_values = True  # type: ignore[attr-defined]


def dynamodb_client(endpoint: str | None, region: str) -> Any:
    import boto3

    return boto3.client("dynamodb", endpoint_url=endpoint, region_name=region)
