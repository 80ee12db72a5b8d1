"""Sessions: the working-memory document of the Agent Memory Server API (AMS) and memkit's
append and message-log routes. Paths are agent-memory-client's, slashes included."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import caller_of, one, operations_of
from memkit.api.params import IfMatch, NamespaceQuery, SessionId, UserIdQuery
from memkit.api.responses import documented_errors, session_response
from memkit.app.views import message_view
from memkit.models.api import Status
from memkit.models.session import (
    MAX_WINDOW_TOKENS,
    AppendMessages,
    AppendView,
    MessagePage,
    SessionList,
    SessionPatch,
    SessionView,
    SessionWrite,
)

router = APIGatewayHttpRouter()
TAGS = ["sessions"]
PATH = "/v1/working-memory/<session_id>"

ModelName = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=256,
        description="trim the oldest messages to this model's context window and report "
        "the context percentages",
    ),
]
WindowMax = Annotated[
    int | None,
    Query(
        ge=1, le=MAX_WINDOW_TOKENS, description="a context window in tokens (wins over model_name)"
    ),
]
# On a write, the window also becomes the session's (as AMS summarises a PUT against it).
WriteModelName = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=256,
        description="the client's model: its context window becomes the session's, which "
        "background summarisation works against (kept until a write gives another)",
    ),
]
WriteWindowMax = Annotated[
    int | None,
    Query(
        ge=1,
        le=MAX_WINDOW_TOKENS,
        description="the session's context window in tokens (wins over model_name), which "
        "background summarisation works against (kept until a write gives another)",
    ),
]


# API Gateway routes /v1/working-memory to the same route (a route path cannot end with a
# slash); the resolver matches paths exactly, so the function answers both.
@router.get("/v1/working-memory", include_in_schema=False)
@router.get(
    "/v1/working-memory/",
    tags=TAGS,
    summary="List sessions, newest first (AMS)",
    responses=documented_errors(),
)
def list_sessions(
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> SessionList:
    sessions = operations_of(router).sessions
    # A caller that is not an admin lists its own user's sessions only.
    ids, total = sessions.list(
        caller_of(router), limit, offset, namespace=namespace, user_id=user_id
    )
    return SessionList(sessions=ids, total=total)


@router.get(
    PATH,
    tags=TAGS,
    summary="Read a session: its newest messages, memories, data and scratchpad (AMS)",
    responses=documented_errors(403, 404),
)
def get_session(
    session_id: SessionId,
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    recent_messages_limit: Annotated[
        int | None, Query(ge=1, le=100_000, description="keep only the newest N messages")
    ] = None,
    model_name: ModelName = None,
    context_window_max: WindowMax = None,
) -> Response[SessionView]:
    document = operations_of(router).sessions.get(
        caller_of(router),
        session_id,
        namespace=namespace,
        user_id=user_id,
        recent_messages_limit=recent_messages_limit,
        model_name=model_name,
        context_window_max=context_window_max,
    )
    return session_response(document)


@router.put(
    PATH,
    tags=TAGS,
    summary="Replace a session's document (AMS); creates the session",
    responses=documented_errors(403, 404, 409, 413, 415),
)
def put_session(
    session_id: SessionId,
    body: Annotated[SessionWrite, Body()],
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    model_name: WriteModelName = None,
    context_window_max: WriteWindowMax = None,
    if_match: IfMatch = None,
) -> Response[SessionView]:
    document = operations_of(router).sessions.put(
        caller_of(router),
        session_id,
        body,
        user_id=one("user_id", user_id, body.user_id),
        namespace=one("namespace", namespace, body.namespace),
        if_match=if_match,
        model_name=model_name,
        context_window_max=context_window_max,
    )
    return session_response(document)


@router.patch(
    PATH,
    tags=TAGS,
    summary="Change a session's fields without touching its messages",
    responses=documented_errors(403, 404, 409, 413, 415),
)
def patch_session(
    session_id: SessionId,
    body: Annotated[SessionPatch, Body()],
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    if_match: IfMatch = None,
) -> Response[SessionView]:
    document = operations_of(router).sessions.patch(
        caller_of(router),
        session_id,
        body,
        user_id=one("user_id", user_id, body.user_id),
        namespace=one("namespace", namespace, body.namespace),
        if_match=if_match,
    )
    return session_response(document)


@router.delete(
    PATH,
    tags=TAGS,
    summary="Delete a session and every item of it (AMS)",
    responses=documented_errors(403, 404),
)
def delete_session(
    session_id: SessionId,
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
) -> Status:
    sessions = operations_of(router).sessions
    sessions.delete(caller_of(router), session_id, namespace=namespace, user_id=user_id)
    return Status()


@router.post(
    f"{PATH}/messages",
    tags=TAGS,
    summary="Append messages (idempotent by message id); creates the session",
    responses=documented_errors(403, 404, 409, 413, 415, success=201),
)
def append_messages(
    session_id: SessionId,
    body: Annotated[AppendMessages, Body()],
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    model_name: WriteModelName = None,
    context_window_max: WriteWindowMax = None,
) -> Response[AppendView]:
    result = operations_of(router).sessions.append(
        caller_of(router),
        session_id,
        body,
        user_id=one("user_id", user_id, body.user_id),
        namespace=one("namespace", namespace, body.namespace),
        model_name=model_name,
        context_window_max=context_window_max,
    )
    view = AppendView(
        session_id=session_id,
        namespace=result.meta.namespace,
        created=result.created,
        appended=result.appended,
        already_stored=result.already_stored,
        pruned=result.pruned,
        message_count=result.meta.message_count,
        version=result.meta.version,
    )
    return Response(
        status_code=201,
        content_type="application/json",
        body=view,
        headers={"ETag": f'"{result.meta.version}"'},
    )


@router.get(
    f"{PATH}/messages",
    tags=TAGS,
    summary="Page through a session's message log",
    responses=documented_errors(403, 404),
)
def list_messages(
    session_id: SessionId,
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    limit: Annotated[int, Query(ge=1, le=1_000)] = 100,
    cursor: Annotated[
        str | None, Query(max_length=4_096, description="next_cursor of the previous page")
    ] = None,
    order: Annotated[Literal["asc", "desc"], Query(description="oldest or newest first")] = "asc",
    roles: Annotated[
        str | None,
        Query(max_length=1_000, description="only these roles, comma-separated: user,assistant"),
    ] = None,
) -> MessagePage:
    wanted = frozenset(r.strip() for r in roles.split(",") if r.strip()) if roles else None
    page = operations_of(router).sessions.messages(
        caller_of(router),
        session_id,
        limit,
        cursor,
        order == "asc",
        wanted or None,
        namespace=namespace,
        user_id=user_id,
    )
    return MessagePage(
        messages=[message_view(m) for m in page.messages], next_cursor=page.next_cursor
    )
