"""What a request body must be before anything parses it: JSON, UTF-8, bounded.

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

from memkit.errors import BadRequest, FieldProblem, MemkitError, UnsupportedMediaType

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
