"""Lambda event filtering (FilterCriteria) for the local stack's event source mappings.

Lambda filters with EventBridge's pattern syntax (Lambda developer guide, "Control which
events Lambda sends to your function"; EventBridge user guide, "Comparison operators for
use in event patterns"). This module implements the operators Lambda documents: exact
values (strings, numbers, booleans, null), `prefix`, `suffix`, `equals-ignore-case`,
`exists`, `anything-but` (values, `prefix`, `suffix`, `equals-ignore-case`), `numeric`,
`$or`, nested objects (every field must match) and arrays in the event (a field matches
if any element does). Anything else is refused when the pattern is parsed, so a pattern
the local stack does not understand never silently lets every record through.

Matching follows the event-ruler model EventBridge uses: an event is seen as its leaf
values by path. A field "exists" when it holds a leaf (a string, number, boolean or
null, or an array with one); an object is an intermediate node, not a value, so
`{"exists": true}` on it does not match and `{"exists": false}` does. Numbers match
exact values by their JSON text (Lambda: 300, 300.0 and 3.0e2 are not equal); `numeric`
compares values and only matches JSON numbers (DynamoDB's {"N": "5"} is a string).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["Pattern", "compile_pattern", "matches", "parse_pattern", "passes"]

_OPERATORS = ("prefix", "suffix", "equals-ignore-case", "exists", "anything-but", "numeric")
_LOWER_BOUNDS = (">", ">=")
_UPPER_BOUNDS = ("<", "<=")
_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "=": lambda value, bound: value == bound,
    ">": lambda value, bound: value > bound,
    ">=": lambda value, bound: value >= bound,
    "<": lambda value, bound: value < bound,
    "<=": lambda value, bound: value <= bound,
}


class _JsonNumber(str):
    """A number as written in a pattern's JSON text (exact values compare by that text)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_text(value: Any) -> str:
    return str(value) if isinstance(value, _JsonNumber) else json.dumps(value)


def _number_value(value: Any) -> float:
    return float(value)


def _is_pattern_number(value: Any) -> bool:
    return isinstance(value, _JsonNumber) or _is_number(value)


# A leaf test takes one leaf value of the event (never an object) and answers.
LeafTest = Callable[[Any], bool]


def _exact(expected: Any) -> LeafTest:
    if expected is None:
        return lambda value: value is None
    if isinstance(expected, bool):
        return lambda value: isinstance(value, bool) and value is expected
    if _is_pattern_number(expected):
        text = _number_text(expected)
        return lambda value: _is_number(value) and json.dumps(value) == text
    if isinstance(expected, str):
        return lambda value: isinstance(value, str) and value == expected
    raise ValueError(f"unsupported value in a filter pattern: {type(expected).__name__}")


def _string_operand(operator: str, operand: Any) -> str:
    if not isinstance(operand, str) or isinstance(operand, _JsonNumber):
        raise ValueError(f"{operator!r} takes a string")
    return operand


def _affix(operator: str, operand: Any) -> LeafTest:
    """`prefix` / `suffix`, optionally with {"equals-ignore-case": ...} (EventBridge form)."""
    check = str.startswith if operator == "prefix" else str.endswith
    if isinstance(operand, dict):
        if set(operand) != {"equals-ignore-case"}:
            raise ValueError(f"{operator!r} takes a string or {{'equals-ignore-case': ...}}")
        folded = _string_operand(operator, operand["equals-ignore-case"]).casefold()
        return lambda value: isinstance(value, str) and check(value.casefold(), folded)
    text = _string_operand(operator, operand)
    return lambda value: isinstance(value, str) and check(value, text)


def _ignore_case(operand: Any) -> LeafTest:
    folded = _string_operand("equals-ignore-case", operand).casefold()
    return lambda value: isinstance(value, str) and value.casefold() == folded


def _numeric(operand: Any) -> LeafTest:
    if not isinstance(operand, list) or len(operand) not in (2, 4):
        raise ValueError("'numeric' takes [op, number] or [lower op, number, upper op, number]")
    pairs = [(operand[i], operand[i + 1]) for i in range(0, len(operand), 2)]
    for operator, bound in pairs:
        if operator not in _COMPARISONS or not _is_pattern_number(bound):
            raise ValueError(f"'numeric' needs an operator of {list(_COMPARISONS)} and a number")
    if len(pairs) == 2:
        (low_op, low), (high_op, high) = pairs
        if low_op not in _LOWER_BOUNDS or high_op not in _UPPER_BOUNDS:
            raise ValueError("a 'numeric' range is a lower bound (>, >=) then an upper (<, <=)")
        if _number_value(low) >= _number_value(high):
            raise ValueError("a 'numeric' range needs its lower bound below its upper bound")
    tests = [(_COMPARISONS[op], _number_value(bound)) for op, bound in pairs]
    return lambda value: (
        _is_number(value) and all(compare(float(value), bound) for compare, bound in tests)
    )


def _anything_but(operand: Any) -> LeafTest:
    excluded: list[LeafTest]
    if isinstance(operand, dict):
        if len(operand) != 1:
            raise ValueError("'anything-but' takes one of prefix, suffix, equals-ignore-case")
        [(operator, inner)] = operand.items()
        if operator in ("prefix", "suffix"):
            excluded = [_affix(operator, _string_operand(operator, inner))]
        elif operator == "equals-ignore-case":
            values = inner if isinstance(inner, list) else [inner]
            if not values:
                raise ValueError("'anything-but' needs at least one value")
            excluded = [_ignore_case(value) for value in values]
        else:
            raise ValueError(f"'anything-but' does not support {operator!r}")
    else:
        values = operand if isinstance(operand, list) else [operand]
        if not values:
            raise ValueError("'anything-but' needs at least one value")
        for value in values:
            if not (isinstance(value, str) or _is_pattern_number(value)):
                raise ValueError("'anything-but' takes strings or numbers")
        excluded = [_exact(value) for value in values]
    return lambda value: not any(test(value) for test in excluded)


def _operator(rule: dict[str, Any]) -> LeafTest | bool:
    """A leaf test, or the bool of an `exists` rule (which is about the field, not a value)."""
    if len(rule) != 1:
        raise ValueError(f"a rule object has exactly one operator, got {sorted(rule)}")
    [(operator, operand)] = rule.items()
    if operator == "exists":
        if not isinstance(operand, bool):
            raise ValueError("'exists' takes true or false")
        return operand
    if operator in ("prefix", "suffix"):
        return _affix(operator, operand)
    if operator == "equals-ignore-case":
        return _ignore_case(operand)
    if operator == "anything-but":
        return _anything_but(operand)
    if operator == "numeric":
        return _numeric(operand)
    raise ValueError(
        f"unsupported operator in a filter pattern: {operator!r} (supported: {_OPERATORS})"
    )


@dataclass(frozen=True)
class _Leaf:
    """A field's rule list: OR across its rules."""

    tests: tuple[LeafTest, ...]
    exists: frozenset[bool]  # the `exists` rules in the list, if any

    def matches(self, node: Any) -> bool:
        values = list(_leaf_values(node))
        if values and any(test(value) for value in values for test in self.tests):
            return True
        return (bool(values) in self.exists) if self.exists else False


@dataclass(frozen=True)
class Pattern:
    """A parsed pattern: fields that must all match, and `$or` groups of alternatives."""

    fields: tuple[tuple[str, _Leaf | Pattern], ...]
    alternatives: tuple[tuple[Pattern, ...], ...] = ()

    def matches(self, node: Any) -> bool:
        """Whether an event (or, nested, the object at this pattern's path) matches."""
        if isinstance(node, list):
            # Fields under an array of objects match within one element, as event-ruler does.
            return any(self.matches(element) for element in node if isinstance(element, dict))
        event = node if isinstance(node, dict) else {}
        for name, rule in self.fields:
            if not rule.matches(event.get(name, _MISSING)):
                return False
        return all(any(option.matches(event) for option in group) for group in self.alternatives)


_MISSING: Any = object()


def _leaf_values(node: Any) -> Iterator[Any]:
    """The leaf values at a path: a scalar, or the scalars of an array (objects are not)."""
    if node is _MISSING or isinstance(node, dict):
        return
    if isinstance(node, list):
        for element in node:
            yield from _leaf_values(element)
        return
    yield node


def _compile_leaf(rules: list[Any]) -> _Leaf:
    if not rules:
        raise ValueError("a field's rules must be a non-empty array")
    tests: list[LeafTest] = []
    exists: set[bool] = set()
    for rule in rules:
        if isinstance(rule, dict):
            compiled = _operator(rule)
            if isinstance(compiled, bool):
                exists.add(compiled)
            else:
                tests.append(compiled)
        elif isinstance(rule, list):
            raise ValueError("a field's rules cannot nest arrays")
        else:
            tests.append(_exact(rule))
    return _Leaf(tuple(tests), frozenset(exists))


def compile_pattern(pattern: dict[str, Any]) -> Pattern:
    """Parse a pattern object; ValueError for anything Lambda's filter syntax does not have."""
    if not isinstance(pattern, dict) or not pattern:
        raise ValueError("a filter pattern is a non-empty JSON object")
    fields: list[tuple[str, _Leaf | Pattern]] = []
    alternatives: list[tuple[Pattern, ...]] = []
    for name, value in pattern.items():
        if name == "$or":
            if not isinstance(value, list) or len(value) < 2:
                raise ValueError("'$or' takes an array of at least two patterns")
            alternatives.append(tuple(compile_pattern(option) for option in value))
        elif isinstance(value, dict):
            fields.append((name, compile_pattern(value)))
        elif isinstance(value, list):
            fields.append((name, _compile_leaf(value)))
        else:
            raise ValueError(f"field {name!r}: a pattern value is an array of rules or an object")
    return Pattern(tuple(fields), tuple(alternatives))


@lru_cache(maxsize=256)
def parse_pattern(text: str) -> Pattern:
    """Parse a FilterCriteria `Pattern` string (numbers keep their JSON text)."""
    try:
        document = json.loads(text, parse_float=_JsonNumber, parse_int=_JsonNumber)
    except json.JSONDecodeError as exc:
        raise ValueError(f"a filter pattern is not valid JSON: {exc.msg}") from exc
    return compile_pattern(document)


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether `event` matches one pattern object (parsed and validated first)."""
    return compile_pattern(pattern).matches(event)


def passes(filters: Iterable[str], record: dict[str, Any]) -> bool:
    """Lambda's FilterCriteria: a record passes when any pattern matches (no filters: all)."""
    patterns = [parse_pattern(text) for text in filters]
    if not patterns:
        return True
    return any(pattern.matches(record) for pattern in patterns)
