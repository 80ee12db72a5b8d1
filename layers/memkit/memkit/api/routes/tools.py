"""Agent integration: tool definitions for model APIs, and running the calls models make."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import caller_of, operations_of
from memkit.api.params import NamespaceQuery, ProfileQuery, SessionIdQuery, UserIdQuery
from memkit.api.responses import documented_errors
from memkit.app.scratchpads import PadName
from memkit.errors import FieldProblem, ValidationFailed
from memkit.models.api import ToolCall, ToolFailure, ToolSuccess, ToolsView
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
    named = PadName(session_id, user_id, namespace, profile)
    tools = operations_of(router).scratchpads.tool_definitions(caller_of(router), named, format)
    return ToolsView(format=format.value, tools=tools)


@router.post(
    "/v1/tools/call",
    tags=TAGS,
    summary="Run a tool call a model made",
    responses=documented_errors(415),
)
def call_tool(call: Annotated[ToolCall, Body()]) -> ToolSuccess | ToolFailure:
    if call.session_id is None and call.user_id is None:
        raise ValidationFailed(
            "session_id or user_id is required",
            [FieldProblem("session_id", "name the session (or the user) the tool acts on")],
        )
    named = PadName(call.session_id, call.user_id, call.namespace, call.profile)
    scratchpads = operations_of(router).scratchpads
    outcome = scratchpads.call_tool(caller_of(router), named, call.name, call.arguments)
    return ToolFailure(**outcome) if "error" in outcome else ToolSuccess(**outcome)
