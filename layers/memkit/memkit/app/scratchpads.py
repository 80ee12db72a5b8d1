"""A caller's scratchpads (a session's or a user's), the profiles that govern them in a
namespace, and the scratchpad tools a model calls, each in the caller's scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memkit.app.access import owner_for
from memkit.errors import FieldProblem, ValidationFailed
from memkit.identity import Caller
from memkit.models.domain import Content, PadRef, Profile, ProfileSpec
from memkit.scratchpad.tools import ToolFormat
from memkit.service.scratchpad import ScratchpadResult
from memkit.store.protocol import ProfilePage

if TYPE_CHECKING:
    from memkit.app.services import Services


@dataclass(frozen=True)
class PadName:
    """A scratchpad as a request names it (unverified: `pad_ref` confines it to the caller):
    a session's (`session_id`), else a user's; the namespace; a profile to use."""

    session_id: str | None = None
    user_id: str | None = None
    namespace: str | None = None
    profile: str | None = None


def pad_ref(caller: Caller, named: PadName) -> PadRef:
    """The scratchpad `caller` may reach by that name (its own user's unless an admin)."""
    owner = owner_for(caller, named.namespace, named.user_id)
    return PadRef(owner=owner, session_id=named.session_id, profile=named.profile)


class Scratchpads:
    """Scratchpad reads and writes as `caller` may run them."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def get(self, caller: Caller, named: PadName) -> ScratchpadResult:
        return self._services.scratchpads.get(pad_ref(caller, named))

    def prompt(self, caller: Caller, named: PadName) -> str:
        """The scratchpad as a system-prompt block (its <working_memory>)."""
        return self._services.scratchpads.prompt(pad_ref(caller, named))

    def replace(
        self, caller: Caller, named: PadName, content: Content, if_match: str | None
    ) -> ScratchpadResult:
        return self._services.scratchpads.replace(pad_ref(caller, named), content, if_match)

    def patch(
        self, caller: Caller, named: PadName, content: Content, if_match: str | None
    ) -> ScratchpadResult:
        return self._services.scratchpads.patch(pad_ref(caller, named), content, if_match)

    def clear(self, caller: Caller, named: PadName, if_match: str | None) -> ScratchpadResult:
        return self._services.scratchpads.clear(pad_ref(caller, named), if_match)

    def tool_definitions(
        self, caller: Caller, named: PadName, tool_format: ToolFormat
    ) -> list[dict[str, Any]]:
        return self._services.tools.definitions(pad_ref(caller, named), tool_format)

    def call_tool(
        self,
        caller: Caller,
        named: PadName,
        name: str,
        arguments: Any,
        about: str = "the tool acts on",
    ) -> dict[str, Any]:
        """A tool call a model made, on the scratchpad of a session or of a user (`about`:
        what the refusal of neither says the name is of)."""
        ref = pad_ref(caller, named)
        if ref.session_id is None and ref.owner.user_id is None:
            raise ValidationFailed(
                "session_id or user_id is required",
                [FieldProblem("session_id", f"name the session (or the user) {about}")],
            )
        return self._services.tools.call(ref, name, arguments)


class Profiles:
    """A namespace's profiles, in the caller's tenant."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def put(
        self,
        caller: Caller,
        name: str,
        spec: ProfileSpec,
        if_match: str | None,
        namespace: str | None = None,
    ) -> Profile:
        owner = owner_for(caller, namespace, None)
        return self._services.profiles.put(owner.tenant, owner.namespace, name, spec, if_match)

    def get(self, caller: Caller, name: str, namespace: str | None = None) -> Profile:
        owner = owner_for(caller, namespace, None)
        return self._services.profiles.get(owner.tenant, owner.namespace, name)

    def list(
        self, caller: Caller, limit: int, cursor: str | None, namespace: str | None = None
    ) -> ProfilePage:
        owner = owner_for(caller, namespace, None)
        return self._services.profiles.list(owner.tenant, owner.namespace, limit, cursor)

    def delete(
        self, caller: Caller, name: str, if_match: str | None, namespace: str | None = None
    ) -> None:
        owner = owner_for(caller, namespace, None)
        self._services.profiles.delete(owner.tenant, owner.namespace, name, if_match)
