"""The scratchpad, by session (/v1/working-memory/{session_id}/scratchpad) or by user
(/v1/users/{user_id}/scratchpad). GET, PUT (replace), PATCH (merge), DELETE (clear)."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import caller_of, one, operations_of
from memkit.api.params import (
    IfMatch,
    NamespaceQuery,
    ProfileQuery,
    SessionId,
    UserIdPath,
    UserIdQuery,
)
from memkit.api.responses import documented_errors, scratchpad_response
from memkit.app.scratchpads import PadName
from memkit.models.api import PromptView, ScratchpadView, ScratchpadWrite

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
) -> PadName:
    """The scratchpad a request names; scoping may come in the query or in the body."""
    named_user = one("user_id", user_id, body.user_id if body else None)
    named_namespace = one("namespace", namespace, body.namespace if body else None)
    return PadName(session_id, named_user, named_namespace, profile)


def _read(named: PadName, render: str | None) -> Response[ScratchpadView | PromptView]:
    scratchpads, caller = operations_of(router).scratchpads, caller_of(router)
    if render == "prompt":
        return Response(
            status_code=200,
            content_type="application/json",
            body=PromptView(prompt=scratchpads.prompt(caller, named)),
        )
    return scratchpad_response(scratchpads.get(caller, named))  # type: ignore[return-value]


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
    scratchpads = operations_of(router).scratchpads
    return scratchpad_response(scratchpads.replace(caller_of(router), ref, body.content, if_match))


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
    scratchpads = operations_of(router).scratchpads
    return scratchpad_response(scratchpads.patch(caller_of(router), ref, body.content, if_match))


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
    scratchpads = operations_of(router).scratchpads
    return scratchpad_response(scratchpads.clear(caller_of(router), ref, if_match))


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
    scratchpads = operations_of(router).scratchpads
    return scratchpad_response(scratchpads.replace(caller_of(router), ref, body.content, if_match))


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
    scratchpads = operations_of(router).scratchpads
    return scratchpad_response(scratchpads.patch(caller_of(router), ref, body.content, if_match))


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
    scratchpads = operations_of(router).scratchpads
    return scratchpad_response(scratchpads.clear(caller_of(router), ref, if_match))
