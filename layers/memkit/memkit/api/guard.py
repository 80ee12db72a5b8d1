"""What a request body must be before anything parses it: JSON, UTF-8, bounded; and what a
response must be to be returned at all: within Lambda's 6 MB.

Powertools parses the body inside its validation middleware, where a body it cannot read
(another media type, bytes that are not UTF-8, nesting deep enough to exhaust recursion, an
integer of 5,000 digits) would surface as a 500. The handler runs this first and answers such
requests with the one error body.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from memkit.errors import BadRequest, FieldProblem, MemkitError, TooLarge, UnsupportedMediaType
from memkit.models.budget import LAMBDA_RESPONSE_LIMIT

# Deep enough for any scratchpad or schema a person writes; far below the depths where
# json, pydantic (255) or jsonschema run out of recursion.
MAX_DEPTH = 64


def _header(event: dict[str, Any], name: str) -> str:
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name:
            return str(value)
    return ""


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("numbers must be finite")
    return value


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _deepest(value: Any) -> int:
    """Nesting depth, walked without recursion; strings must be encodable (no lone surrogates)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            for key, child in node.items():
                key.encode("utf-8")
                stack.append((child, depth + 1))
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
        elif isinstance(node, str):
            node.encode("utf-8")
    return deepest


def _bad(reason: str) -> BadRequest:
    return BadRequest(f"the body is not acceptable: {reason}", [FieldProblem("body", reason)])


def body_problem(event: dict[str, Any]) -> MemkitError | None:
    """Why the event's body cannot be read as memkit's JSON, or None when it can."""
    body = event.get("body")
    if not body:
        return None
    content_type = _header(event, "content-type")
    if not _is_json(content_type):
        return UnsupportedMediaType(
            "send the body as application/json",
            [FieldProblem("content-type", f"unsupported: {content_type or '(none)'}")],
        )
    try:
        raw = base64.b64decode(body, validate=True) if event.get("isBase64Encoded") else None
        text = raw.decode("utf-8") if raw is not None else body
    except (binascii.Error, UnicodeDecodeError):
        return _bad("not UTF-8 text")
    try:
        parsed = json.loads(text, parse_float=_finite, parse_constant=_reject_constant)
    except RecursionError:
        return _bad(f"nested deeper than {MAX_DEPTH} levels")
    except ValueError as exc:  # malformed JSON, non-finite numbers, integers past 4,300 digits
        reason = "not valid JSON" if isinstance(exc, json.JSONDecodeError) else str(exc)
        return _bad(reason)
    try:
        depth = _deepest(parsed)
    except UnicodeEncodeError:
        return _bad("a string holds a lone surrogate (\\ud800-\\udfff)")
    if depth > MAX_DEPTH:
        return _bad(f"nested deeper than {MAX_DEPTH} levels")
    return None


def response_size(response: dict[str, Any]) -> int:
    """The bytes of the Lambda response as the runtime writes it (memkit.models.budget):
    measured only when the body could be near the limit (4 bytes a character at most)."""
    body = str(response.get("body") or "")
    if 4 * len(body) + 64 * 1024 < LAMBDA_RESPONSE_LIMIT:
        return 4 * len(body)
    return len(json.dumps(response, ensure_ascii=False).encode())


def too_large_to_return(response: dict[str, Any]) -> TooLarge | None:
    """Why `response` cannot be returned (Lambda would fail it, a 5xx at the gateway), or
    None. Lists stop at a byte budget before this; what still outgrows the limit (a
    session's document with a megabyte of memories, a prompt of a huge token budget) is
    refused, naming what to ask for less of."""
    if response_size(response) <= LAMBDA_RESPONSE_LIMIT:
        return None
    return TooLarge(
        "the answer would outgrow the 6 MB a response may hold",
        [FieldProblem("limit", "ask for less: a smaller limit, recent_messages_limit or budget")],
    )
