"""Merge rules of API.md, as pure functions.

- json: objects deep-merge, `null` deletes a key, arrays follow `array_merge`
  (`union` = concatenation without duplicates, `replace`), anything else replaces.
- markdown and text: a patch is appended after a separator.
- Keys `__proto__`, `constructor` and `prototype` are dropped at every depth, so content
  handed to JavaScript agents can never pollute an object prototype.
"""

from __future__ import annotations

import json
from typing import Any

from memkit.models.domain import ArrayMerge, Content, JsonObject, PadFormat

FORBIDDEN_KEYS = frozenset({"__proto__", "constructor", "prototype"})
SEPARATORS = {PadFormat.MARKDOWN: "\n\n", PadFormat.TEXT: "\n"}


def sanitize(value: Any) -> Any:
    """`value` with the forbidden keys removed from every object, at every depth."""
    if isinstance(value, dict):
        return {k: sanitize(v) for k, v in value.items() if k not in FORBIDDEN_KEYS}
    if isinstance(value, list):
        return [sanitize(item) for item in value]
    return value


def drop_nulls(value: Any) -> Any:
    """Object members whose value is null removed at every depth (null deletes a key)."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(item) for item in value]
    return value


def _identity(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def union(base: list[Any], extra: list[Any]) -> list[Any]:
    """`base` then the items of `extra` not already present (by JSON value, order kept)."""
    seen = {_identity(item) for item in base}
    merged = list(base)
    for item in extra:
        key = _identity(item)
        if key not in seen:
            seen.add(key)
            merged.append(item)
    return merged


def deep_merge(base: JsonObject, patch: JsonObject, array_merge: ArrayMerge) -> JsonObject:
    """`patch` merged into `base` (neither is modified)."""
    merged = dict(base)
    for key, value in patch.items():
        if key in FORBIDDEN_KEYS:
            continue
        if value is None:
            merged.pop(key, None)
            continue
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = deep_merge(current, value, array_merge)
        elif (
            isinstance(current, list)
            and isinstance(value, list)
            and array_merge is ArrayMerge.UNION
        ):
            merged[key] = union(current, sanitize(drop_nulls(value)))
        else:
            merged[key] = sanitize(drop_nulls(value))
    return merged


def append_text(base: str | None, addition: str, pad_format: PadFormat) -> str:
    """`addition` appended to `base` after the format's separator (none when base is empty)."""
    if not base:
        return addition
    separator = SEPARATORS[pad_format]
    return base.rstrip("\n") + separator + addition.lstrip("\n") if addition else base


def merge_content(
    current: Content, patch: Content, pad_format: PadFormat, array_merge: ArrayMerge
) -> Content:
    """The content after applying `patch` (already type-checked for the format)."""
    if pad_format is PadFormat.JSON:
        assert isinstance(patch, dict)
        base = current if isinstance(current, dict) else {}
        return deep_merge(base, patch, array_merge)
    assert isinstance(patch, str)
    return append_text(current if isinstance(current, str) else None, patch, pad_format)


def replacement_content(content: Content, pad_format: PadFormat) -> Content:
    """Content as stored by a replace: sanitized objects, nulls dropped."""
    if pad_format is PadFormat.JSON and isinstance(content, dict):
        cleaned: JsonObject = sanitize(drop_nulls(content))
        return cleaned
    return content
