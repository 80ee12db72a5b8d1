"""JSON Schema checks with a real validator (jsonschema), imported on first use only.

The schema's own dialect is honoured (`$schema`); without one, Draft 2020-12. Every keyword
that matches a regular expression (`pattern`, `patternProperties`, the properties
`additionalProperties` leaves out, `format: regex`) runs on RE2 in linear time (patterns.py),
never on Python's backtracking `re`.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from memkit.errors import FieldProblem
from memkit.scratchpad import patterns

if TYPE_CHECKING:
    from jsonschema import FormatChecker, ValidationError
    from jsonschema.protocols import Validator
    from jsonschema.validators import _Validator  # what keyword functions are given

MAX_PROBLEMS = 20


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


def _pattern_problems(schema: dict[str, Any]) -> list[FieldProblem]:
    """Patterns RE2 cannot evaluate, and unevaluatedProperties next to patternProperties
    (jsonschema finds the properties that leaves unevaluated with Python's `re`)."""
    problems: list[FieldProblem] = []
    pattern_properties: list[str] = []
    unevaluated: list[str] = []
    for path, keyword, value in _walk(schema):
        where = _path("schema", [*path, keyword])
        if keyword == "pattern" and isinstance(value, str):
            if reason := patterns.problem(value):
                problems.append(FieldProblem(where, reason))
        elif keyword == "patternProperties" and isinstance(value, dict):
            pattern_properties.append(where)
            problems.extend(
                FieldProblem(where, f"{pattern!r}: {reason}")
                for pattern in value
                if isinstance(pattern, str) and (reason := patterns.problem(pattern))
            )
        elif keyword == "unevaluatedProperties":
            unevaluated.append(where)
    if pattern_properties:
        reason = f"not supported in a schema with patternProperties; {patterns.LINEAR_TIME}"
        problems.extend(FieldProblem(where, reason) for where in unevaluated)
    return problems


def _unsafe_parts(schema: dict[str, Any]) -> list[FieldProblem]:
    """$refs that leave the schema or lead nowhere, and patterns memkit cannot evaluate."""
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
        if keyword != "$ref" or not isinstance(value, str):
            continue
        where = _path("schema", [*path, keyword])
        if not value.startswith("#"):
            problems.append(FieldProblem(where, "only references within the schema (#...)"))
            continue
        try:
            if _loops(resolver, value):
                problems.append(FieldProblem(where, f"{value!r} refers back to itself"))
        except Unresolvable:
            problems.append(FieldProblem(where, f"{value!r} points at nothing"))
    return problems + _pattern_problems(schema)


def _path(prefix: str, parts: Any) -> str:
    return ".".join([prefix, *(str(p) for p in parts)]) if prefix else ".".join(map(str, parts))


# -- jsonschema's keywords that match regular expressions, on RE2 ---------------------------


def _pattern(
    validator: _Validator, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not patterns.search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: _Validator, pattern_properties: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for name, value in instance.items():
            if patterns.search(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: _Validator, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    matched_by = schema.get("patternProperties", {})
    extras = sorted(
        (
            name
            for name in instance
            if name not in declared and not any(patterns.search(p, name) for p in matched_by)
        ),
        key=str,
    )
    if validator.is_type(additional, "object"):
        for name in extras:
            yield from validator.descend(instance[name], additional, path=name)
    elif not additional and extras:
        names = ", ".join(repr(name) for name in extras)
        if matched_by:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(matched_by))
            yield ValidationError(f"{names} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            reason = f"Additional properties are not allowed ({names} {verb} unexpected)"
            yield ValidationError(reason)


_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


def _is_pattern(instance: object) -> bool:
    """`format: regex`: a pattern memkit can evaluate (the dialect `pattern` uses)."""
    return not isinstance(instance, str) or patterns.problem(instance) is None


def _format_checker(cls: type[Validator], regex: bool) -> FormatChecker:
    """The dialect's format checker, with `regex` on RE2 (or left out)."""
    from jsonschema import FormatChecker

    checker = FormatChecker(())
    checker.checkers = {k: v for k, v in cls.FORMAT_CHECKER.checkers.items() if k != "regex"}
    if regex:
        checker.checks("regex")(_is_pattern)
    return checker


@cache
def _linear_time(cls: type[Validator]) -> type[Validator]:
    """The dialect's validator class, with every regular expression evaluated by RE2."""
    from jsonschema import validators

    keywords = {k: f for k, f in _KEYWORDS.items() if k in cls.VALIDATORS}
    linear: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
        cls, keywords, format_checker=_format_checker(cls, regex=True)
    )
    return linear


def _validator_class(schema: dict[str, Any]) -> type[Validator]:
    from jsonschema import validators

    return _linear_time(validators.validator_for(schema, default=validators.Draft202012Validator))


def schema_problems(schema: dict[str, Any]) -> list[FieldProblem]:
    """Problems with the schema itself (an empty list when it is a valid JSON Schema)."""
    from jsonschema import validators

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    # Against the dialect's metaschema, as check_schema does, but with patterns left to
    # _unsafe_parts (RE2 gives the reason) rather than checked by `re` as `format: regex`.
    meta = validators.validator_for(cls.META_SCHEMA, default=cls)
    checker = meta(cls.META_SCHEMA, format_checker=_format_checker(cls, regex=False))
    error = next(checker.iter_errors(schema), None)
    if error is not None:
        return [FieldProblem(_path("schema", error.absolute_path), error.message)]
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
def _validator(schema_key: str) -> Validator | tuple[FieldProblem, ...]:
    """The validator for a schema, or why it cannot be evaluated (a schema stored before its
    patterns were checked)."""
    import json

    schema = json.loads(schema_key)
    problems = _pattern_problems(schema)
    if problems:
        return tuple(problems)
    cls = _validator_class(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def content_problems(
    schema: dict[str, Any], content: Any, prefix: str = "content"
) -> list[FieldProblem]:
    """Where `content` breaks `schema`, each with the field path and the reason."""
    import json

    from referencing.exceptions import Unresolvable

    validator = _validator(json.dumps(schema, sort_keys=True))
    if isinstance(validator, tuple):
        return list(validator[:MAX_PROBLEMS])
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
