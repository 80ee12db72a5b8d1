"""DynamoDB for the local stack: moto in process, behind a loopback server.

One request at a time (a single-threaded server), so each request is atomic as DynamoDB's
per-item operations are: concurrent conditional writes from several execution environments
race exactly as they would on AWS, and none is half-applied.

`serialize_in_process_moto()` gives moto's in-process mock (`mock_aws`, used by the tests and
the benchmarks) the same rule: its backends are not thread-safe, and memkit's stores write
from thread pools. Two concurrent writes to a table with a stream can get the same stream
sequence number there (moto numbers a record by the shard's length before appending it),
and a reader that pages with AFTER_SEQUENCE_NUMBER then reads the last record forever.

`keep_stream_shards_on_rollback()` mends how moto undoes a cancelled transaction: it puts
back a deep copy of each table taken before the transaction, stream shard included, so
every shard iterator handed out before (the stream pumps', Lambda's poller's) reads the
discarded shard and sees nothing new, ever: indexing and curation stopped for good, with
nothing logged. DynamoDB's stream never loses its shard to a cancelled transaction.
"""

from __future__ import annotations

import threading
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server


class MotoDynamoDB:
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

        app = DomainDispatcherApplication(create_backend_app)
        self._server: BaseWSGIServer = make_server(
            host, port, app, threaded=False, request_handler=QuietHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="moto-dynamodb", daemon=True
        )

    @property
    def endpoint(self) -> str:
        host, port = self._server.socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> MotoDynamoDB:
        keep_stream_shards_on_rollback()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


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
    keep_stream_shards_on_rollback()


def keep_stream_shards_on_rollback() -> None:
    """After moto rolls a cancelled transaction back, each restored table gets its live
    stream shard back, less the records the cancelled writes added (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend, "_memkit_keeps_shards", False):
        return
    rollback_loses_shards = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        live = {
            name: (table.stream_shard, len(table.stream_shard.items))
            for name, table in self.tables.items()
            if table.stream_shard is not None
        }
        try:
            rollback_loses_shards(self, transact_items)
        except Exception:
            for name, (shard, length) in live.items():
                restored = self.tables.get(name)
                if restored is not None and restored.stream_shard is not shard:
                    del shard.items[length:]
                    shard.table = restored
                    restored.stream_shard = shard
            raise

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    DynamoDBBackend._memkit_keeps_shards = True  # type: ignore[attr-defined]
    # moto's own, for tests of what a reader does when a shard goes stale all the same.
    DynamoDBBackend._memkit_rollback_loses_shards = rollback_loses_shards  # type: ignore[attr-defined]


def dynamodb_client(endpoint: str | None, region: str) -> Any:
    import boto3

    return boto3.client("dynamodb", endpoint_url=endpoint, region_name=region)
