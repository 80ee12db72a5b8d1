"""The API-key authorizer's entry point (functions/authorizer): an HTTP API Lambda REQUEST
authorizer, payload format 2.0, simple responses, identity source
`$request.header.Authorization` (events/authorizer_request.json).

A request that presents a live key (`Authorization: Bearer mk_...`, memkit.service.api_keys)
is allowed with the key's record as the context the API reads from
`requestContext.authorizer.lambda`:

    {"tenant": str, "user_id": str ("" for a key of no user), "scopes": "memory:read ...",
     "key_id": str}

A missing, malformed, unknown, revoked or expired key is denied (`isAuthorized` false: the
gateway answers 403). The gateway caches either answer for the identity source's value
(the whole header) for the authorizer's TTL, across routes, so the authorizer decides only
who the caller is: what a route needs (its scope, its user) is the API's to check.

When the table does not answer, the handler raises: the gateway answers 500 and caches
nothing, so the client's retry is checked afresh. A denial there would be cached, locking
a valid key out for the TTL after the table is back, and would tell the client its key is
refused. Either way nothing is let through.

Logs carry the key id (the key's public prefix) and the reason, never the key or its hash;
the event is never logged (it holds the key), whatever POWERTOOLS_LOGGER_LOG_EVENT says.
Imports are few (Powertools' logger, pydantic settings, botocore): the function's cold
start is the client's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from memkit.errors import StoreUnavailable, Throttled
from memkit.handlers.wiring import production_api_keys
from memkit.observability import drop_disabled_metrics, logger, metrics

if TYPE_CHECKING:
    from memkit.service.api_keys import ApiKeyService

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


class KeyStoreUnavailable(Exception):
    """The key table did not answer: no decision (the gateway answers 500, caches nothing)."""


def authorization_of(event: Any) -> str | None:
    """The Authorization header's value: the identity source API Gateway sends (the value
    its cache is keyed by), else the header itself (an event built without identitySource)."""
    if not isinstance(event, dict):
        return None
    sources = event.get("identitySource")
    if isinstance(sources, list) and sources:
        first = sources[0]
        return first if isinstance(first, str) else None
    headers = event.get("headers")
    if isinstance(headers, dict):
        for name, value in headers.items():
            if isinstance(name, str) and name.lower() == "authorization":
                return value if isinstance(value, str) else None
    return None


def make_lambda_handler(keys: Callable[[], ApiKeyService] = production_api_keys) -> Handler:
    """The Lambda handler over `keys` (production: the table of the environment)."""

    @logger.inject_lambda_context(clear_state=True, log_event=False)
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        service = keys()
        try:
            check = service.check(authorization_of(event))
        except (StoreUnavailable, Throttled) as exc:
            logger.error("api key check failed: the key table did not answer", error=exc.code)
            raise KeyStoreUnavailable("the key table did not answer; retry") from None
        if check.key is None:
            logger.info("api key denied", reason=check.reason, key_id=check.key_id)
            metrics.add_metric(name="ApiKeyDenied", unit="Count", value=1)
            return {"isAuthorized": False}
        try:
            service.record_use(check)
        except (StoreUnavailable, Throttled) as exc:  # bookkeeping: never a reason to deny
            logger.warning("api key last_used not written", key_id=check.key_id, error=exc.code)
        logger.info("api key allowed", key_id=check.key_id, tenant=check.key.tenant)
        return {"isAuthorized": True, "context": check.key.authorizer_context()}

    return lambda_handler


lambda_handler = make_lambda_handler()
