"""JSON Schema checks with a real validator (jsonschema), imported on first use only.

The schema's own dialect is honoured (`$schema`); without one, Draft 2020-12.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from memkit.errors import FieldProblem

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

MAX_PROBLEMS = 20
# A group holding an unbounded quantifier and itself repeated, e.g. (a+)+ or (\w*\s?)*:
# Python's backtracking engine can take exponential time on such patterns (ReDoS).
_QUANTIFIED_GROUP = re.compile(r"\(((?:[^()\\]|\\.)*)\)\s*(?:[*+]|\{\d*,)")
_UNBOUNDED = re.compile(r"(?<!\\)(?:[*+]|\{\d*,\})")


def backtracks(pattern: str) -> bool:
    """True for patterns with a repeated group that holds an unbounded quantifier."""
    return any(_UNBOUNDED.search(inner) for inner in _QUANTIFIED_GROUP.findall(pattern))


def _loops(resolver: Any, ref: str) -> bool:
    """True when following `ref` only ever reaches other bare $refs and comes back."""
    seen: set[str] = set()
    current: str | None = ref
    while current is not None:
        if current in seen:
            return True
        seen.add(current)
        target = resolver.lookup(current).contents
        current = target.get("$ref") if isinstance(target, dict) else None
    return False


def _walk(schema: Any) -> Iterator[tuple[list[str], str, Any]]:
    """(path, keyword, value) for every keyword of every subschema, without recursion."""
    stack: list[tuple[list[str], Any]] = [([], schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                yield path, key, value
                stack.append(([*path, str(key)], value))
        elif isinstance(node, list):
            stack.extend(([*path, str(i)], item) for i, item in enumerate(node))


def _unsafe_parts(schema: dict[str, Any]) -> list[FieldProblem]:
    """$refs that leave the schema or lead nowhere, and patterns that can backtrack forever."""
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012, specification_with

    # A registry holding only this schema: nothing is ever fetched.
    specification = specification_with(schema.get("$schema", ""), default=DRAFT202012)
    resource = specification.create_resource(schema)
    base = resource.id() or "urn:memkit:profile-schema"
    resolver = Registry().with_resource(base, resource).resolver(base_uri=base)
    problems: list[FieldProblem] = []
    for path, keyword, value in _walk(schema):
        where = _path("schema", [*path, keyword])
        if keyword == "$ref" and isinstance(value, str):
            if not value.startswith("#"):
                problems.append(FieldProblem(where, "only references within the schema (#...)"))
                continue
            try:
                if _loops(resolver, value):
                    problems.append(FieldProblem(where, f"{value!r} refers back to itself"))
            except Unresolvable:
                problems.append(FieldProblem(where, f"{value!r} points at nothing"))
        patterns = [value] if keyword == "pattern" else []
        if keyword == "patternProperties" and isinstance(value, dict):
            patterns = list(value)
        problems.extend(
            FieldProblem(where, "nested quantifiers can backtrack for ever; simplify the pattern")
            for pattern in patterns
            if isinstance(pattern, str) and backtracks(pattern)
        )
    return problems


def _path(prefix: str, parts: Any) -> str:
    return ".".join([prefix, *(str(p) for p in parts)]) if prefix else ".".join(map(str, parts))


def schema_problems(schema: dict[str, Any]) -> list[FieldProblem]:
    """Problems with the schema itself (an empty list when it is a valid JSON Schema)."""
    from jsonschema import exceptions, validators

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except exceptions.SchemaError as exc:
        where = _path("schema", exc.absolute_path)
        return [FieldProblem(where, exc.message)]
    unsafe = _unsafe_parts(schema)
    if unsafe:
        return unsafe
    declared = schema.get("type")
    if (
        declared is not None
        and declared != "object"
        and not (isinstance(declared, list) and "object" in declared)
    ):
        return [FieldProblem("schema.type", "a scratchpad schema must describe an object")]
    return []


@lru_cache(maxsize=256)
def _validator(schema_key: str) -> Validator:
    import json

    from jsonschema import validators

    schema = json.loads(schema_key)
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def content_problems(
    schema: dict[str, Any], content: Any, prefix: str = "content"
) -> list[FieldProblem]:
    """Where `content` breaks `schema`, each with the field path and the reason."""
    import json

    from referencing.exceptions import Unresolvable

    validator = _validator(json.dumps(schema, sort_keys=True))
    try:
        errors = sorted(
            validator.iter_errors(content), key=lambda e: list(map(str, e.absolute_path))
        )
    except (RecursionError, Unresolvable):
        # Profiles stored before their $refs were checked, or refs that loop: report, never crash.
        return [FieldProblem("schema", "cannot be evaluated: its $refs loop or lead nowhere")]
    problems: list[FieldProblem] = []
    for error in errors:
        parts = list(error.absolute_path)
        required = error.validator_value
        if (
            error.validator == "required"
            and isinstance(error.instance, dict)
            and isinstance(required, list)
        ):
            # Name the missing member itself, not the object that lacks it.
            for name in required:
                problem = FieldProblem(_path(prefix, [*parts, name]), "is required")
                if name not in error.instance and problem not in problems:
                    problems.append(problem)
        else:
            problems.append(FieldProblem(_path(prefix, parts), error.message))
    return problems[:MAX_PROBLEMS]
