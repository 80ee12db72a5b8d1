"""The HTTP API's hooks for a wing: a capability with routes, scopes and an error shape of its
own (memkit.agentcore is one) that the core names nowhere. The composition root
(memkit.handlers.wiring) hands the resolver its wings (memkit.api.app.build_app); a request
whose path a wing owns is routed by the wing's routers, checked against the wing's scopes,
and every failure on it leaves in the wing's shape, including a refusal before routing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.errors import FieldProblem, MemkitError


@dataclass(frozen=True)
class WireError:
    """A failure as a wing's clients read it: status, headers and body."""

    status: int
    headers: dict[str, str]
    body: str

    def as_lambda(self) -> dict[str, Any]:
        """As an HTTP API (payload 2.0) Lambda response."""
        headers = {"Content-Type": "application/json", **self.headers}
        return {
            "statusCode": self.status,
            "headers": headers,
            "body": self.body,
            "isBase64Encoded": False,
        }


# (path, status, code, detail, field problems, Retry-After seconds) -> the wing's error.
ErrorShape = Callable[[str, int, str, str, list[FieldProblem] | None, int | None], WireError]


def _as_is(event: dict[str, Any]) -> dict[str, Any]:
    return event


@dataclass(frozen=True)
class Wing:
    """What a wing adds to the HTTP API.

    `routers`: its routes; `scopes`: the scope each needs, by route key, as the core's table
    (memkit.api.scopes); `owns`: whether a request path is the wing's; `error`: its error
    shape; `routable`: the event as the resolver can route it (a wing's paths may carry
    characters its route patterns cannot match)."""

    name: str
    routers: Sequence[APIGatewayHttpRouter]
    scopes: Mapping[str, str | None]
    owns: Callable[[str], bool]
    error: ErrorShape
    routable: Callable[[dict[str, Any]], dict[str, Any]] = field(default=_as_is)


def wing_of(wings: Iterable[Wing], path: str | None) -> Wing | None:
    """The wing that owns `path`, if one does."""
    return next((wing for wing in wings if path and wing.owns(path)), None)


def refused(wing: Wing, path: str, error: MemkitError) -> dict[str, Any]:
    """A request refused before routing (an unreadable body, an oversized answer) on a path
    of `wing`'s: its Lambda response in the wing's shape."""
    shaped = wing.error(
        path, error.status, error.code, error.detail, error.errors, error.retry_after
    )
    return shaped.as_lambda()
