"""The scratchpad, by session (/v1/working-memory/{session_id}/scratchpad) or by user
(/v1/users/{user_id}/scratchpad). GET, PUT (replace), PATCH (merge), DELETE (clear)."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import owner_of, services_of
from memkit.api.params import (
    IfMatch,
    NamespaceQuery,
    ProfileQuery,
    SessionId,
    UserIdPath,
    UserIdQuery,
)
from memkit.api.responses import documented_errors, scratchpad_response
from memkit.models.api import PromptView, ScratchpadView, ScratchpadWrite
from memkit.models.domain import PadRef

router = APIGatewayHttpRouter()
TAGS = ["scratchpad"]
SESSION_PATH = "/v1/working-memory/<session_id>/scratchpad"
USER_PATH = "/v1/users/<user_id>/scratchpad"
Render = Annotated[
    Literal["prompt"] | None,
    Query(description="prompt: the <working_memory> block for a system prompt"),
]


def _ref(
    namespace: str | None,
    user_id: str | None,
    profile: str | None,
    body: ScratchpadWrite | None = None,
    session_id: str | None = None,
) -> PadRef:
    """The scratchpad a request names; scoping may come in the query or in the body."""
    owner = owner_of(
        router, namespace, user_id, body.namespace if body else None, body.user_id if body else None
    )
    return PadRef(owner=owner, session_id=session_id, profile=profile)


def _read(ref: PadRef, render: str | None) -> Response[ScratchpadView | PromptView]:
    scratchpads = services_of(router).scratchpads
    if render == "prompt":
        return Response(
            status_code=200,
            content_type="application/json",
            body=PromptView(prompt=scratchpads.prompt(ref)),
        )
    return scratchpad_response(scratchpads.get(ref))  # type: ignore[return-value]


@router.get(
    SESSION_PATH,
    tags=TAGS,
    summary="Read a session's scratchpad",
    responses=documented_errors(403, 404),
)
def get_session_pad(
    session_id: SessionId,
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    profile: ProfileQuery = None,
    render: Render = None,
) -> Response[ScratchpadView | PromptView]:
    return _read(_ref(namespace, user_id, profile, session_id=session_id), render)


@router.put(
    SESSION_PATH,
    tags=TAGS,
    summary="Replace a session's scratchpad",
    responses=documented_errors(403, 404, 409, 413, 415),
)
def put_session_pad(
    session_id: SessionId,
    body: Annotated[ScratchpadWrite, Body()],
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    profile: ProfileQuery = None,
    if_match: IfMatch = None,
) -> Response[ScratchpadView]:
    ref = _ref(namespace, user_id, profile, body, session_id)
    return scratchpad_response(services_of(router).scratchpads.replace(ref, body.content, if_match))


@router.patch(
    SESSION_PATH,
    tags=TAGS,
    summary="Merge into a session's scratchpad",
    responses=documented_errors(403, 404, 409, 413, 415),
)
def patch_session_pad(
    session_id: SessionId,
    body: Annotated[ScratchpadWrite, Body()],
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    profile: ProfileQuery = None,
    if_match: IfMatch = None,
) -> Response[ScratchpadView]:
    ref = _ref(namespace, user_id, profile, body, session_id)
    return scratchpad_response(services_of(router).scratchpads.patch(ref, body.content, if_match))


@router.delete(
    SESSION_PATH,
    tags=TAGS,
    summary="Clear a session's scratchpad",
    responses=documented_errors(403, 404, 409),
)
def delete_session_pad(
    session_id: SessionId,
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    profile: ProfileQuery = None,
    if_match: IfMatch = None,
) -> Response[ScratchpadView]:
    ref = _ref(namespace, user_id, profile, session_id=session_id)
    return scratchpad_response(services_of(router).scratchpads.clear(ref, if_match))


@router.get(
    USER_PATH,
    tags=TAGS,
    summary="Read a user's scratchpad (user-scoped profiles)",
    responses=documented_errors(404),
)
def get_user_pad(
    user_id: UserIdPath,
    namespace: NamespaceQuery = None,
    profile: ProfileQuery = None,
    render: Render = None,
) -> Response[ScratchpadView | PromptView]:
    return _read(_ref(namespace, user_id, profile), render)


@router.put(
    USER_PATH,
    tags=TAGS,
    summary="Replace a user's scratchpad",
    responses=documented_errors(403, 404, 409, 413, 415),
)
def put_user_pad(
    user_id: UserIdPath,
    body: Annotated[ScratchpadWrite, Body()],
    namespace: NamespaceQuery = None,
    profile: ProfileQuery = None,
    if_match: IfMatch = None,
) -> Response[ScratchpadView]:
    ref = _ref(namespace, user_id, profile, body)
    return scratchpad_response(services_of(router).scratchpads.replace(ref, body.content, if_match))


@router.patch(
    USER_PATH,
    tags=TAGS,
    summary="Merge into a user's scratchpad",
    responses=documented_errors(403, 404, 409, 413, 415),
)
def patch_user_pad(
    user_id: UserIdPath,
    body: Annotated[ScratchpadWrite, Body()],
    namespace: NamespaceQuery = None,
    profile: ProfileQuery = None,
    if_match: IfMatch = None,
) -> Response[ScratchpadView]:
    ref = _ref(namespace, user_id, profile, body)
    return scratchpad_response(services_of(router).scratchpads.patch(ref, body.content, if_match))


@router.delete(
    USER_PATH,
    tags=TAGS,
    summary="Clear a user's scratchpad",
    responses=documented_errors(403, 404, 409),
)
def delete_user_pad(
    user_id: UserIdPath,
    namespace: NamespaceQuery = None,
    profile: ProfileQuery = None,
    if_match: IfMatch = None,
) -> Response[ScratchpadView]:
    ref = _ref(namespace, user_id, profile)
    return scratchpad_response(services_of(router).scratchpads.clear(ref, if_match))
