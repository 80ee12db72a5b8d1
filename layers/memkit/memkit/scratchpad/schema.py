"""JSON Schema checks with a real validator (jsonschema), imported on first use only.

The schema's own dialect is honoured (`$schema`); without one, Draft 2020-12. Every keyword
that matches a regular expression (`pattern`, `patternProperties`, the properties
`additionalProperties` leaves out, `format: regex`) runs on RE2 in linear time (patterns.py),
never on Python's backtracking `re`.

$refs are bounded too: a $ref costs what it points at each time it is applied, so
definitions that each refer to the next one twice make a small schema exponentially large
work. A schema is refused when, with each $ref replaced by what it points at, it would hold
more than MAX_EXPANDED_VALUES JSON values; a $ref back into its own recursion counts once,
as recursion goes only as deep as the content does. That bounds the schemas applied at any
one place of the content, and what a model provider or MCP client that inlines the tool
definitions' $refs must hold. A content check also stops after MAX_CHECK_STEPS keyword
evaluations: that covers profiles stored before the count, and recursion that multiplies
at each level of the content (two `allOf` branches that both descend into the same
property), which no count of the schema alone sees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from memkit.errors import FieldProblem
from memkit.scratchpad import patterns

if TYPE_CHECKING:
    from jsonschema import FormatChecker, ValidationError
    from jsonschema.protocols import Validator
    from jsonschema.validators import _Validator  # what keyword functions are given

MAX_PROBLEMS = 20
MAX_EXPANDED_VALUES = 10_000
# Keyword evaluations: several times what the largest content takes against an ordinary
# schema (64,000 tokens of objects against an anyOf of six object variants, the last one
# matching: about 113,000, under a second), and a few seconds at most.
MAX_CHECK_STEPS = 500_000
# The keywords that name another part of the schema to apply in their place.
REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
TOO_COSTLY = (
    f"checking this content against it takes more than {MAX_CHECK_STEPS} steps: its $refs "
    "multiply at each level of the content"
)
EXPANDS = (
    f"expands to more than {MAX_EXPANDED_VALUES} JSON values with each $ref replaced by what "
    "it points at (a $ref back into its own recursion counted once): too much to check "
    "content against"
)


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


def _resolver(schema: dict[str, Any]) -> Any:
    """A resolver of the schema's $refs over a registry holding only this schema: nothing
    is ever fetched."""
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012, specification_with

    specification = specification_with(schema.get("$schema", ""), default=DRAFT202012)
    resource = specification.create_resource(schema)
    base = resource.id() or "urn:memkit:profile-schema"
    return Registry().with_resource(base, resource).resolver(base_uri=base)


def _unsafe_parts(schema: dict[str, Any]) -> list[FieldProblem]:
    """$refs that leave the schema or lead nowhere, and patterns memkit cannot evaluate."""
    from referencing.exceptions import Unresolvable

    resolver = _resolver(schema)
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


# -- how far $refs expand ----------------------------------------------------------------


def _values_and_references(node: Any) -> tuple[int, list[tuple[list[str], str]]]:
    """How many JSON values `node` holds (itself included), and its references: (path,
    reference) for each $ref, $dynamicRef or $recursiveRef in it."""
    count = 0
    found: list[tuple[list[str], str]] = []
    stack: list[tuple[list[str], Any]] = [([], node)]
    while stack:
        path, current = stack.pop()
        count += 1
        if isinstance(current, dict):
            for key, value in current.items():
                if key in REFERENCES and isinstance(value, str):
                    found.append(([*path, key], value))
                stack.append(([*path, str(key)], value))
        elif isinstance(current, list):
            stack.extend(([*path, str(i)], item) for i, item in enumerate(current))
    return count, found


def _components(graph: dict[int, list[int]]) -> list[list[int]]:
    """The strongly connected components of `graph` (Tarjan's, without recursion), each
    after every component it reaches."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    found: list[list[int]] = []

    def enter(node: int) -> Iterator[int]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return iter(graph[node])

    for start in graph:
        if start in index:
            continue
        work = [(start, enter(start))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    work.append((child, enter(child)))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[int] = []
                while not component or component[-1] != node:
                    component.append(stack.pop())
                    on_stack.discard(component[-1])
                found.append(component)
    return found


def _expansion_problems(schema: dict[str, Any]) -> list[FieldProblem]:
    """The outermost $ref whose target, its $refs followed, holds more than
    MAX_EXPANDED_VALUES JSON values, else the schema itself when it does.

    Each part of the schema a reference points at is counted once, then the counts are
    added up along the references, so the work is linear in the schema's size: a part
    counts its own values plus, for each of its references, the count of the part it
    points at, except a reference back into its own recursion (the same strongly
    connected component), which counts as its own string."""
    from referencing.exceptions import Unresolvable

    resolver = _resolver(schema)
    parts: dict[int, tuple[int, list[int]]] = {}  # id of a part -> its values, its targets
    root_references: list[tuple[list[str], int]] = []
    pending: list[Any] = [schema]
    while pending:
        part = pending.pop()
        if id(part) in parts:
            continue
        values, references = _values_and_references(part)
        targets: list[int] = []
        for path, reference in references:
            try:
                target = resolver.lookup(reference).contents
            except Unresolvable:  # refused by _unsafe_parts (or not followed by jsonschema)
                continue
            targets.append(id(target))
            pending.append(target)
            if part is schema:
                root_references.append((path, id(target)))
        parts[id(part)] = (values, targets)
    size: dict[int, int] = {}
    for component in _components({part: targets for part, (_, targets) in parts.items()}):
        members = set(component)
        for part in component:
            values, targets = parts[part]
            outside = (size[target] for target in targets if target not in members)
            size[part] = min(values + sum(outside), MAX_EXPANDED_VALUES + 1)
    over = [path for path, target in root_references if size[target] > MAX_EXPANDED_VALUES]
    if over:
        return [FieldProblem(_path("schema", min(over, key=lambda p: (len(p), p))), EXPANDS)]
    if size[id(schema)] > MAX_EXPANDED_VALUES:
        return [FieldProblem("schema", EXPANDS)]
    return []


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


class _TooCostly(Exception):
    """A content check ran out of steps (MAX_CHECK_STEPS)."""


# The steps the content check running in this context has left (None: not counted).
_steps_left: ContextVar[list[int] | None] = ContextVar("memkit_schema_steps", default=None)

Keyword = Callable[..., Any]


def _counted(keyword: Keyword) -> Keyword:
    """`keyword`, costing one step of the running content check each time it is applied."""

    def apply(
        validator: _Validator, value: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        left = _steps_left.get()
        if left is not None:
            left[0] -= 1
            if left[0] < 0:
                raise _TooCostly
        yield from keyword(validator, value, instance, schema) or ()

    return apply


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
    """The dialect's validator class, with every regular expression evaluated by RE2 and
    every keyword counted against the running content check's steps."""
    from jsonschema import validators

    own = {k: f for k, f in _KEYWORDS.items() if k in cls.VALIDATORS}
    keywords = {k: _counted(f) for k, f in {**cls.VALIDATORS, **own}.items()}
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
    unsafe = _unsafe_parts(schema) or _expansion_problems(schema)
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
    patterns or the expansion of its $refs were checked)."""
    import json

    schema = json.loads(schema_key)
    problems = _pattern_problems(schema) or _expansion_problems(schema)
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
    steps = _steps_left.set([MAX_CHECK_STEPS])
    try:
        errors = sorted(
            validator.iter_errors(content), key=lambda e: list(map(str, e.absolute_path))
        )
    except (RecursionError, Unresolvable):
        # Profiles stored before their $refs were checked, or refs that loop: report, never crash.
        return [FieldProblem("schema", "cannot be evaluated: its $refs loop or lead nowhere")]
    except _TooCostly:
        return [FieldProblem("schema", TOO_COSTLY)]
    finally:
        _steps_left.reset(steps)
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
