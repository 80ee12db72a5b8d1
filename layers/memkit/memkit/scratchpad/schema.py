"""JSON Schema checks with a real validator (jsonschema), imported on first use only.

The schema's own dialect is honoured (`$schema`); without one, Draft 2020-12. Every keyword
that matches a regular expression (`pattern`, `patternProperties`, the properties
`additionalProperties` leaves out, `format: regex`) runs on RE2 in linear time (patterns.py),
never on Python's backtracking `re`.

References ($ref, $dynamicRef, $recursiveRef) are followed where the dialect applies them
(never inside const, enum, default or examples, which hold values), each against the $id of
the part it is in, as jsonschema does; each must point inside the schema at a schema.

$refs are bounded too: a $ref costs what it points at each time it is applied, so
definitions that each refer to the next one twice make a small schema exponentially large
work. A schema is refused when, with each $ref replaced by what it points at, it would hold
more than MAX_EXPANDED_VALUES JSON values; a $ref back to a part it is already in (on
the way from the top) counts once, as recursion goes only as deep as the content does.
That bounds the schemas applied at any
one place of the content, and what a model provider or MCP client that inlines the tool
definitions' $refs must hold. A content check also stops after MAX_CHECK_STEPS steps (a
keyword applied, a JSON value enum, const or uniqueItems reads: they compare canonical texts,
in linear time): that covers profiles stored before the count, and recursion that multiplies
at each level of the content (two `allOf` branches that both descend into the same
property), which no count of the schema alone sees.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from memkit.errors import FieldProblem
from memkit.scratchpad import patterns

if TYPE_CHECKING:
    from jsonschema import FormatChecker, ValidationError
    from jsonschema.protocols import Validator
    from jsonschema.validators import _Validator  # what keyword functions are given

MAX_PROBLEMS = 20
MAX_EXPANDED_VALUES = 10_000
# The values counting one schema's expansion may go through in all: each count stops past
# MAX_EXPANDED_VALUES, so this is only reached by a schema several times over it.
MAX_COUNTED = 4 * (MAX_EXPANDED_VALUES + 1)
# Keyword evaluations: under twice what the largest content takes against an ordinary
# schema (64,000 tokens of objects against an anyOf of six object variants, the last one
# matching: about 113,000, under a second), since every read checks the stored content
# too: a check that runs out takes about a second (500,000 took 2.2 s, perhaps 7 s on a
# 512 MB Lambda).
MAX_CHECK_STEPS = 200_000
# Subschemas one allOf, anyOf or oneOf may list: each is applied to the same value, so a
# long list is that many checks of it (and that much metaschema work when stored).
MAX_BRANCHES = 1_000
BRANCHING = ("allOf", "anyOf", "oneOf")
# The keywords whose values are JSON data, not schemas (the metaschema hardly reads them).
VALUE_KEYWORDS = ("enum", "const", "default", "examples")
# The keywords that name another part of the schema to apply in their place.
REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
TOO_COSTLY = (
    f"checking this content against it takes more than {MAX_CHECK_STEPS} steps (each keyword "
    "applied, each JSON value that enum, const or uniqueItems compares): more content than "
    "the schema can check, or $refs that multiply at each level of the content"
)
# jsonschema switches to the plain validator of a $schema met below the top (its own `re`
# for patterns, no step count), so memkit allows one, and checks with the top's $schema
# taken out, so that a $ref to "#" stays with memkit's validator too.
ONE_DIALECT = "only at the top of the schema: memkit checks content in one dialect"
EXPANDS = (
    f"expands to more than {MAX_EXPANDED_VALUES} JSON values with each $ref replaced by what "
    "it points at (a $ref back to a part it is already in counted once): too much to check "
    "content against"
)


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


def _size_problems(schema: dict[str, Any]) -> list[FieldProblem]:
    """A schema too large to check content against, found before any metaschema work (which
    takes seconds on one this large): more JSON values than MAX_EXPANDED_VALUES outside the
    values of enum, const, default and examples, which the metaschema hardly reads (refused
    anyway, as its expansion holds at least as many), or a list of more than MAX_BRANCHES
    subschemas. The walk stops once past the limit."""
    too_many = (
        f"holds more than {MAX_EXPANDED_VALUES} JSON values (outside the values of "
        f"{', '.join(VALUE_KEYWORDS)}): too much to check content against"
    )
    count = 0
    stack: list[tuple[list[str], Any]] = [([], schema)]
    while stack:
        path, node = stack.pop()
        count += 1
        if count > MAX_EXPANDED_VALUES:
            return [FieldProblem("schema", too_many)]
        if isinstance(node, dict):
            for key, value in node.items():
                if key in VALUE_KEYWORDS:
                    count += 1
                    continue
                if key in BRANCHING and isinstance(value, list) and len(value) > MAX_BRANCHES:
                    reason = (
                        f"lists {len(value)} subschemas; at most {MAX_BRANCHES}, as each is "
                        "applied to the same value"
                    )
                    return [FieldProblem(_path("schema", [*path, key]), reason)]
                stack.append(([*path, str(key)], value))
        elif isinstance(node, list):
            stack.extend(([*path, str(i)], item) for i, item in enumerate(node))
    return []


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


def _resolver(schema: dict[str, Any]) -> tuple[Any, Any]:
    """A resolver of the schema's references over a registry holding only this schema (so
    nothing is ever fetched), and the dialect's referencing specification."""
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012, specification_with

    specification = specification_with(schema.get("$schema", ""), default=DRAFT202012)
    resource = specification.create_resource(schema)
    base = resource.id() or "urn:memkit:profile-schema"
    return Registry().with_resource(base, resource).resolver(base_uri=base), specification


class _NoBase(Exception):
    """A `$id` that is no URI, so the references under it resolve against nothing."""

    def __init__(self, node: dict[str, Any]) -> None:
        self.node = node


def _schema_nodes(
    part: Any, resolver: Any, specification: Any
) -> Iterator[tuple[dict[str, Any], Any]]:
    """Every object of `part` in a place the dialect applies as a schema (not the values of
    const, enum, default, examples or unknown keywords), with the resolver of the resource it
    sits in: a `$id` starts a new one, as it does for jsonschema."""
    stack = [(specification.create_resource(part), resolver)]
    while stack:
        resource, at = stack.pop()
        if isinstance(resource.contents, dict):
            yield resource.contents, at
        for sub in resource.subresources():
            try:
                stack.append((sub, at.in_subresource(sub)))
            except ValueError as exc:  # urljoin: "Invalid IPv6 URL" and the like
                raise _NoBase(sub.contents) from exc


def _lookup(resolver: Any, reference: str) -> Any:
    """What `reference` points at (its contents and the resolver there), or None: a pointer
    through a member that is not there or an index that is not a number, a malformed URI."""
    from referencing.exceptions import Unresolvable

    try:
        return resolver.lookup(reference)
    except (Unresolvable, LookupError, TypeError, ValueError):
        return None


def _loops(resolved: Any) -> bool:
    """True when following a reference only ever reaches other references and comes back
    (each applied to the same value, without end)."""
    seen: set[int] = set()
    while resolved is not None:
        target = resolved.contents
        if id(target) in seen:
            return True
        seen.add(id(target))
        if not isinstance(target, dict):
            return False
        reference = next((target[k] for k in REFERENCES if isinstance(target.get(k), str)), None)
        resolved = _lookup(resolved.resolver, reference) if reference is not None else None
    return False


def _locations(schema: dict[str, Any]) -> dict[int, list[str]]:
    """The path of every object and array in the schema, by identity."""
    found: dict[int, list[str]] = {}
    stack: list[tuple[list[str], Any]] = [([], schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict | list) and id(node) not in found:
            found[id(node)] = path
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(([*path, str(key)], value) for key, value in items)
    return found


def _count_values(node: Any) -> int:
    """How many JSON values `node` holds, itself included."""
    count = 0
    stack = [node]
    while stack:
        current = stack.pop()
        count += 1
        if isinstance(current, dict):
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return count


class _Parts(NamedTuple):
    """The schema and the parts of it its references point at, by identity: each part's JSON
    values and the parts its references point at; the schema's own references (path, part);
    and the references memkit refuses."""

    values: dict[int, int]
    targets: dict[int, list[int]]
    root: list[tuple[list[str], int]]
    problems: list[FieldProblem]


def _parts(schema: dict[str, Any], metaschema: Validator) -> _Parts:
    """Follow every reference ($ref, $dynamicRef, $recursiveRef) where the dialect applies
    it, in the schema and in each part one points at, as jsonschema would. A reference must
    point inside the schema (`#...`) at a valid schema, and not only at other references
    that come back."""
    resolver, specification = _resolver(schema)
    locations = _locations(schema)
    parts = _Parts({}, {}, [], [])
    # Each reference (its object, its keyword) once: what it points at, or None if refused.
    followed: dict[tuple[int, str], Any] = {}
    nested: set[int] = set()  # the parts holding a $schema of their own, reported once

    def location(node: dict[str, Any], keyword: str) -> list[str]:
        return [*locations.get(id(node), []), keyword]

    try:
        applied = {id(node) for node, _ in _schema_nodes(schema, resolver, specification)}
        pending: list[tuple[Any, Any]] = [(schema, resolver)]
        while pending:
            part, part_resolver = pending.pop()
            if id(part) in parts.values:
                continue
            parts.values[id(part)] = _count_values(part)
            parts.targets[id(part)] = targets = []
            for node, at in _schema_nodes(part, part_resolver, specification):
                if "$schema" in node and node is not schema and id(node) not in nested:
                    nested.add(id(node))
                    where = _path("schema", location(node, "$schema"))
                    parts.problems.append(FieldProblem(where, ONE_DIALECT))
                for keyword in REFERENCES:
                    reference = node.get(keyword)
                    if not isinstance(reference, str):
                        continue
                    if (id(node), keyword) not in followed:
                        outcome = _follow(reference, at, metaschema, applied)
                        if isinstance(outcome, str):
                            where = _path("schema", location(node, keyword))
                            parts.problems.append(FieldProblem(where, outcome))
                        followed[id(node), keyword] = None if isinstance(outcome, str) else outcome
                    resolved = followed[id(node), keyword]
                    if resolved is None:
                        continue
                    targets.append(id(resolved.contents))
                    pending.append((resolved.contents, resolved.resolver))
                    if part is schema:
                        parts.root.append((location(node, keyword), id(resolved.contents)))
    except _NoBase as exc:
        keyword = "$id" if "$id" in exc.node else "id"
        where = _path("schema", location(exc.node, keyword))
        parts.problems.append(FieldProblem(where, "not a URI"))
    return parts


def _follow(reference: str, at: Any, metaschema: Validator, applied: set[int]) -> Any:
    """What `reference` points at (contents and resolver), or why memkit refuses it."""
    if not reference.startswith("#"):
        return "only references within the schema (#...)"
    resolved = _lookup(at, reference)
    if resolved is None:
        return f"{reference!r} points at nothing"
    target = resolved.contents
    if not isinstance(target, dict | bool):
        return f"{reference!r} points at a value that is not a schema"
    if isinstance(target, dict) and id(target) not in applied:
        # A part jsonschema applies only through the reference (one under `default`, say),
        # so the metaschema has not checked it: the content check would trip over it.
        error = next(metaschema.iter_errors(target), None)
        if error is not None:
            return f"{reference!r} points at a value that is not a schema: {error.message}"
    if _loops(resolved):
        return f"{reference!r} refers back to itself"
    return resolved


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


class _Uncountable(Exception):
    """Counting a schema's expansion went past MAX_COUNTED values."""


class _Expansion:
    """How many JSON values parts of a schema hold with each reference replaced by what it
    points at, except a reference back to a part on the way there from the top, which
    counts as its own string (recursion goes only as deep as the content does).

    A depth-first walk from a part along the references, each part's count stopping past
    MAX_EXPANDED_VALUES. A part's count depends on the parts above it only when one of them
    is in its strongly connected group (it can reach them back), so the count of a part
    entered from outside its group is kept and reused: a part shared by many, a list, a
    tree are each counted once. Inside a group the walk follows every path, so a group whose
    references fan out counts as large as it expands; all counts of one schema together
    stop after MAX_COUNTED values."""

    def __init__(self, parts: _Parts) -> None:
        self._parts = parts
        self._group = {
            part: n for n, members in enumerate(_components(parts.targets)) for part in members
        }
        self._known: dict[int, int] = {}
        self._left = MAX_COUNTED

    def count(self, start: int, above: int) -> int:
        """The count of `start` reached from the part `above`, at most MAX_EXPANDED_VALUES+1."""
        over = MAX_EXPANDED_VALUES + 1
        on_path = {above}
        counted = [0]
        # (part, its targets still to follow, its count so far, where its count goes, whether
        # it was entered from outside its group)
        stack: list[tuple[int, Iterator[int], list[int], list[int], bool]] = []

        def visit(part: int, into: list[int], came_from: int) -> None:
            if part in on_path:
                return  # back to a part on the way: its string, counted with its object
            entered = self._group[part] != self._group[came_from]
            if entered and part in self._known:
                into[0] += self._known[part]
                return
            values = self._parts.values[part]
            self._left -= min(values, over)  # the walk stops there past the limit
            if self._left < 0:
                raise _Uncountable
            stack.append((part, iter(self._parts.targets[part]), [values], into, entered))
            on_path.add(part)

        visit(start, counted, above)
        while stack:
            part, targets, total, into, entered = stack[-1]
            target = next(targets, None) if total[0] <= MAX_EXPANDED_VALUES else None
            if target is not None:
                visit(target, total, part)
                continue
            stack.pop()
            on_path.discard(part)
            if entered:
                self._known[part] = min(total[0], over)
            into[0] += min(total[0], over)
        return min(counted[0], over)


def _expansion_problems(parts: _Parts, schema: dict[str, Any]) -> list[FieldProblem]:
    """The outermost reference whose target, its references followed, holds more than
    MAX_EXPANDED_VALUES JSON values, else the schema itself when it does (_Expansion)."""
    expansion = _Expansion(parts)
    total = parts.values[id(schema)]
    try:
        for path, target in sorted(
            parts.root, key=lambda reference: (len(reference[0]), reference[0])
        ):
            size = expansion.count(target, id(schema))
            if size > MAX_EXPANDED_VALUES:
                return [FieldProblem(_path("schema", path), EXPANDS)]
            total += size
    except _Uncountable:  # several times over the limit in all
        return [FieldProblem("schema", EXPANDS)]
    return [FieldProblem("schema", EXPANDS)] if total > MAX_EXPANDED_VALUES else []


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


class _TooCostly(Exception):
    """A content check ran out of steps (MAX_CHECK_STEPS)."""


class _Run:
    """The content check running in this context: the steps it has left, and the canonical
    texts of the schema's `enum` and `const` values (_Values.of), by the subschema holding
    them."""

    def __init__(self, steps: int, values: _Values) -> None:
        self.left = steps
        self.values = values

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise _TooCostly


# The content check running in this context (None: not counted).
_running: ContextVar[_Run | None] = ContextVar("memkit_schema_run", default=None)

Keyword = Callable[..., Any]


def _counted(keyword: Keyword) -> Keyword:
    """`keyword`, costing one step of the running content check each time it is applied."""

    def apply(
        validator: _Validator, value: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        run = _running.get()
        if run is not None:
            run.spend(1)
        yield from keyword(validator, value, instance, schema) or ()

    return apply


# -- equality of JSON values, in linear time -------------------------------------------------


def canonical(value: Any, counted: list[int] | None = None) -> str:
    """A text of `value` that two JSON values share exactly when JSON Schema holds them
    equal (as jsonschema's `equal` does): 1 and 1.0 alike, true and 1 not, members in any
    order, items in theirs. `counted[0]` grows by the JSON values read."""
    if counted is not None:
        counted[0] += 1
    if value is None or value is True or value is False:
        return "null" if value is None else "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # An integral float is the integer it equals (exactly: Python compares them so).
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, dict):
        members = sorted((str(k), canonical(v, counted)) for k, v in value.items())
        return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical(item, counted) for item in value) + "]"
    return repr(value)  # not JSON: only ever equal to itself in text


class _Values:
    """The canonical texts of every `enum` and `const` of a schema, by the identity of the
    subschema holding them, read once when its validator is built (bounded by the schema's
    size) so that each check costs only the content it reads."""

    def __init__(self, schema: Any) -> None:
        self.enums: dict[int, frozenset[str]] = {}
        self.consts: dict[int, str] = {}
        self._kept: list[Any] = []  # keeps the ids above from being reused
        stack = [schema]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                enum = node.get("enum")
                if isinstance(enum, list):
                    self.enums[id(node)] = frozenset(canonical(each) for each in enum)
                if "const" in node:
                    self.consts[id(node)] = canonical(node["const"])
                self._kept.append(node)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)


def _texts(run: _Run | None, values: Any, schema: Any, keyword: str) -> frozenset[str] | str:
    """The canonical text(s) of a subschema's enum or const: read when its validator was
    built, or now (a schema met outside a counted check), costing what it reads."""
    known = run.values.enums if keyword == "enum" and run else run.values.consts if run else {}
    if id(schema) in known:
        return known[id(schema)]
    counted = [0]
    texts: frozenset[str] | str = (
        frozenset(canonical(each, counted) for each in values)
        if keyword == "enum"
        else canonical(values, counted)
    )
    if run is not None:
        run.spend(counted[0])
    return texts


def _instance_text(run: _Run | None, instance: Any) -> str:
    """The instance's canonical text, costing the running check what it reads."""
    counted = [0]
    text = canonical(instance, counted)
    if run is not None:
        run.spend(counted[0])
    return text


SHOWN_VALUES = 20  # an enum longer than this is named by its length in a problem
SHOWN_CHARACTERS = 200  # a value's text in a problem stops there


def _shown(value: Any, raw: bool = False) -> str:
    """`value` as a problem shows it (its repr, cut short: problems go back in responses)."""
    text = value if raw else repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "..."


def _enum(
    validator: _Validator, enums: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    from jsonschema import ValidationError

    if not isinstance(enums, list):  # refused by the metaschema; jsonschema's own reading
        from jsonschema._utils import equal

        if not any(equal(each, instance) for each in enums):
            yield ValidationError(f"{_shown(instance)} is not one of {_shown(enums)}")
        return
    run = _running.get()
    if _instance_text(run, instance) not in _texts(run, enums, schema, "enum"):
        allowed = repr(enums) if len(enums) <= SHOWN_VALUES else f"the {len(enums)} values of enum"
        yield ValidationError(f"{_shown(instance)} is not one of {_shown(allowed, raw=True)}")


def _const(
    validator: _Validator, const: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    from jsonschema import ValidationError

    run = _running.get()
    if _instance_text(run, instance) != _texts(run, const, schema, "const"):
        yield ValidationError(f"{_shown(const)} was expected")


def _unique_items(
    validator: _Validator, unique: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    from jsonschema import ValidationError

    if not unique or not validator.is_type(instance, "array"):
        return
    run = _running.get()
    seen: dict[str, int] = {}
    for index, item in enumerate(instance):
        first = seen.setdefault(_instance_text(run, item), index)
        if first != index:
            yield ValidationError(f"has non-unique elements: item {index} equals item {first}")
            return


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


_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "enum": _enum,
    "const": _const,
    "uniqueItems": _unique_items,
}


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


def _dialect(schema: dict[str, Any]) -> type[Validator] | FieldProblem:
    """The validator class of the schema's dialect (`$schema`; Draft 2020-12 without one),
    or why `$schema` names none."""
    from urllib.parse import urlsplit

    from jsonschema import validators

    declared = schema.get("$schema", "")
    try:
        # jsonschema looks the URI up after urlsplit, which refuses "http://[::1" and the like
        if isinstance(declared, str) and urlsplit(declared):
            return validators.validator_for(schema, default=validators.Draft202012Validator)
    except ValueError:
        pass
    return FieldProblem("schema.$schema", "must be a URI naming a JSON Schema dialect")


@cache
def _metaschema(cls: type[Validator]) -> Validator:
    """A validator of schemas against the dialect's metaschema, as check_schema does, but with
    patterns left to _pattern_problems (RE2 gives the reason) rather than checked by `re` as
    `format: regex`."""
    from jsonschema import validators

    meta = validators.validator_for(cls.META_SCHEMA, default=cls)
    return meta(cls.META_SCHEMA, format_checker=_format_checker(cls, regex=False))


def _evaluation_problems(
    schema: dict[str, Any], stored: bool
) -> type[Validator] | list[FieldProblem]:
    """The validator class to check content against `schema` with, or why memkit cannot do
    so safely: a `$schema` naming no dialect, a schema its metaschema refuses, references
    that leave it, lead nowhere or loop, patterns RE2 cannot run, references that expand
    too far. `stored`: a stored profile's, which passed its metaschema when stored (checking
    that again would add a second or more to a function's first read of a large schema)."""
    cls = _dialect(schema)
    if isinstance(cls, FieldProblem):
        return [cls]
    oversized = _size_problems(schema)
    if oversized:
        return oversized
    metaschema = _metaschema(cls)
    error = None if stored else next(metaschema.iter_errors(schema), None)
    if error is not None:
        return [FieldProblem(_path("schema", error.absolute_path), error.message)]
    parts = _parts(schema, metaschema)
    problems = parts.problems + _pattern_problems(schema) or _expansion_problems(parts, schema)
    return problems or _linear_time(cls)


def schema_problems(schema: dict[str, Any]) -> list[FieldProblem]:
    """Problems with the schema itself (an empty list when it is a valid JSON Schema that
    memkit can check content against)."""
    problems = _evaluation_problems(schema, stored=False)
    if isinstance(problems, list):
        return problems
    declared = schema.get("type")
    if (
        declared is not None
        and declared != "object"
        and not (isinstance(declared, list) and "object" in declared)
    ):
        return [FieldProblem("schema.type", "a scratchpad schema must describe an object")]
    return []


class _Built(NamedTuple):
    validator: Validator
    values: _Values


@lru_cache(maxsize=256)
def _validator(schema_key: str) -> _Built | tuple[FieldProblem, ...]:
    """The validator for a schema with its enum and const values read (_Values), or why it
    cannot be evaluated (a schema stored before one of the checks of schema_problems)."""
    schema = json.loads(schema_key)
    cls = _evaluation_problems(schema, stored=True)
    if isinstance(cls, list):
        return tuple(cls)
    schema.pop("$schema", None)  # its dialect is cls (ONE_DIALECT)
    return _Built(cls(schema, format_checker=cls.FORMAT_CHECKER), _Values(schema))


def content_problems(
    schema: dict[str, Any], content: Any, prefix: str = "content", steps: int = MAX_CHECK_STEPS
) -> list[FieldProblem]:
    """Where `content` breaks `schema`, each with the field path and the reason; the check
    stops after `steps` (keywords applied and JSON values compared). A content checked
    against a schema in this process (its write, say) is not checked again: every read of a
    session shows its scratchpad's problems, and the answer stays what it was."""
    schema_key = json.dumps(schema, sort_keys=True)
    key = hashlib.sha256(
        "\0".join([schema_key, prefix, str(steps), json.dumps(content, sort_keys=True)]).encode()
    ).digest()
    with _checked_lock:
        known = _checked.get(key)
        if known is not None:
            _checked.move_to_end(key)
            return list(known)
    problems = _content_problems(schema_key, content, prefix, steps)
    with _checked_lock:
        _checked[key] = tuple(problems)
        while len(_checked) > MAX_CHECKED:
            _checked.popitem(last=False)
    return problems


# The outcomes of the latest content checks, by digest of schema, content and prefix.
MAX_CHECKED = 512
_checked: OrderedDict[bytes, tuple[FieldProblem, ...]] = OrderedDict()
_checked_lock = threading.Lock()


def _content_problems(schema_key: str, content: Any, prefix: str, steps: int) -> list[FieldProblem]:
    from referencing.exceptions import Unresolvable

    built = _validator(schema_key)
    if not isinstance(built, _Built):
        return list(built[:MAX_PROBLEMS])
    run = _running.set(_Run(steps, built.values))
    try:
        errors = sorted(
            built.validator.iter_errors(content), key=lambda e: list(map(str, e.absolute_path))
        )
    except (RecursionError, Unresolvable):
        # Profiles stored before their $refs were checked, or refs that loop: report, never crash.
        return [FieldProblem("schema", "cannot be evaluated: its $refs loop or lead nowhere")]
    except _TooCostly:
        return [FieldProblem("schema", TOO_COSTLY)]
    finally:
        _running.reset(run)
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
