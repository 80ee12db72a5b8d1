"""Opaque pagination cursors: DynamoDB's LastEvaluatedKey, encoded, checked on the way back."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from memkit.errors import BadRequest, FieldProblem


def encode_cursor(last_evaluated_key: dict[str, Any] | None) -> str | None:
    if not last_evaluated_key:
        return None
    raw = json.dumps(last_evaluated_key, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(
    cursor: str | None, partition_key: str, attribute: str = "PK"
) -> dict[str, Any] | None:
    """The start key a cursor stands for; 400 for anything not issued for this partition
    (`attribute`: the key attribute naming it, GSI2PK for a listing of that index)."""
    if cursor is None or cursor == "":
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise BadRequest("invalid cursor", [FieldProblem("cursor", "not a cursor")]) from exc
    valid = (
        isinstance(key, dict)
        and all(isinstance(v, dict) and set(v) == {"S"} for v in key.values())
        and key.get(attribute, {}).get("S") == partition_key
    )
    if not valid:
        raise BadRequest("invalid cursor", [FieldProblem("cursor", "not a cursor for this list")])
    return dict(key)
