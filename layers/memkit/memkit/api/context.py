"""What a route needs besides its parameters: the verified caller, and the services and
operations it runs (memkit.app). The scope a caller acts in is the operations' business: a
route passes the names its request gives, as given."""

from __future__ import annotations

from typing import Any

from memkit.app.operations import Operations
from memkit.app.services import Services
from memkit.errors import FieldProblem, ValidationFailed
from memkit.identity import Caller


def one(field: str, query: str | None, body: str | None) -> str | None:
    """A name a request may give in its query, its body or both (then they must agree).
    Routes check user_id before namespace, so a request where both disagree hears of its
    user_id, as it always did."""
    if query is not None and body is not None and query != body:
        raise ValidationFailed(
            f"{field} differs between query and body",
            [FieldProblem(field, "query and body differ")],
        )
    return query if query is not None else body


def caller_of(router: Any) -> Caller:
    """The verified caller of this request (set by the app's authorize middleware)."""
    caller = router.context.get("caller")
    assert isinstance(caller, Caller), "the authorize middleware sets the caller first"
    return caller


def services_of(router: Any) -> Services:
    """The Services for this request, built on first use (a health check builds none)."""
    factory = router.context.get("services")
    assert callable(factory), "lambda_handler must append a services factory to the context"
    services = factory()
    assert isinstance(services, Services)
    return services


def operations_of(router: Any) -> Operations:
    """What this request's caller may do (memkit.app.operations)."""
    return services_of(router).operations
