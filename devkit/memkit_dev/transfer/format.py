"""memkit's export format (docs/cli.md): JSON Lines, one object a line, each with a `kind`.

    {"kind": "memkit-export", "version": 1, ...}      the header, first
    {"kind": "profile", "namespace", "name", "spec"}   a stored scratchpad profile
    {"kind": "session", "session_id", ...}             a session's document, without messages
    {"kind": "messages", "session_id", ..., "messages": [...]}   up to 100 of its messages
    {"kind": "scratchpad", "session_id" or null, "user_id", "profile", "content", ...}
    {"kind": "memory", "id", "text", ...}              a long-term record
    {"kind": "end", "counts": {...}}                   the last line: the file is whole

A session's `messages` lines follow its `session` line, oldest first. Every line is written
from the API's own models (memkit.models), so a field the API shows is a field the file keeps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memkit.models.api import ProfileView, ScratchpadView
from memkit.models.memory import MemoryRecordIn, MemoryRecordView
from memkit.models.session import MessageView, SessionView

HEADER = "memkit-export"
VERSION = 1
PROFILE, SESSION, MESSAGES, SCRATCHPAD, MEMORY, END = (
    "profile",
    "session",
    "messages",
    "scratchpad",
    "memory",
    "end",
)
KINDS = (PROFILE, SESSION, MESSAGES, SCRATCHPAD, MEMORY, END)
# Messages a `messages` line holds (and an append sends: the SDK's batch).
CHUNK = 100

# What a session line leaves out of the document: its messages (their own lines), its
# scratchpad (a line of its own) and what a GET computes for the caller.
SESSION_ANSWER_ONLY = (
    "messages",
    "scratchpad",
    "context_percentage_total_used",
    "context_percentage_until_summarization",
    "new_session",
    "reconstructed",
)
# What a memory line leaves out of a record: whether it was searchable when read.
RECORD_ANSWER_ONLY = ("indexing",)
# A search hit's additions to its record.
HIT_ONLY = ("dist", "score", "score_type", "role", "surrounding_messages")
# What a record takes when created: MemoryRecordIn's fields (the times the server sets,
# updated_at and persisted_at, are not among them, and memory_hash is computed from the text
# and the user).
RECORD_WRITABLE = tuple(MemoryRecordIn.model_fields)
PROFILE_SPEC = ("scope", "format", "template", "schema", "array_merge", "read_only")
PROFILE_LIMITS = ("max_tokens", "max_messages")


def line(kind: str, **fields: Any) -> str:
    """One line of the file (compact, UTF-8 as it is, a newline at the end)."""
    return json.dumps({"kind": kind, **fields}, ensure_ascii=False, separators=(",", ":")) + "\n"


def header(source: str, namespaces: list[str], user_id: str | None, exported_at: str) -> str:
    from memkit import __version__

    return line(
        HEADER,
        version=VERSION,
        exported_at=exported_at,
        source=source,
        namespaces=namespaces,
        user_id=user_id,
        memkit=__version__,
    )


def profile_spec(view: ProfileView) -> dict[str, Any]:
    """What PUT /v1/profiles/{name} takes, from what GET shows."""
    shown = view.model_dump(mode="json", by_alias=True)
    return {name: shown[name] for name in (*PROFILE_SPEC, *PROFILE_LIMITS)}


def profile_line(namespace: str, view: ProfileView) -> str:
    return line(PROFILE, namespace=namespace, name=view.name, spec=profile_spec(view))


def session_line(view: SessionView, document_messages: int | None) -> str:
    """The document without its messages; `document_messages`: how many of the newest
    messages the document shows when that is fewer than the log holds (None: all)."""
    document = view.model_dump(mode="json", exclude=set(SESSION_ANSWER_ONLY))
    return line(SESSION, **document, document_messages=document_messages)


def messages_line(
    session_id: str, namespace: str, user_id: str | None, messages: list[MessageView]
) -> str:
    return line(
        MESSAGES,
        session_id=session_id,
        namespace=namespace,
        user_id=user_id,
        messages=[m.model_dump(mode="json", exclude_none=True) for m in messages],
    )


def scratchpad_line(view: ScratchpadView) -> str:
    return line(
        SCRATCHPAD,
        namespace=view.namespace,
        session_id=view.session_id,
        user_id=view.user_id,
        profile=view.profile,
        scope=view.scope.value,
        format=view.format.value,
        content=view.content,
        updated_at=view.updated_at,
    )


def record_fields(record: MemoryRecordView) -> dict[str, Any]:
    return record.model_dump(mode="json", exclude={*RECORD_ANSWER_ONLY, *HIT_ONLY})


def memory_line(record: MemoryRecordView) -> str:
    return line(MEMORY, **record_fields(record))


def end_line(counts: Mapping[str, int]) -> str:
    return line(END, counts=dict(counts))


def empty(content: Any) -> bool:
    """A scratchpad with nothing in it (never written, or cleared)."""
    return content is None or content == "" or content == {}
