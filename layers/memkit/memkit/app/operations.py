"""What a verified caller may do, by resource: the one way both front doors (the HTTP API's
routes and the MCP tools) reach memkit's services. Every operation takes the Caller and
confines itself (memkit.app.access); the edges parse, call one operation, shape the answer."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from memkit.app.access import charge
from memkit.app.memories import Memories
from memkit.app.scratchpads import Profiles, Scratchpads
from memkit.app.sessions import Sessions
from memkit.app.upkeep import Upkeep
from memkit.identity import Caller

if TYPE_CHECKING:
    from memkit.app.services import Services


class Operations:
    """A caller's sessions, scratchpads, profiles, long-term memory and upkeep."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def admit(self, caller: Caller) -> None:
        """One request of `caller` against its tenant's quota (429 once it is spent)."""
        charge(self._services, caller)

    @cached_property
    def sessions(self) -> Sessions:
        return Sessions(self._services)

    @cached_property
    def scratchpads(self) -> Scratchpads:
        return Scratchpads(self._services)

    @cached_property
    def profiles(self) -> Profiles:
        return Profiles(self._services)

    @cached_property
    def memories(self) -> Memories:
        return Memories(self._services)

    @cached_property
    def upkeep(self) -> Upkeep:
        return Upkeep(self._services)
