"""pydantic's validation errors as the API's field problems: where, in the client's own field
path, and why, in words the client can act on.

pydantic's `loc` is a path through its validators, not through the request: a union member
adds its tag (`dict[literal['eq','ne'],any]`, `str`, `function-after[...]`, a model's class
name, `tagged-union[...]`), a discriminated union adds the discriminator's value, and a bad
dictionary key adds `[key]`. The path is walked along the core schema of the type that was
validated, so only the segments that are a union's tag are dropped: a field, an index or a
key the client sent stays, whatever its text. A union then reports each member's failure; the
members that could not take the value at all (a string where the member is an object) are
left out when another member took it and says what is wrong inside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

from memkit.errors import FieldProblem

Segment = str | int
Schema = Mapping[str, Any]

KEY_MARK = "[key]"
# Error types that mean "this member does not take a value of that kind": a union member
# that failed only with one of them at its own top did not accept the value at all.
MISMATCHES = frozenset(
    {"literal_error", "enum", "is_instance_of", "none_required", "union_tag_invalid"}
)
SHOULD_BE = "Input should be "
# Validators that add nothing to `loc`: the one inner schema a value goes through.
WRAPPED = {
    "default": "schema",
    "nullable": "schema",
    "function-after": "schema",
    "function-before": "schema",
    "function-wrap": "schema",
    "model": "schema",
    "json-or-python": "python_schema",
    "lax-or-strict": "lax_schema",
}
SEQUENCES = ("list", "set", "frozenset", "generator")
FIELDS = ("model-fields", "typed-dict")


@dataclass(frozen=True)
class _Located:
    """One pydantic error, walked: its API path and the union members it went through."""

    path: tuple[Segment, ...]
    # (the raw loc up to the union, the member's tag) for each union on the way.
    branches: tuple[tuple[tuple[Segment, ...], str], ...]
    # loc segments past the last union's tag: 0 = the member itself refused the value.
    depth: int
    kind: str
    reason: str


@lru_cache(maxsize=256)
def _core_schema(shape: Any) -> tuple[Schema, dict[str, Schema]]:
    """The core schema pydantic validates `shape` with, and its definitions by ref."""
    from pydantic import TypeAdapter

    schema = TypeAdapter(shape).core_schema
    return schema, _definitions(schema)


def _definitions(schema: Any) -> dict[str, Schema]:
    found: dict[str, Schema] = {}
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if isinstance(node.get("ref"), str):
                found.setdefault(node["ref"], node)
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return found


_LABELS: dict[int, tuple[Schema, str | None]] = {}


def _label(choice: Schema, definitions: dict[str, Schema]) -> str | None:
    """The tag pydantic puts in `loc` for a union member: its validator's name."""
    known = _LABELS.get(id(choice))
    if known is not None and known[0] is choice:
        return known[1]
    from pydantic_core import CoreSchema, SchemaValidator

    needed = [definitions[ref] for ref in sorted(_refs_used(choice, definitions))]
    wrapped = cast(CoreSchema, {"type": "definitions", "schema": choice, "definitions": needed})
    try:
        label: str | None = SchemaValidator(wrapped).title
    except Exception:  # a member pydantic-core will not build on its own: no label
        label = None
    _LABELS[id(choice)] = (choice, label)
    return label


def _refs_used(schema: Schema, definitions: dict[str, Schema]) -> set[str]:
    """The refs `schema` reaches (through definitions), which a validator of it needs."""
    used: set[str] = set()
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            ref = node.get("schema_ref") if node.get("type") == "definition-ref" else None
            if isinstance(ref, str) and ref not in used and ref in definitions:
                used.add(ref)
                stack.append(definitions[ref])
            stack.extend(v for k, v in node.items() if k != "ref")
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return used


def _members(union: Schema) -> list[tuple[Schema, str | None]]:
    """A union's members, each with the label its schema gives it (None: pydantic's own)."""
    return [
        (choice[0], choice[1]) if isinstance(choice, tuple | list) else (choice, None)
        for choice in union.get("choices", ())
    ]


def _member(union: Schema, tag: Segment, definitions: dict[str, Schema]) -> Schema | None:
    """The member of `union` whose tag is `tag`. A member's name can differ in its bracketed
    detail from the one built alone (a model inside is "..." while pydantic still builds it),
    so failing an exact match the one member of that kind is it."""
    labelled = [
        (schema, custom if custom is not None else _label(schema, definitions))
        for schema, custom in _members(union)
    ]
    exact = [schema for schema, label in labelled if label == tag]
    kind = str(tag).split("[", 1)[0]
    alike = [schema for schema, label in labelled if label and label.split("[", 1)[0] == kind]
    return (exact or alike)[0] if exact or len(alike) == 1 else None


def _field(fields: Any, name: Segment) -> Schema | None:
    """The field `name` (as the client spelled it: its name or an alias) of a model's fields."""
    entries = fields.items() if isinstance(fields, Mapping) else ((f["name"], f) for f in fields)
    for key, entry in entries:
        alias = entry.get("validation_alias")
        # An alias is a name, or AliasChoices' / AliasPath's lists whose first part is a name.
        paths = [alias] if isinstance(alias, str) else alias or []
        names = {path if isinstance(path, str) else path[0] for path in paths if path}
        if name == key or name in names:
            return cast(Schema | None, entry.get("schema"))
    return None


@dataclass
class _Walk:
    """Where a walk of one error's `loc` along the schema got to."""

    path: list[Segment] = field(default_factory=list)
    branches: list[tuple[tuple[Segment, ...], str]] = field(default_factory=list)
    bad_key: bool = False
    index: int = 0  # the loc segments the schema accounted for
    after_tag: int = 0  # the index just past the last union's tag
    # The first segment of `path` the client named (a key no model declares), if any.
    named: int | None = None

    def fork(self) -> _Walk:
        return _Walk(
            list(self.path),
            list(self.branches),
            self.bad_key,
            self.index,
            self.after_tag,
            self.named,
        )

    def add(self, segment: Segment, declared: bool) -> None:
        """`segment` onto the path; `declared`: a field, an index or a key the schema names."""
        if not declared and self.named is None:
            self.named = len(self.path)
        self.path.append(segment)


def _walk(node: Schema | None, loc: Sequence[Segment], at: _Walk, defs: dict[str, Schema]) -> _Walk:
    """`at`, carried along `loc` from `node` as far as the schema explains the segments."""
    while at.index < len(loc) and node is not None:
        kind = node.get("type")
        segment = loc[at.index]
        if kind == "definitions":
            node = node["schema"]
        elif kind == "definition-ref":
            node = defs.get(node["schema_ref"])
        elif kind in WRAPPED:
            node = node.get(WRAPPED[kind])
        elif kind == "chain":
            node = (node.get("steps") or [None])[0]
        elif kind == "dataclass":
            node = node.get("schema")
        elif kind in FIELDS or kind == "dataclass-args":
            node = _field(node.get("fields", {}), segment)
            at.add(segment, declared=node is not None)
            at.index += 1
        elif kind in SEQUENCES or kind == "tuple":
            at.add(segment, declared=True)
            at.index += 1
            items = node.get("items_schema")
            if isinstance(items, list):  # a tuple: one schema a position
                position = segment if isinstance(segment, int) else len(items)
                items = items[min(position, len(items) - 1)] if items else None
            node = items
        elif kind == "dict":
            keys = node.get("keys_schema") or {}
            allowed = keys.get("expected", ()) if keys.get("type") == "literal" else ()
            at.add(segment, declared=segment in allowed)
            at.index += 1
            if at.index < len(loc) and loc[at.index] == KEY_MARK:
                at.bad_key, at.index = True, at.index + 1
                node = node.get("keys_schema")
            else:
                node = node.get("values_schema")
        elif kind == "tagged-union":
            at.index += 1  # the discriminator's value: the client's own, already in the body
            choices = node.get("choices", {})
            node = next((s for t, s in choices.items() if str(t) == str(segment)), None)
        elif kind == "union":
            member = _member(node, segment, defs)
            if member is None:
                # No member has that tag: a validator function validated the value itself
                # (a field validator calling a model), so the path is that member's own.
                return _unlabelled(node, loc, at, defs)
            at.branches.append((tuple(loc[: at.index]), str(segment)))
            at.index += 1
            at.after_tag = at.index
            node = member
        else:
            break  # a leaf: what follows is its validator's own
    return at


def _unlabelled(union: Schema, loc: Sequence[Segment], at: _Walk, defs: dict[str, Schema]) -> _Walk:
    """The walk through the member of `union` whose fields explain the most of `loc`; with
    none, the segment is taken for the tag of a member this module cannot name."""
    best: _Walk | None = None
    for member, _ in _members(union):
        trial = _walk(member, loc, at.fork(), defs)
        followed = trial.index > at.index and len(trial.path) > len(at.path)
        if followed and (best is None or trial.index > best.index):
            best = trial
    if best is not None:
        return best
    at.branches.append((tuple(loc[: at.index]), str(loc[at.index])))
    at.index += 1
    at.after_tag = at.index
    return at


def _located(schema: Schema, loc: Sequence[Segment], defs: dict[str, Schema]) -> _Walk:
    """`loc` walked: the API path, the union members on the way, whether the last segment
    named a bad key, and the first segment the client named."""
    at = _walk(schema, loc, _Walk(), defs)
    for segment in loc[at.index :]:
        if segment == KEY_MARK:
            at.bad_key = True
        else:
            at.add(segment, declared=isinstance(segment, int))  # past what the schema explains
    return at


def _reason(error: Mapping[str, Any], bad_key: bool, key: Segment | None) -> str:
    """Why, for a bad key naming it (`key`) or not (None)."""
    message = str(error.get("msg", "not valid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if not bad_key:
        return message
    expected = (error.get("ctx") or {}).get("expected")
    allowed = error.get("type") == "literal_error" and expected
    if key is None:
        return (
            f"a key is not one of those allowed here: {expected}"
            if allowed
            else f"a key: {message}"
        )
    if allowed:
        return f"{key!r} is not one of the keys allowed here: {expected}"
    return f"the key {key!r}: {message}"


def _locate(
    error: Mapping[str, Any], schema: Schema, definitions: dict[str, Schema], name_keys: bool
) -> _Located:
    loc = tuple(error.get("loc", ()))
    at = _located(schema, loc, definitions)
    path, kind = at.path, str(error.get("type", ""))
    depth = len(loc) - at.after_tag if at.branches else len(loc)
    key = path[-1] if at.bad_key and path else None
    if at.named is not None and not name_keys:
        # The object that has a key the client named, never the key (nor what is below it).
        path, key = path[: at.named], None
        if kind == "extra_forbidden":
            return _Located(tuple(path), tuple(at.branches), depth, kind, "an unknown key")
        if not at.bad_key:
            reason = _reason(error, False, None)
            return _Located(tuple(path), tuple(at.branches), depth, kind, f"a value: {reason}")
    reason = _reason(error, at.bad_key, key)
    return _Located(tuple(path), tuple(at.branches), depth, kind, reason)


def _refused(error: _Located) -> bool:
    """Whether the union member the error came from refused the value's kind outright."""
    return error.depth == 0 and (
        error.kind.endswith(("_type", "_parsing")) or error.kind in MISMATCHES
    )


def _either(reasons: list[str]) -> str:
    """One reason for a value no member of a union would take."""
    unique = list(dict.fromkeys(reasons))
    if all(reason.startswith(SHOULD_BE) for reason in unique):
        return SHOULD_BE + " or ".join(reason.removeprefix(SHOULD_BE) for reason in unique)
    return " or ".join(unique)


def _readable(located: list[_Located]) -> list[tuple[tuple[Segment, ...], str]]:
    """The errors worth showing: a union's members that refused the value's kind are dropped
    when another member took it; when none took it, one error says what the value may be."""
    members: dict[tuple[Segment, ...], dict[str, list[_Located]]] = {}
    for error in located:
        for at, tag in error.branches:
            members.setdefault(at, {}).setdefault(tag, []).append(error)
    refused = {
        (at, tag)
        for at, tags in members.items()
        for tag, errors in tags.items()
        if all(e.branches[-1] == (at, tag) and _refused(e) for e in errors)
    }
    shown: list[tuple[tuple[Segment, ...], str]] = []
    merged: dict[tuple[Segment, ...], int] = {}
    either: dict[tuple[Segment, ...], list[str]] = {}
    for error in located:
        dropped = False
        for at, tag in error.branches:
            if (at, tag) not in refused:
                continue
            dropped = True
            every = all((at, other) in refused for other in members[at])
            if every and (at, tag) == error.branches[-1]:
                if at not in merged:
                    merged[at] = len(shown)
                    shown.append((error.path, ""))
                either.setdefault(at, []).append(error.reason)
        if not dropped:
            shown.append((error.path, error.reason))
    for at, slot in merged.items():
        shown[slot] = (shown[slot][0], _either(either[at]))
    return shown


def field_problems(
    errors: Sequence[Mapping[str, Any]],
    shape: Any,
    prefix: Sequence[Segment] = (),
    name_keys: bool = True,
) -> list[FieldProblem]:
    """pydantic's `errors` for a value validated as `shape` (a model, or any type), each as a
    FieldProblem at `prefix` + the field path the client wrote (dotted; "body" for the whole
    value when there is no prefix). `name_keys` False: no key the client chose is quoted
    (one a strict model does not know, a dict member's name): the path stops at the object
    that has it (an MCP tool's refusals never repeat what was sent)."""
    try:
        schema, definitions = _core_schema(shape)
    except TypeError:  # an unhashable shape (Annotated with unhashable metadata)
        from pydantic import TypeAdapter

        schema = TypeAdapter(shape).core_schema
        definitions = _definitions(schema)
    located = [_locate(error, schema, definitions, name_keys) for error in errors]
    problems: list[FieldProblem] = []
    for path, reason in _readable(located):
        where = ".".join(str(part) for part in (*prefix, *path)) or "body"
        problem = FieldProblem(where, reason)
        if problem not in problems:
            problems.append(problem)
    return problems
