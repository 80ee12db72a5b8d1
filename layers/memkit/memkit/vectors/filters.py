"""Search filters as data: one Condition per field and operator, all of them required.

The operators are the Agent Memory Server's (API.md) plus the ones agent-memory-client's
typed filters send (docs/ams-client.md §4.11): `in_` means `any`, `not_eq` means `ne`,
`not_in` and `none` mean "none of". A condition on a field a record does not have is false,
except the negative ones (`ne`, `none`), which it meets. Filters never widen: an operator this
module does not know is refused where conditions are built, never ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

ALIASES = {"in_": "any", "not_eq": "ne", "not_in": "none"}
TEXT_OPERATORS = frozenset({"eq", "ne", "any", "all", "none", "startswith"})
RANGE_OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "between"})
# memkit's own (no client sends them): `exists` (a bool: whether the field has a value) and
# `or` (field "", value: groups of conditions, any group all of whose conditions hold).
OWN_OPERATORS = frozenset({"exists", "or"})


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        op = ALIASES.get(self.op, self.op)
        object.__setattr__(self, "op", op)
        if op not in TEXT_OPERATORS | RANGE_OPERATORS | OWN_OPERATORS:
            raise ValueError(f"unknown filter operator {self.op!r}")

    def parts(self) -> Iterator[Condition]:
        """This condition and, for an `or`, every condition inside it."""
        yield self
        if self.op == "or":
            for group in self.value:
                for condition in group:
                    yield from condition.parts()


def either(*groups: Sequence[Condition]) -> Condition:
    """A condition that holds when every condition of one of `groups` does."""
    return Condition("", "or", tuple(tuple(group) for group in groups))


def absent(field: str) -> Condition:
    """A condition that holds when `field` has no value (a doc written before it existed)."""
    return Condition(field, "exists", False)


def _values(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple | set | frozenset) else [value]


def _number_test(op: str, have: float, want: Any) -> bool:
    if op == "between":
        low, high = want
        return bool(low <= have <= high)
    tests: dict[str, bool] = {
        "eq": have == want,
        "ne": have != want,
        "gt": have > want,
        "gte": have >= want,
        "lt": have < want,
        "lte": have <= want,
    }
    return tests[op]


def meets(fields: dict[str, Any], condition: Condition) -> bool:
    """Whether a record's fields meet one condition (lists: topics, entities)."""
    op, want = condition.op, condition.value
    if op == "or":
        return any(meets_all(fields, group) for group in want)
    present = _values(fields.get(condition.field))
    if op == "exists":
        return bool(present) == bool(want)
    if op in ("ne", "none"):
        excluded = set(_values(want))
        return not excluded.intersection(present)
    if not present:
        return False
    if op in RANGE_OPERATORS - {"eq"} or (
        op == "eq" and isinstance(want, int | float) and not isinstance(want, bool)
    ):
        return any(
            isinstance(have, int | float) and _number_test(op, have, want) for have in present
        )
    if op == "eq":
        return want in present
    if op == "any":
        return bool(set(_values(want)).intersection(present))
    if op == "all":
        return set(_values(want)).issubset(present)
    # startswith
    return any(isinstance(have, str) and have.startswith(str(want)) for have in present)


def meets_all(fields: dict[str, Any], conditions: Iterable[Condition]) -> bool:
    return all(meets(fields, condition) for condition in conditions)


def conditions_from(filters: dict[str, dict[str, Any]]) -> Sequence[Condition]:
    """Conditions from a request's filter objects: {"topics": {"any": ["tea"]}, ...}."""
    return [
        Condition(name, op, value)
        for name, operators in filters.items()
        for op, value in operators.items()
    ]
