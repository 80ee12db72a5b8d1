"""`memkit export`: a user's or a namespace's profiles, sessions (documents and every message),
scratchpads and long-term records as memkit JSONL (transfer/format.py), through the SDK.

It streams: each session is read and written before the next, its messages a page at a time,
records a search page at a time; what it keeps is ids of users (for their scratchpads) and
the profiles' names. Records are read with `track_access: false`, so an export does not count
as a use of them (inactivity-based forgetting reads `last_accessed`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from memkit.client import MemkitClient, NotFoundError, PermissionDeniedError
from memkit.models.memory import MAX_OFFSET, MemoryHit
from memkit.models.session import MessageView, SessionView
from memkit_dev.progress import Progress
from memkit_dev.transfer import format as fmt

PAGE = 100
# What could not be read: sessions and scratchpads named by ids stored before the id rule
# (docs/api.md#ids), which no path can name.
UNADDRESSABLE = "unaddressable"


@dataclass
class Profiles:
    """A namespace's profiles by scope (the built-in default is session-scoped)."""

    session: list[str] = field(default_factory=list)
    user: list[str] = field(default_factory=list)


class Exporter:
    def __init__(self, client: MemkitClient, out: TextIO, progress: Progress | None = None) -> None:
        self._client = client
        self._out = out
        self._progress = progress or Progress("export")
        self.counts: Counter[str] = Counter()

    def _write(self, text: str, kind: str, amount: int = 1) -> None:
        self._out.write(text)
        self.counts[kind] += amount
        self._progress.advance(amount)
        self._progress.show(self.counts)

    def run(self, namespaces: list[str], user_id: str | None) -> Counter[str]:
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        self._out.write(fmt.header(self._client.base_url, namespaces, user_id, now))
        for namespace in namespaces:
            self._namespace(namespace, user_id)
        self._out.write(fmt.end_line(self.counts))
        self._out.flush()
        return self.counts

    def _namespace(self, namespace: str, user_id: str | None) -> None:
        profiles = self._profiles(namespace)
        users: set[str] = {user_id} if user_id else set()
        # (user, profile) of the user-scoped scratchpads met through a session's own choice:
        # its profile may be one the namespace inherits, so not among `profiles.user`.
        user_pads: set[tuple[str, str]] = set()
        for session_id in self._client.iter_sessions(namespace=namespace, user_id=user_id):
            view = self._session(namespace, session_id, profiles)
            if view is None or not view.user_id:
                continue
            users.add(view.user_id)
            if view.profile and view.scratchpad and view.scratchpad.scope == "user":
                user_pads.add((view.user_id, view.scratchpad.profile))
        filters = {"namespace": {"eq": namespace}, "memory_type": {"ne": "message"}}
        if user_id:
            filters["user_id"] = {"eq": user_id}
        for record in records(self._client, filters):
            self._write(fmt.memory_line(record), "memories")
            if record.user_id:
                users.add(record.user_id)
        user_pads.update((user, profile) for user in users for profile in profiles.user)
        for user, profile in sorted(user_pads):
            self._scratchpad(namespace, None, user, profile)

    def _profiles(self, namespace: str) -> Profiles:
        profiles = Profiles()
        default_stored = False
        for view in self._client.iter_profiles(namespace=namespace):
            if view.builtin:
                continue
            default_stored |= view.name == "default"
            self._write(fmt.profile_line(namespace, view), "profiles")
            (profiles.user if view.scope.value == "user" else profiles.session).append(view.name)
        if not default_stored:
            profiles.session.append("default")
        return profiles

    def _session(self, namespace: str, session_id: str, profiles: Profiles) -> SessionView | None:
        """Write the session's lines; its document (None: it is gone meanwhile)."""
        try:
            view = self._client.get_session(session_id, namespace=namespace)
        except NotFoundError:  # deleted or expired since it was listed
            return None
        except ValueError:  # an id stored before the id rule: no path can name it
            self.counts[UNADDRESSABLE] += 1
            return None
        shown = len(view.messages)
        self._write(
            fmt.session_line(view, shown if shown < view.message_count else None), "sessions"
        )
        self._messages(view)
        if view.profile:
            # The session's own profile is the only one its scratchpad path answers for (any
            # other is a 422); a user-scoped one is its user's, written with the users' below.
            if view.scratchpad is not None and view.scratchpad.scope == "session":
                self._scratchpad(namespace, session_id, view.user_id, None)
        else:
            for profile in profiles.session:
                self._scratchpad(namespace, session_id, view.user_id, profile)
        return view

    def _messages(self, view: SessionView) -> None:
        chunk: list[MessageView] = []
        pages = self._client.iter_messages(view.session_id, namespace=view.namespace)
        for message in pages:
            chunk.append(message)
            if len(chunk) == fmt.CHUNK:
                self._messages_line(view, chunk)
                chunk = []
        if chunk:
            self._messages_line(view, chunk)

    def _messages_line(self, view: SessionView, chunk: list[MessageView]) -> None:
        line = fmt.messages_line(view.session_id, view.namespace, view.user_id, chunk)
        self._write(line, "messages", len(chunk))

    def _scratchpad(
        self, namespace: str, session_id: str | None, user_id: str | None, profile: str | None
    ) -> None:
        """Write the scratchpad's line when it holds something; `profile` None: the
        session's own choice."""
        try:
            if session_id is not None:
                pad = self._client.get_scratchpad(session_id, namespace=namespace, profile=profile)
            else:
                pad = self._client.get_scratchpad(
                    user_id=user_id, namespace=namespace, profile=profile
                )
        except (NotFoundError, PermissionDeniedError):  # another user's, or no such pad
            return
        except ValueError:  # a user id stored before the id rule: no path can name it
            self.counts[UNADDRESSABLE] += 1
            return
        if not fmt.empty(pad.content):
            self._write(fmt.scratchpad_line(pad), "scratchpads")


def records(client: MemkitClient, filters: Mapping[str, Any]) -> Iterator[MemoryHit]:
    """Every indexed record matching `filters`, newest first, past the index's 10,000-deep
    window: a listing pages by offset, and when the offset nears the window's end the next
    listing starts at the oldest creation time seen (`created_at lte`), leaving out the
    records of that instant already written."""
    bound: str | None = None
    at_bound: set[str] = set()
    while True:
        # every record, superseded and retired ones too: an export is a copy of the history
        body: dict[str, object] = {
            **filters,
            "track_access": False,
            "current_only": False,
            "limit": PAGE,
        }
        if bound is not None:
            body["created_at"] = {"lte": bound}
        offset, oldest, seen_oldest, fresh = 0, bound, set(at_bound), 0
        while True:
            page = client.search_memories("", **body, offset=offset)
            for hit in page.memories:
                if hit.id in at_bound:
                    continue
                fresh += 1
                if hit.created_at != oldest:
                    oldest, seen_oldest = hit.created_at, set()
                seen_oldest.add(hit.id)
                yield hit
            if page.next_offset is None:
                return
            offset = page.next_offset
            if offset + PAGE > MAX_OFFSET:
                break
        if fresh == 0:
            raise RuntimeError(
                f"more than {MAX_OFFSET} records were created at {bound}: they cannot be listed"
            )
        bound, at_bound = oldest, seen_oldest
