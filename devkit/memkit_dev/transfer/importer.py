"""`memkit import`: memkit export lines (transfer/shapes.py reads every accepted shape into
them) written through the SDK, idempotently.

- Ids are kept (sessions, messages, records, profiles by name), and what is already stored as
  the file has it is not written again: messages by id (the append reports them as already
  stored), records by id (read first, written only when new or different), sessions,
  scratchpads and profiles compared field by field. A second import of a file writes nothing.
- Batched as the SDK batches: a `messages` line is one append of up to 100 messages; records
  go 100 a request, read back 8 at a time to compare.
- A line the API refuses is reported with where it came from and skipped; an import never
  deletes or hides what the stack already holds (a session that exists gets the file's fields,
  never fewer messages). The run stops only when nothing more can go in: a refused credential,
  or the API still unreachable or throttling after the SDK's retries.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from memkit.client import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    MemkitClient,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServiceUnavailableError,
)
from memkit.models.api import ProfileView
from memkit.models.memory import MemoryRecordView
from memkit.models.session import SessionView
from memkit_dev.transfer import format as fmt
from memkit_dev.transfer.shapes import Entry, Problem

# What a PUT of the document sets besides messages (SessionWrite), and what a PATCH can change
# on a session that exists (SessionPatch).
SESSION_WRITABLE = (
    "data",
    "context",
    "tokens",
    "ttl_seconds",
    "long_term_memory_strategy",
    "profile",
    "title",
    "metadata",
    "index_messages",
    "memories",
)
# The session's summary window: a PUT takes it as a query parameter, a PATCH in its body (null:
# the server's). A file written before exports carried it has no such key: left as it is.
WINDOW = "context_window_max"
SESSION_PATCHABLE = (*(k for k in SESSION_WRITABLE if k != "memories"), WINDOW)
# Compared with a stored record to decide whether to write it again (last_accessed moves with
# every use and is not).
RECORD_COMPARED = tuple(k for k in fmt.RECORD_WRITABLE if k != "last_accessed")
# A record's times: compared as instants (the server writes its own stamps in
# milliseconds, a client's in microseconds).
TIMES = ("created_at", "event_date", "valid_from", "valid_until", "recorded_at", "retired_at")
RECORD_DEFAULTS: dict[str, Any] = {
    "memory_type": "semantic",
    "topics": [],
    "entities": [],
    "namespace": "default",
    "pinned": False,
    "extracted_from": [],
    "metadata": {},
    "discrete_memory_extracted": "f",
}
READERS = 8
SUMMARY_KINDS = ("profiles", "sessions", "messages", "scratchpads", "memories")


class Abort(Exception):
    """Nothing more can go in: the reason, for the summary."""


@dataclass
class SessionUnit:
    """A session line being imported, until its messages are in: whether this import created
    it, and the newest messages its document shows when that is fewer than the log."""

    session_id: str
    namespace: str
    user_id: str | None
    document: dict[str, Any]
    created: bool
    view: deque[dict[str, Any]] | None = None
    appended: int = 0
    where: str = ""
    # The ids of the messages it held before this import (read on its first messages line,
    # when it existed): only the others are appended, so a session that has them all is
    # not written at all (an append of stored messages still moves its version).
    stored: set[str] | None = None


@dataclass
class Importer:
    client: MemkitClient
    # AMS and Mem0 records whose text their user already has under another id: skipped
    # (True) or imported too.
    deduplicate: bool = True
    report: TextIO = field(default_factory=lambda: sys.stderr)
    on_progress: Callable[[Counter[str]], None] = lambda counts: None
    counts: Counter[str] = field(default_factory=Counter)
    problems: int = 0

    def __post_init__(self) -> None:
        self._unit: SessionUnit | None = None
        self._records: list[Entry] = []
        # Records that supersede others: written last, each after those it names (a record
        # superseding one the file holds later would find nothing to supersede).
        self._superseding: list[Entry] = []

    def run(self, entries: Iterable[Entry | Problem]) -> Counter[str]:
        try:
            for entry in entries:
                if isinstance(entry, Problem):
                    self._failed(entry.where, entry.reason, entry.items)
                else:
                    self._entry(entry)
                self.on_progress(self.counts)
            self._flush_records()
            self._end_session()
            for entry in superseding_last(self._superseding):
                self._entry(entry, defer=False)
            self._flush_records()
        except Abort as stop:
            self.counts["aborted"] = 1
            self.report.write(f"memkit import: stopped: {stop}\n")
        return self.counts

    def _entry(self, entry: Entry, defer: bool = True) -> None:
        kind = entry.value["kind"]
        if kind == fmt.MEMORY and defer and entry.value.get("supersedes"):
            self._superseding.append(entry)
            return
        if kind == fmt.MEMORY:
            if self._records and self._records[0].origin != entry.origin:
                self._flush_records()
            self._records.append(entry)
            if len(self._records) == fmt.CHUNK:
                self._flush_records()
            return
        self._flush_records()
        if kind == fmt.MESSAGES:
            self._guarded(entry, len(entry.value["messages"]), self._messages)
            return
        self._end_session()
        handlers: dict[str, Callable[[Entry], None]] = {
            fmt.SESSION: self._session,
            fmt.SCRATCHPAD: self._scratchpad,
            fmt.PROFILE: self._profile,
        }
        self._guarded(entry, 1, handlers[kind])

    def _guarded(self, entry: Entry, items: int, handle: Callable[[Entry], None]) -> None:
        """Run `handle`; an API refusal of this entry is reported and counted as failed."""
        try:
            handle(entry)
        except (
            AuthenticationError,
            APIConnectionError,
            RateLimitError,
            ServiceUnavailableError,
        ) as error:
            raise Abort(f"{entry.where}: {fatal(error)}") from error
        except APIError as error:
            self._failed(entry.where, f"{what(entry.value)}: {error}", items)
        except (ValueError, TypeError) as error:  # a value the SDK cannot even send
            self._failed(entry.where, f"{what(entry.value)}: {error}", items)

    def _failed(self, where: str, reason: str, items: int = 1) -> None:
        self.counts["failed"] += items
        self.problems += 1
        self.report.write(f"{where}: {reason}\n")

    # -- sessions ----------------------------------------------------------------------------

    def _session(self, entry: Entry) -> None:
        value = entry.value
        session_id, namespace = value["session_id"], value["namespace"]
        user_id = value.get("user_id")
        document = {k: value[k] for k in (*SESSION_WRITABLE, WINDOW) if k in value}
        try:
            current: SessionView | None = self.client.get_session(
                session_id, namespace=namespace, user_id=user_id
            )
        except NotFoundError:
            current = None
        unit = SessionUnit(session_id, namespace, user_id, document, current is None)
        unit.where = entry.where
        if current is None:
            self.client.put_session(
                session_id,
                {**without(document, WINDOW), "messages": []},
                namespace=namespace,
                user_id=user_id,
                context_window_max=document.get(WINDOW),
            )
            self.counts["sessions"] += 1
            shown = value.get("document_messages")
            if isinstance(shown, int) and shown >= 0:
                unit.view = deque(maxlen=shown)
        else:
            patch = session_patch(current, document)
            if patch:
                self.client.patch_session(session_id, patch, namespace=namespace, user_id=user_id)
                self.counts["sessions"] += 1
            else:
                self.counts["skipped"] += 1
        self._unit = unit

    def _messages(self, entry: Entry) -> None:
        value = entry.value
        session_id, namespace = value["session_id"], value["namespace"]
        user_id = value.get("user_id")
        unit = self._unit
        if unit is None or (unit.session_id, unit.namespace) != (session_id, namespace):
            self._end_session()
            unit = SessionUnit(session_id, namespace, user_id, {}, created=False)
            unit.where = entry.where
            self._unit = unit
        messages = value["messages"]
        stored = self._stored_messages(unit)
        new = [m for m in messages if not (isinstance(m, dict) and m.get("id") in stored)]
        self.counts["skipped"] += len(messages) - len(new)
        if new:
            ack = self.client.append_messages(session_id, new, namespace=namespace, user_id=user_id)
            self.counts["messages"] += len(ack.appended)
            self.counts["skipped"] += len(ack.already_stored)
        unit.appended += len(messages)
        if unit.view is not None:
            unit.view.extend(messages)

    def _stored_messages(self, unit: SessionUnit) -> set[str]:
        if unit.created:
            return set()
        if unit.stored is None:
            try:
                unit.stored = {
                    m.id
                    for m in self.client.iter_messages(
                        unit.session_id, namespace=unit.namespace, user_id=unit.user_id
                    )
                }
            except NotFoundError:
                unit.stored = set()
        return unit.stored

    def _end_session(self) -> None:
        """A session this import created whose document showed only its newest messages
        shows those again (a PUT of them: the older ones stay in the log, as they were)."""
        unit, self._unit = self._unit, None
        if unit is None or unit.view is None or len(unit.view) >= unit.appended:
            return
        entry = Entry(unit.where, {"kind": fmt.SESSION, "session_id": unit.session_id})

        def put(_: Entry) -> None:
            # No window: the PUT keeps the one the session was created with.
            self.client.put_session(
                unit.session_id,
                {**without(unit.document, WINDOW), "messages": list(unit.view or ())},
                namespace=unit.namespace,
                user_id=unit.user_id,
            )

        self._guarded(entry, 0, put)

    # -- scratchpads and profiles ------------------------------------------------------------

    def _scratchpad(self, entry: Entry) -> None:
        value = entry.value
        session_id, user_id = value.get("session_id"), value.get("user_id")
        if not session_id and not user_id:
            raise ValueError("a scratchpad line names a session_id or a user_id")
        if fmt.empty(value.get("content")):
            self.counts["skipped"] += 1
            return
        where = {
            "namespace": value["namespace"],
            "profile": value["profile"],
            "user_id": user_id if session_id else None,
        }
        if session_id:
            current = self.client.get_scratchpad(session_id, **where)
        else:
            current = self.client.get_scratchpad(user_id=user_id, **without(where, "user_id"))
        if current.content == value["content"]:
            self.counts["skipped"] += 1
            return
        if session_id:
            self.client.replace_scratchpad(value["content"], session_id, **where)
        else:
            self.client.replace_scratchpad(
                value["content"], user_id=user_id, **without(where, "user_id")
            )
        self.counts["scratchpads"] += 1

    def _profile(self, entry: Entry) -> None:
        value = entry.value
        name, namespace, spec = value["name"], value["namespace"], value["spec"]
        try:
            current: ProfileView | None = self.client.get_profile(name, namespace=namespace)
        except NotFoundError:
            current = None
        if current is not None and not current.builtin and fmt.profile_spec(current) == spec:
            self.counts["skipped"] += 1
            return
        self.client.put_profile(name, spec, namespace=namespace)
        self.counts["profiles"] += 1

    # -- long-term records -------------------------------------------------------------------

    def _flush_records(self) -> None:
        batch, self._records = self._records, []
        if not batch:
            return
        by_id: dict[str, Entry] = {}
        for entry in batch:
            if entry.value["id"] in by_id:
                self._failed(entry.where, f"record {entry.value['id']!r} repeats an earlier line")
                continue
            by_id[entry.value["id"]] = entry
        stored = self._stored([*by_id])
        fresh = [e for i, e in by_id.items() if differs(stored.get(i), e.value)]
        self.counts["skipped"] += len(by_id) - len(fresh)
        if not fresh:
            return
        try:
            self._create(fresh)
        except APIError as error:
            if not 400 <= error.status < 500 or isinstance(
                error, RateLimitError | AuthenticationError
            ):
                raise Abort(f"{fresh[0].where}: {fatal(error)}") from error
            for entry in fresh:  # which ones: each alone
                self._guarded(entry, 1, lambda e: self._create([e]))
        except APIConnectionError as error:
            raise Abort(f"{fresh[0].where}: {fatal(error)}") from error

    def _create(self, entries: list[Entry]) -> None:
        bodies = [record_body(e.value) for e in entries]
        # A memkit export is a copy: its records are kept even when a text repeats.
        deduplicate = self.deduplicate and entries[0].origin != "memkit"
        ack = self.client.create_memories(bodies, deduplicate=deduplicate)
        self.counts["memories"] += len(ack.created)
        self.counts["skipped"] += len(ack.duplicates)

    def _stored(self, ids: list[str]) -> dict[str, MemoryRecordView]:
        """The records stored under these ids (another user's is as absent as a new one)."""

        def get(memory_id: str) -> MemoryRecordView | None:
            try:
                return self.client.get_memory(memory_id)
            except (NotFoundError, PermissionDeniedError):
                return None
            except ValueError:  # an id no path can name: the create refuses it, saying why
                return None

        try:
            with ThreadPoolExecutor(max_workers=READERS) as pool:
                found = dict(zip(ids, pool.map(get, ids), strict=True))
        except (APIError, APIConnectionError) as error:
            raise Abort(fatal(error)) from error
        return {i: r for i, r in found.items() if r is not None}


def session_patch(current: SessionView, document: dict[str, Any]) -> dict[str, Any]:
    """The PATCH that gives an existing session the file's fields (empty: it has them).
    `data` is merged by a PATCH: a key the file does not have is sent as null (deleted)."""
    shown = current.model_dump(mode="json")
    patch: dict[str, Any] = {}
    for key in SESSION_PATCHABLE:
        if key not in document or same(shown.get(key), document[key]):
            continue
        if key == "data":
            data = dict(document["data"] or {})
            patch["data"] = {**{k: None for k in shown["data"] if k not in data}, **data}
        elif key == "tokens" and document[key] is None:
            continue
        else:
            patch[key] = document[key]
    return patch


def superseding_last(entries: list[Entry]) -> list[Entry]:
    """`entries` ordered so each comes after the entries it supersedes (a chain a <- b <- c
    is written a, b, c: each link then finds the record it names)."""
    by_id = {str(e.value["id"]): e for e in entries}
    ordered: list[Entry] = []
    placed: set[str] = set()

    def place(record_id: str, path: frozenset[str]) -> None:
        if record_id in placed or record_id in path:
            return
        for named in by_id[record_id].value.get("supersedes") or []:
            if named in by_id:
                place(named, path | {record_id})
        placed.add(record_id)
        ordered.append(by_id[record_id])

    for record_id in by_id:
        place(record_id, frozenset())
    ordered += [e for e in entries if by_id[str(e.value["id"])] is not e]  # repeats: reported
    return ordered


def record_body(value: dict[str, Any]) -> dict[str, Any]:
    return {k: value[k] for k in fmt.RECORD_WRITABLE if value.get(k) is not None}


def differs(stored: MemoryRecordView | None, value: dict[str, Any]) -> bool:
    """Whether a record must be written: new, or a compared field differs from the file's."""
    if stored is None:
        return True
    shown = stored.model_dump(mode="json")
    for key in RECORD_COMPARED:
        if key not in value:
            continue
        wanted = value[key] if value[key] is not None else RECORD_DEFAULTS.get(key)
        have = shown.get(key)
        if key in ("topics", "entities", "extracted_from") and isinstance(wanted, list):
            wanted = list(dict.fromkeys(wanted))
        if key in TIMES:
            if instant(wanted) != instant(have):
                return True
        elif not same(have, wanted):
            return True
    return False


def instant(value: Any) -> Any:
    """A time as a comparable instant (an ISO 8601 text in any offset), else as it is."""
    if not isinstance(value, str):
        return value
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return parsed.timestamp() if parsed.tzinfo else parsed.isoformat()


def same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def without(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}


def what(value: dict[str, Any]) -> str:
    """The item a line is, in words: `session chat-1`, `record r-9`, `profile notes`."""
    kind = value.get("kind")
    if kind in (fmt.SESSION, fmt.MESSAGES):
        return f"{kind} of session {value.get('session_id')!r}"
    if kind == fmt.MEMORY:
        return f"record {value.get('id')!r}"
    if kind == fmt.PROFILE:
        return f"profile {value.get('name')!r}"
    owner = value.get("session_id") or f"user {value.get('user_id')}"
    return f"scratchpad {value.get('profile')!r} of {owner}"


def fatal(error: Exception) -> str:
    """Why nothing more can go in, and what to do."""
    if isinstance(error, AuthenticationError):
        return f"the API refused the credential ({error}): check --token or MEMKIT_TOKEN"
    if isinstance(error, RateLimitError | ServiceUnavailableError):
        return (
            f"the API is still refusing after retries ({error}); run the same import again "
            "later: what is stored is skipped"
        )
    if isinstance(error, APIConnectionError):
        return f"the API cannot be reached ({error}); check --url or MEMKIT_URL"
    return str(error)
