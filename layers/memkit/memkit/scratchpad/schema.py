"""JSON Schema checks with a real validator (jsonschema), imported on first use only.

The schema's own dialect is honoured (`$schema`); without one, Draft 2020-12.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from memkit.errors import FieldProblem

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

MAX_PROBLEMS = 20


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

    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = sorted(validator.iter_errors(content), key=lambda e: list(map(str, e.absolute_path)))
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
