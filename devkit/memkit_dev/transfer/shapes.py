"""What `memkit import` reads, turned into memkit export lines (transfer/format.py).

- memkit JSONL, as `memkit export` writes it (the header line first);
- the Agent Memory Server's working memory, as `GET /v1/working-memory/{session_id}` answers
  it (`session_id`, `messages`, `memories`, `data`, `context`, `user_id`, `namespace`, ...),
  and its long-term `MemoryRecord`s (`id`, `text`, `memory_type`, `topics`, ...), alone, in a
  list or as a search answer (`{"memories": [...], "total": ...}`);
- Mem0's `get_all` (and `search`) output: `{"results": [{"id", "memory", "user_id", ...}]}`,
  the open-source `Memory` class's and the platform client's paginated form alike.

A file is JSON Lines when its first line is a JSON value of its own (each line is then read,
and a bad one reported, on its own); otherwise it is one JSON document, read whole. Each value
is recognised by its keys (or must be of `--format`). Nothing here calls the API.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from memkit.models.session import Message
from memkit_dev.transfer import format as fmt

Format = Literal["auto", "memkit", "ams", "mem0"]
FORMATS: tuple[Format, ...] = ("auto", "memkit", "ams", "mem0")

# Keys of a message memkit stores: a Message's fields (a message is strict: another key is a 422).
MESSAGE_KEYS = tuple(Message.model_fields)
# An AMS MemoryRecord's fields that memkit keeps: every field a memkit record takes (AMS has
# no metadata; access_count, memory_hash, persisted_at, updated_at and the extraction
# strategy are not kept: docs/cli.md).
AMS_RECORD_KEYS = fmt.RECORD_WRITABLE
# AMS working-memory fields a session keeps.
AMS_SESSION_KEYS = ("data", "context", "tokens", "ttl_seconds", "long_term_memory_strategy")
# Mem0 item keys memkit maps to fields of its own; the others go to metadata["mem0"].
MEM0_MAPPED = ("id", "memory", "user_id", "run_id", "categories", "metadata", "created_at")
MEM0_DROPPED = ("score", "updated_at")


class Unreadable(ValueError):
    """The file cannot be imported at all (an export version this memkit does not read)."""


@dataclass(frozen=True)
class Entry:
    """A memkit line to import, and where it came from ("line 12", "line 1: results[3]")."""

    where: str
    value: dict[str, Any]
    # The shape it was read from: memkit (a copy, kept as it is), ams or mem0.
    origin: str = "memkit"


@dataclass(frozen=True)
class Problem:
    """A value that cannot be imported: where, and why."""

    where: str
    reason: str
    # Items it held that will not be imported (a line of 100 messages: 100).
    items: int = 1


@dataclass(frozen=True)
class Defaults:
    """What an AMS or Mem0 value that names none gets: the namespace, the user."""

    namespace: str = "default"
    user_id: str | None = None


class Reader:
    """The entries of a file in the format it is in (or must be: `format`)."""

    def __init__(self, format: Format = "auto", defaults: Defaults | None = None) -> None:
        self.format = format
        self.defaults = defaults or Defaults()
        self.header: dict[str, Any] | None = None
        self.ended = False
        # What the file turned out to be (memkit, ams, mem0), as its values were read.
        self.seen: set[str] = set()

    def read(self, stream: Iterable[str]) -> Iterator[Entry | Problem]:
        for where, value in values(stream):
            if isinstance(value, Problem):
                yield value
            else:
                yield from self.entries(where, value)

    def entries(self, where: str, value: Any) -> Iterator[Entry | Problem]:
        if isinstance(value, list):
            for n, item in enumerate(value):
                yield from self.entries(f"{where}: [{n}]", item)
            return
        if not isinstance(value, dict):
            yield Problem(where, "not a JSON object")
            return
        shape = shape_of(value)
        if shape is None:
            yield Problem(where, "not a shape memkit imports (see `memkit import --help`)")
            return
        family = shape.split(":")[0]
        if self.format != "auto" and family != self.format:
            yield Problem(where, f"{shape_names[shape]}, not --format {self.format}")
            return
        self.seen.add(family)
        readers = {
            "memkit": self._memkit,
            "ams:session": self._ams_session,
            "ams:record": self._ams_record,
            "ams:records": self._ams_records,
            "mem0:results": self._mem0_results,
            "mem0:memory": self._mem0_memory,
        }
        yield from readers[shape](where, value)

    # -- memkit ------------------------------------------------------------------------------

    def _memkit(self, where: str, value: dict[str, Any]) -> Iterator[Entry | Problem]:
        kind = value.get("kind")
        if kind == fmt.HEADER:
            if value.get("version") != fmt.VERSION:
                raise Unreadable(
                    f"{where}: export version {value.get('version')!r}; this memkit reads "
                    f"version {fmt.VERSION}"
                )
            self.header = value
            return
        if self.header is None:
            yield Problem(where, "a memkit line before the memkit-export header line")
            return
        if kind == fmt.END:
            self.ended = True
            return
        if kind not in fmt.KINDS:
            yield Problem(where, f"unknown kind {kind!r}")
            return
        missing = [key for key in REQUIRED[kind] if not value.get(key)]
        if missing:
            items = len(value.get("messages") or []) or 1
            yield Problem(where, f"a {kind} line without {', '.join(missing)}", items)
            return
        if kind == fmt.MESSAGES and not isinstance(value["messages"], list):
            yield Problem(where, "messages must be a list")
            return
        yield Entry(where, value)

    # -- the Agent Memory Server -------------------------------------------------------------

    def _ams_session(self, where: str, value: dict[str, Any]) -> Iterator[Entry | Problem]:
        session_id = value.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            yield Problem(where, "a working memory without session_id")
            return
        namespace = value.get("namespace") or self.defaults.namespace
        user_id = value.get("user_id") or self.defaults.user_id
        session = {key: value[key] for key in AMS_SESSION_KEYS if value.get(key) is not None}
        memories = value.get("memories") or []
        if not isinstance(memories, list):
            yield Problem(where, "memories must be a list")
            return
        session["memories"] = [
            {k: v for k, v in m.items() if k in (*AMS_RECORD_KEYS, "memory_hash", "persisted_at")}
            for m in memories
            if isinstance(m, dict)
        ]
        yield Entry(
            where,
            {
                "kind": fmt.SESSION,
                "session_id": session_id,
                "namespace": namespace,
                "user_id": user_id,
                **session,
            },
            "ams",
        )
        messages = value.get("messages") or []
        if not isinstance(messages, list):
            yield Problem(where, "messages must be a list")
            return
        kept = []
        for n, message in enumerate(messages):
            if not isinstance(message, dict):
                yield Problem(f"{where}: messages[{n}]", "not a JSON object")
                continue
            body = {k: v for k, v in message.items() if k in MESSAGE_KEYS and v is not None}
            body.setdefault("id", stable_id("message", session_id, str(n), json.dumps(body)))
            kept.append(body)
        for start in range(0, len(kept), fmt.CHUNK):
            yield Entry(
                where,
                {
                    "kind": fmt.MESSAGES,
                    "session_id": session_id,
                    "namespace": namespace,
                    "user_id": user_id,
                    "messages": kept[start : start + fmt.CHUNK],
                },
                "ams",
            )

    def _ams_record(self, where: str, value: dict[str, Any]) -> Iterator[Entry | Problem]:
        record = {k: v for k, v in value.items() if k in AMS_RECORD_KEYS and v is not None}
        record.setdefault("namespace", self.defaults.namespace)
        if self.defaults.user_id:
            record.setdefault("user_id", self.defaults.user_id)
        yield Entry(where, {"kind": fmt.MEMORY, **record}, "ams")

    def _ams_records(self, where: str, value: dict[str, Any]) -> Iterator[Entry | Problem]:
        for n, item in enumerate(value["memories"]):
            yield from self.entries(f"{where}: memories[{n}]", item)

    # -- Mem0 --------------------------------------------------------------------------------

    def _mem0_results(self, where: str, value: dict[str, Any]) -> Iterator[Entry | Problem]:
        for n, item in enumerate(value["results"]):
            yield from self.entries(f"{where}: results[{n}]", item)

    def _mem0_memory(self, where: str, value: dict[str, Any]) -> Iterator[Entry | Problem]:
        metadata = dict(value.get("metadata") or {})
        extra = {
            k: v
            for k, v in value.items()
            if k not in (*MEM0_MAPPED, *MEM0_DROPPED) and v is not None
        }
        if extra:
            metadata["mem0"] = extra
        record: dict[str, Any] = {
            "id": value["id"],
            "text": value["memory"],
            "memory_type": "semantic",
            "namespace": self.defaults.namespace,
            "user_id": value.get("user_id") or self.defaults.user_id,
            "session_id": value.get("run_id"),
            "topics": value.get("categories"),
            "created_at": value.get("created_at"),
            "metadata": metadata or None,
        }
        yield Entry(where, {"kind": fmt.MEMORY, **{k: v for k, v in record.items() if v}}, "mem0")


REQUIRED: dict[str, tuple[str, ...]] = {
    fmt.PROFILE: ("namespace", "name", "spec"),
    fmt.SESSION: ("session_id", "namespace"),
    fmt.MESSAGES: ("session_id", "namespace", "messages"),
    fmt.SCRATCHPAD: ("namespace", "profile"),
    fmt.MEMORY: ("id", "text"),
}

shape_names = {
    "memkit": "a memkit export line",
    "ams:session": "an Agent Memory Server working memory",
    "ams:record": "an Agent Memory Server memory record",
    "ams:records": "an Agent Memory Server search answer",
    "mem0:results": "Mem0's get_all output",
    "mem0:memory": "a Mem0 memory",
}


def shape_of(value: dict[str, Any]) -> str | None:
    """Which shape a JSON object is, by its keys."""
    if isinstance(value.get("kind"), str):
        return "memkit"
    if isinstance(value.get("results"), list):
        return "mem0:results"
    if isinstance(value.get("session_id"), str) and (
        isinstance(value.get("messages"), list) or isinstance(value.get("memories"), list)
    ):
        return "ams:session"
    if isinstance(value.get("memories"), list):
        return "ams:records"
    if isinstance(value.get("id"), str) and isinstance(value.get("memory"), str):
        return "mem0:memory"
    if isinstance(value.get("id"), str) and isinstance(value.get("text"), str):
        return "ams:record"
    return None


class NotText(str):
    """A line that is not UTF-8 (its text with replacement characters): reported, not read."""


def decoded(raw_lines: Iterable[bytes]) -> Iterator[str]:
    """Lines of a file read as bytes, each decoded as UTF-8 (NotText when it is not)."""
    for raw in raw_lines:
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            yield NotText(raw.decode("utf-8", errors="replace"))


def values(stream: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """(where, value) of each JSON value of the file: of each line when it is JSON Lines, of
    the whole file otherwise; a line or file that is not JSON is a Problem in place."""
    lines = iter(stream)
    first, number = "", 0
    for first in lines:
        number += 1
        if first.strip():
            break
    else:
        return
    try:
        if isinstance(first, NotText):
            raise json.JSONDecodeError("not UTF-8", first, 0)
        value = json.loads(first)
    except json.JSONDecodeError:
        document = first + "".join(lines)
        try:
            yield f"line {number}", json.loads(document)
        except json.JSONDecodeError as error:
            where = f"line {number + error.lineno - 1}"
            yield where, Problem(where, f"neither JSON Lines nor a JSON document: {error.msg}")
        return
    yield f"line {number}", value
    yield from _lines(lines, number)


def _lines(lines: Iterable[str], number: int) -> Iterator[tuple[str, Any]]:
    for text in lines:
        number += 1
        if not text.strip():
            continue
        where = f"line {number}"
        if isinstance(text, NotText):
            yield where, Problem(where, "not UTF-8")
            continue
        try:
            yield where, json.loads(text)
        except json.JSONDecodeError as error:
            yield where, Problem(where, f"not JSON ({error.msg}, column {error.colno})")


def stable_id(*parts: str) -> str:
    """An id for an item that came without one, the same on every import of the file (so a
    second import finds it stored)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return f"imp-{digest[:32]}"
