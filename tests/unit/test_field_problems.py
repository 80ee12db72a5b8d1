"""pydantic's errors as field problems at the client's own paths (memkit.models.problems), for
every shape a model can take: unions of scalars, of models, discriminated unions (also inside
a union), dicts with constrained keys, validators, aliases, recursion."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from memkit.errors import FieldProblem
from memkit.models.problems import field_problems


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    tricks: list[int]


Pet = Annotated[Cat | Dog, Field(discriminator="kind")]


def _trimmed(value: str) -> str:
    return value.strip()


class Owner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    filter: dict[Literal["eq", "ne"], Any] | Annotated[str, AfterValidator(_trimmed)] | None = None
    pet: Pet | None = None
    pet_or_name: Pet | str | None = None
    either: Cat | Dog | None = None
    friends: list[Owner] | str | None = None
    by_name: dict[str, Cat] | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    delegate: bool | Cat | None = None

    @field_validator("delegate", mode="wrap")
    @classmethod
    def _delegate(cls, value: Any, handler: Any) -> Any:
        # A validator that validates a member itself: its errors carry no member's tag.
        return value if value is None or isinstance(value, bool) else Cat.model_validate(value)


def _problems(body: dict[str, Any]) -> list[FieldProblem]:
    with pytest.raises(ValidationError) as raised:
        Owner.model_validate({"name": "ada", **body})
    return field_problems(raised.value.errors(), Owner)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"filter": {"like": 1}},
            [
                FieldProblem(
                    "filter.like", "'like' is not one of the keys allowed here: 'eq' or 'ne'"
                )
            ],
        ),
        (
            {"filter": 5},
            [FieldProblem("filter", "Input should be a valid dictionary or a valid string")],
        ),
        (
            {"pet": {"kind": "dog", "tricks": ["sit"]}},
            [
                FieldProblem(
                    "pet.tricks.0",
                    "Input should be a valid integer, unable to parse string as an integer",
                )
            ],
        ),
        (
            {"pet_or_name": {"kind": "cat", "lives": "nine"}},
            [
                FieldProblem(
                    "pet_or_name.lives",
                    "Input should be a valid integer, unable to parse string as an integer",
                )
            ],
        ),
        (
            {"friends": [{"name": "bo", "filter": {"near": 1}}]},
            [
                FieldProblem(
                    "friends.0.filter.near",
                    "'near' is not one of the keys allowed here: 'eq' or 'ne'",
                )
            ],
        ),
        (
            {"by_name": {"tom.and[jerry]": {"kind": "cat", "lives": []}}},
            [FieldProblem("by_name.tom.and[jerry].lives", "Input should be a valid integer")],
        ),
        ({"schema": 5}, [FieldProblem("schema", "Input should be a valid dictionary")]),
        ({"delegate": {"kind": "cat"}}, [FieldProblem("delegate.lives", "Field required")]),
        ({"colour": "red"}, [FieldProblem("colour", "Extra inputs are not permitted")]),
    ],
    ids=[
        "unknown key of a filter map",
        "a value no member takes",
        "inside a discriminated union",
        "a discriminated union inside a union",
        "recursion through a list",
        "a dict key is the client's, whatever its text",
        "an alias",
        "a validator that validates a member itself",
        "an unknown field",
    ],
)
def test_each_problem_is_at_the_path_the_client_wrote(
    body: dict[str, Any], expected: list[FieldProblem]
) -> None:
    assert _problems(body) == expected


def test_a_union_of_objects_reports_what_each_object_misses() -> None:
    # Both members take an object: both say what is wrong inside it, at the client's paths.
    problems = _problems({"either": {"kind": "dog", "tricks": ["x"]}})

    assert [p.field for p in problems] == ["either.kind", "either.lives", "either.tricks.0"]


def test_a_value_error_reads_as_the_validators_own_words() -> None:
    class Note(BaseModel):
        text: str

        @field_validator("text")
        @classmethod
        def _said(cls, value: str) -> str:
            if not value.strip():
                raise ValueError("must say something")
            return value

    with pytest.raises(ValidationError) as raised:
        Note.model_validate({"text": " "})

    assert field_problems(raised.value.errors(), Note, ("notes", 2)) == [
        FieldProblem("notes.2.text", "must say something")
    ]


def test_an_error_of_the_whole_value_is_the_body() -> None:
    with pytest.raises(ValidationError) as raised:
        Owner.model_validate(5)

    assert [p.field for p in field_problems(raised.value.errors(), Owner)] == ["body"]


def test_without_naming_keys_a_refused_key_is_neither_the_path_nor_the_reason() -> None:
    # An MCP tool's refusal never repeats what was sent, not even a key
    with pytest.raises(ValidationError) as raised:
        Owner.model_validate({"name": "ada", "filter": {"SECRET-KEY": 1}})

    problems = field_problems(raised.value.errors(), Owner, name_keys=False)

    assert problems == [
        FieldProblem("filter", "a key is not one of those allowed here: 'eq' or 'ne'")
    ]


def test_without_naming_keys_an_unknown_key_is_cut_from_the_path() -> None:
    # An MCP tool's refusal never repeats a key the client made up, even one a strict model
    # refuses as extra: the path ends at the object that has it
    with pytest.raises(ValidationError) as raised:
        Owner.model_validate({"name": "ada", "friends": [{"name": "bo", "SECRET-KEY": 1}]})

    problems = field_problems(raised.value.errors(), Owner, name_keys=False)

    assert problems == [FieldProblem("friends.0", "an unknown key")]


def test_without_naming_keys_a_value_under_a_key_the_client_chose_is_its_dict() -> None:
    with pytest.raises(ValidationError) as raised:
        Owner.model_validate(
            {"name": "ada", "by_name": {"SECRET-KEY": {"kind": "cat", "lives": "x"}}}
        )

    problems = field_problems(raised.value.errors(), Owner, name_keys=False)

    assert problems == [
        FieldProblem(
            "by_name",
            "a value: Input should be a valid integer, unable to parse string as an integer",
        )
    ]


def test_naming_keys_an_unknown_key_is_the_field() -> None:
    # The REST API names what the client sent, the key included
    with pytest.raises(ValidationError) as raised:
        Owner.model_validate({"name": "ada", "friends": [{"name": "bo", "extra": 1}]})

    problems = field_problems(raised.value.errors(), Owner)

    assert problems == [FieldProblem("friends.0.extra", "Extra inputs are not permitted")]
