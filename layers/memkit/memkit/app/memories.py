"""A caller's long-term memory: records created, read, edited, deleted and searched, and the
prompt hydrated from a session and a search, each within what the caller may reach."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memkit.app.access import confined_memories, confined_prompt, confined_search, writer_of
from memkit.identity import Caller
from memkit.models.memory import (
    Ack,
    CreatedAck,
    CreateMemories,
    MemoryEdit,
    MemoryHistoryView,
    MemoryRecordView,
    MemoryRestoration,
    MemoryResults,
    MemoryRetirement,
    SearchRequest,
)
from memkit.models.prompt import HydratedPrompt, PromptRequest

if TYPE_CHECKING:
    from memkit.app.services import Services


class Memories:
    """Long-term records as `caller` may reach them: its tenant's, and unless an admin only
    its own user's."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def create(self, caller: Caller, body: CreateMemories) -> CreatedAck:
        confined = confined_memories(caller, body)
        return self._services.long_term.create(
            caller.tenant, confined, confined=not caller.admin, writer=writer_of(caller)
        )

    def search(
        self, caller: Caller, body: SearchRequest, *, access: bool | None = None
    ) -> MemoryResults:
        """A search within the caller's reach; `access` (default: the request's
        track_access) marks the hits as read."""
        request = confined_search(caller, body)
        tracked = request.track_access if access is None else access
        return self._services.long_term.search(caller.tenant, request, access=tracked)

    def get(self, caller: Caller, record_id: str) -> MemoryRecordView:
        return self._services.long_term.get(caller.tenant, record_id, reader=caller)

    def edit(
        self, caller: Caller, record_id: str, edit: MemoryEdit, *, claim_user: bool = False
    ) -> MemoryRecordView:
        """`edit` of a record the caller may reach. With `claim_user` an edit that names a
        user claims it first: the caller must be able to act for that user (the MCP tool's
        rule), else OutOfScope; without, the record's own check answers (never moves)."""
        if claim_user and edit.user_id is not None:
            caller.acting_for(edit.user_id)
        return self._services.long_term.edit(
            caller.tenant, record_id, edit, reader=caller, writer=writer_of(caller)
        )

    def delete(self, caller: Caller, record_ids: Sequence[str], *, erase: bool = False) -> Ack:
        """The caller's records deleted (their history kept, or with `erase` gone too)."""
        return self._services.long_term.delete(
            caller.tenant, list(record_ids), reader=caller, writer=writer_of(caller), erase=erase
        )

    def retire(
        self, caller: Caller, record_id: str, retirement: MemoryRetirement
    ) -> MemoryRecordView:
        """A record of the caller's no longer current (kept in its history)."""
        return self._services.long_term.retire(
            caller.tenant, record_id, retirement, reader=caller, writer=writer_of(caller)
        )

    def history(
        self, caller: Caller, record_id: str, *, limit: int = 50, before: int | None = None
    ) -> MemoryHistoryView:
        """The versions of a record the caller may reach (also after its delete)."""
        return self._services.long_term.history(
            caller.tenant, record_id, reader=caller, limit=limit, before=before
        )

    def restore(
        self, caller: Caller, record_id: str, restoration: MemoryRestoration
    ) -> MemoryRecordView:
        """An earlier version of a record of the caller's made current again."""
        return self._services.long_term.restore(
            caller.tenant, record_id, restoration, reader=caller, writer=writer_of(caller)
        )

    def prompt(self, caller: Caller, body: PromptRequest) -> HydratedPrompt:
        """A prompt hydrated from the session's document and long-term memory, its search
        confined as a search is."""
        owner, confined = confined_prompt(caller, body)
        return self._services.prompts.hydrate(owner, confined)
