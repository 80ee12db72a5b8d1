"""A caller's sessions: the working-memory document (AMS), appends and the message log, each
in the scope the caller may act in (memkit.app.access)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memkit.app.access import owner_for
from memkit.identity import Caller
from memkit.models.session import AppendMessages, SessionPatch, SessionWrite
from memkit.service.sessions import AppendResult, MessagesPage, SessionDocument

if TYPE_CHECKING:
    from memkit.app.services import Services


class Sessions:
    """Session operations as `caller` may run them: in the namespace it names, for the user
    it may act for (its own unless an admin)."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def list(
        self,
        caller: Caller,
        limit: int,
        offset: int,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
    ) -> tuple[list[str], int]:
        """Session ids, newest first, and how many there are. A caller that is not an admin
        lists its own user's sessions only."""
        owner = owner_for(caller, namespace, user_id)
        return self._services.sessions.list_ids(owner, owner.user_id, limit, offset)

    def get(
        self,
        caller: Caller,
        session_id: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        recent_messages_limit: int | None = None,
        model_name: str | None = None,
        context_window_max: int | None = None,
    ) -> SessionDocument:
        owner = owner_for(caller, namespace, user_id)
        return self._services.sessions.get(
            owner, session_id, recent_messages_limit, model_name, context_window_max
        )

    def put(
        self,
        caller: Caller,
        session_id: str,
        body: SessionWrite,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        if_match: str | None = None,
        model_name: str | None = None,
        context_window_max: int | None = None,
    ) -> SessionDocument:
        owner = owner_for(caller, namespace, user_id)
        return self._services.sessions.put(
            owner, session_id, body, if_match, model_name, context_window_max
        )

    def patch(
        self,
        caller: Caller,
        session_id: str,
        body: SessionPatch,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        if_match: str | None = None,
    ) -> SessionDocument:
        owner = owner_for(caller, namespace, user_id)
        return self._services.sessions.patch(owner, session_id, body, if_match)

    def delete(
        self,
        caller: Caller,
        session_id: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
    ) -> int:
        return self._services.sessions.delete(owner_for(caller, namespace, user_id), session_id)

    def append(
        self,
        caller: Caller,
        session_id: str,
        body: AppendMessages,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        model_name: str | None = None,
        context_window_max: int | None = None,
    ) -> AppendResult:
        owner = owner_for(caller, namespace, user_id)
        return self._services.sessions.append(
            owner, session_id, body, model_name, context_window_max
        )

    def messages(
        self,
        caller: Caller,
        session_id: str,
        limit: int,
        cursor: str | None,
        ascending: bool,
        roles: frozenset[str] | None,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
    ) -> MessagesPage:
        owner = owner_for(caller, namespace, user_id)
        return self._services.sessions.messages(owner, session_id, limit, cursor, ascending, roles)
