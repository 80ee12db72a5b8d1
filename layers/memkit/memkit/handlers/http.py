"""What the HTTP API's functions (api, mcp) do after every invocation."""

from __future__ import annotations

import gc
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from memkit.errors import MemkitError
from memkit.identity import IdentitySettings
from memkit.times import Deadline, invocation_deadline, within

WARNING_HEADER = "x-memkit-warning"
UNAUTHENTICATED_WARNING = "unauthenticated: auth mode none, every caller acts as an admin"
# What a function needs after its last request to the vector index, before its timeout: the
# answer built (a 503 with Retry-After, a job queued for the rest of a deletion) and sent.
ANSWER_MARGIN_SECONDS = 3.0


def answering_in_time(context: LambdaContext) -> AbstractContextManager[Deadline]:
    """The invocation's deadline for the vector index's requests (memkit.times.within): its
    remaining time less ANSWER_MARGIN_SECONDS. A request that would outlast it ends there,
    a 503 with Retry-After the function still has time to send; Lambda's timeout would be
    API Gateway's bare 5xx."""
    remaining = context.get_remaining_time_in_millis()
    return within(invocation_deadline(remaining, ANSWER_MARGIN_SECONDS))


def end_of_cold_start() -> None:
    """Resume cyclic GC (paused by the entry module), the startup heap frozen out of its way."""
    gc.freeze()
    gc.enable()


def after_invocation() -> None:
    """End the cold start's GC pause after the first invocation."""
    if not gc.isenabled():
        end_of_cold_start()


def warned(response: dict[str, Any], identity: Callable[[], IdentitySettings]) -> dict[str, Any]:
    """`response` (payload format 2.0) saying that no credential was checked when the API
    checks none (auth mode none): every answer of the function, whatever route or refusal
    made it, public routes included, so no client of an open API mistakes it for a verified
    one. Settings that cannot be read name no mode: the response (a 500 saying so, or the
    health check) is left as it is."""
    try:
        mode = identity().auth_mode
    except MemkitError:
        return response
    if mode != "none":
        return response
    headers = {**(response.get("headers") or {}), WARNING_HEADER: UNAUTHENTICATED_WARNING}
    return {**response, "headers": headers}
