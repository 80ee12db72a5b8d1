"""Agent integration: tool definitions for model APIs, and running the calls models make."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import owner_of, services_of
from memkit.api.params import NamespaceQuery, ProfileQuery, SessionIdQuery, UserIdQuery
from memkit.api.responses import documented_errors
from memkit.errors import FieldProblem, ValidationFailed
from memkit.models.api import ToolCall, ToolFailure, ToolSuccess, ToolsView
from memkit.models.domain import PadRef
from memkit.scratchpad.tools import ToolFormat

router = APIGatewayHttpRouter()
TAGS = ["agent tools"]


@router.get(
    "/v1/tools",
    tags=TAGS,
    summary="Tool definitions for openai, anthropic or bedrock",
    responses=documented_errors(403, 404),
)
def list_tools(
    format: Annotated[ToolFormat, Query()] = ToolFormat.OPENAI,
    session_id: SessionIdQuery = None,
    user_id: UserIdQuery = None,
    namespace: NamespaceQuery = None,
    profile: ProfileQuery = None,
) -> ToolsView:
    services = services_of(router)
    ref = PadRef(owner=owner_of(router, namespace, user_id), session_id=session_id, profile=profile)
    return ToolsView(format=format.value, tools=services.tools.definitions(ref, format))


@router.post(
    "/v1/tools/call",
    tags=TAGS,
    summary="Run a tool call a model made",
    responses=documented_errors(415),
)
def call_tool(call: Annotated[ToolCall, Body()]) -> ToolSuccess | ToolFailure:
    services = services_of(router)
    if call.session_id is None and call.user_id is None:
        raise ValidationFailed(
            "session_id or user_id is required",
            [FieldProblem("session_id", "name the session (or the user) the tool acts on")],
        )
    ref = PadRef(
        owner=owner_of(router, call.namespace, call.user_id),
        session_id=call.session_id,
        profile=call.profile,
    )
    outcome = services.tools.call(ref, call.name, call.arguments)
    return ToolFailure(**outcome) if "error" in outcome else ToolSuccess(**outcome)
