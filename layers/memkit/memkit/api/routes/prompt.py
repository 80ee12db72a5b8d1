"""Prompt hydration (AMS's POST /v1/memory/prompt, extended): the messages for a model's next
turn, from the session, its scratchpad, recall and long-term memory, within a token budget."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import caller_of, operations_of
from memkit.api.responses import documented_errors
from memkit.models.prompt import HydratedPrompt, PromptRequest

router = APIGatewayHttpRouter()
TAGS = ["prompt hydration"]
OptimizeQuery = Annotated[
    bool,
    Query(description="agent-memory-client always sends it; memkit does not rewrite queries"),
]


@router.post(
    "/v1/memory/prompt",
    tags=TAGS,
    summary="Hydrate a prompt: summary, scratchpad, recalled and recent turns, long-term "
    "memories, then the query, within a token budget (AMS)",
    responses=documented_errors(403),
)
def hydrate_prompt(
    body: Annotated[PromptRequest, Body()], optimize_query: OptimizeQuery = False
) -> HydratedPrompt:
    return operations_of(router).memories.prompt(caller_of(router), body)
