"""One loader for the canonical events under events/, and builders for variants."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

EVENTS = Path(__file__).resolve().parents[1] / "events"


def load_event(name: str) -> dict[str, Any]:
    """A canonical event from events/ (the same JSON `sam local invoke -e` takes)."""
    return json.loads((EVENTS / name).read_text(encoding="utf-8"))


def http_event(
    method: str,
    path: str,
    query: dict[str, Any] | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw_body: str | None = None,
    authorizer: dict[str, Any] | None = None,
    route: str | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event, built from events/api_request.json;
    `authorizer`: what the gateway verified (requestContext.authorizer), e.g. a JWT's claims.

    `path` is what API Gateway sends: decoded (`/v1/long-term-memory/tea☕` for a client's
    `/v1/long-term-memory/tea%E2%98%95`; docs/api.md#ids). `route`: the template's route
    that matched it (`/v1/long-term-memory/{memory_id}`), which gives the event its
    routeKey and pathParameters; None: the $default route, which has neither."""
    event = copy.deepcopy(load_event("api_request.json"))
    event["routeKey"] = event["requestContext"]["routeKey"] = (
        "$default" if route is None else f"{method} {route}"
    )
    parameters = _path_parameters(route, path) if route is not None else {}
    if parameters:
        event["pathParameters"] = parameters
    else:
        event.pop("pathParameters", None)
    event["rawPath"] = path
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["http"]["path"] = path
    pairs = [
        (k, v) for k, vs in (query or {}).items() for v in (vs if isinstance(vs, list) else [vs])
    ]
    event["rawQueryString"] = urlencode(pairs)
    if pairs:
        event["queryStringParameters"] = {
            k: ",".join(str(v) for v in (vs if isinstance(vs, list) else [vs]))
            for k, vs in (query or {}).items()
        }
    else:
        event.pop("queryStringParameters", None)
    event["headers"] = {**event["headers"], **{k.lower(): v for k, v in (headers or {}).items()}}
    if authorizer is not None:
        event["requestContext"]["authorizer"] = authorizer
    if raw_body is not None:
        event["body"] = raw_body
    elif body is not None:
        event["body"] = json.dumps(body)
    else:
        event.pop("body", None)
    return event


def _path_parameters(route: str, path: str) -> dict[str, str]:
    """The values of `route`'s {parameters} in `path`, one segment each."""
    names = route.strip("/").split("/")
    values = path.strip("/").split("/")
    assert len(names) == len(values), f"{path} is not a path of {route}"
    return {n[1:-1]: v for n, v in zip(names, values, strict=True) if n.startswith("{")}


def authorizer_event(authorization: str | None) -> dict[str, Any]:
    """An HTTP API Lambda authorizer event (payload 2.0, identity source
    `$request.header.Authorization`), built from events/authorizer_request.json, with
    `authorization` as the header's value (None: no header, no identity source)."""
    event = copy.deepcopy(load_event("authorizer_request.json"))
    event["headers"].pop("authorization")
    del event["identitySource"]
    if authorization is not None:
        event["headers"]["authorization"] = authorization
        event["identitySource"] = [authorization]
    return event


def jwt_authorizer(tenant: str, user: str, *scopes: str) -> dict[str, Any]:
    """`requestContext.authorizer` as the HTTP API's JWT authorizer passes a verified token's
    claims (the tenant in `custom:tenant`)."""
    claims = {"sub": user, "custom:tenant": tenant, "scope": " ".join(scopes)}
    return {"jwt": {"claims": claims, "scopes": None}}


def sqs_record(message: dict[str, Any]) -> dict[str, Any]:
    """A message received from SQS (ReceiveMessage's shape) as Lambda hands it to a
    function (an SQS event's record)."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {},
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:work",
        "awsRegion": "us-east-1",
    }
