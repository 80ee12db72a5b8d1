"""Turning domain results into HTTP responses (bodies, ETag) and errors into the error body."""

from __future__ import annotations

from typing import TypeVar

from aws_lambda_powertools.event_handler import Response, content_types

from memkit.errors import FieldProblem
from memkit.models.api import ErrorBody, FieldError, ProfileView, ScratchpadView
from memkit.models.domain import Profile
from memkit.service.scratchpad import ScratchpadResult

ModelT = TypeVar("ModelT")


def field_errors(problems: list[FieldProblem]) -> list[FieldError]:
    return [FieldError(field=p.field, reason=p.reason) for p in problems]


def error_response(
    status: int, code: str, detail: str, problems: list[FieldProblem] | None = None
) -> Response[str]:
    body = ErrorBody(detail=detail, code=code, errors=field_errors(problems or []))
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump_json(),
    )


def with_etag(body: ModelT, version: int, status: int = 200) -> Response[ModelT]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body,
        headers={"ETag": f'"{version}"'},
    )


def profile_view(profile: Profile) -> ProfileView:
    return ProfileView(
        name=profile.name,
        scope=profile.scope,
        format=profile.pad_format,
        template=profile.template,
        json_schema=profile.json_schema,
        array_merge=profile.array_merge,
        read_only=profile.read_only,
        max_tokens=profile.max_tokens,
        version=profile.version,
        updated_at=profile.updated_at,
        builtin=profile.builtin,
    )


def profile_response(profile: Profile) -> Response[ProfileView]:
    return with_etag(profile_view(profile), profile.version)


def scratchpad_view(result: ScratchpadResult) -> ScratchpadView:
    state, profile = result.state, result.profile
    return ScratchpadView(
        session_id=state.ref.session_id,
        user_id=state.user_id,
        namespace=state.ref.owner.namespace,
        profile=profile.name,
        scope=state.scope,
        format=profile.pad_format,
        content=result.content,
        version=result.version,
        template=profile.template,
        json_schema=profile.json_schema,
        read_only=profile.read_only,
        tokens=result.tokens,
        max_tokens=profile.max_tokens,
        updated_at=result.updated_at,
        problems=field_errors(result.problems),
    )


def scratchpad_response(result: ScratchpadResult) -> Response[ScratchpadView]:
    return with_etag(scratchpad_view(result), result.version)
