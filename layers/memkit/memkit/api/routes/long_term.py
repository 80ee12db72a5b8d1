"""Long-term memory (AMS): create, read, edit, delete and search records. Paths are
agent-memory-client's, slashes included (docs/ams-client.md §4.11-4.15)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import caller_of, operations_of
from memkit.api.responses import documented_errors
from memkit.models.domain import Id, StoredId
from memkit.models.memory import (
    Ack,
    CreatedAck,
    CreateMemories,
    MemoryEdit,
    MemoryHistoryView,
    MemoryRecordView,
    MemoryRestoration,
    MemoryResults,
    MemoryRetirement,
    SearchRequest,
)

router = APIGatewayHttpRouter()
TAGS = ["long-term memory"]
MemoryId = Annotated[Id, Path()]
OptimizeQuery = Annotated[
    bool,
    Query(description="agent-memory-client always sends it; memkit does not rewrite queries"),
]


# API Gateway routes /v1/long-term-memory/ to the route /v1/long-term-memory (a route path
# cannot end with a slash); the resolver matches paths exactly, so the function answers both.
@router.post("/v1/long-term-memory", include_in_schema=False)
@router.post(
    "/v1/long-term-memory/",
    tags=TAGS,
    summary="Create long-term memories; indexed a moment later (AMS)",
    responses=documented_errors(413),
)
def create_memories(body: Annotated[CreateMemories, Body()]) -> CreatedAck:
    return operations_of(router).memories.create(caller_of(router), body)


@router.post(
    "/v1/long-term-memory/search",
    tags=TAGS,
    summary="Search long-term memory by meaning, keywords or filters (AMS)",
    responses=documented_errors(429, 503),
)
def search_memories(
    body: Annotated[SearchRequest, Body()], optimize_query: OptimizeQuery = False
) -> MemoryResults:
    return operations_of(router).memories.search(caller_of(router), body)


@router.get(
    "/v1/long-term-memory/<memory_id>",
    tags=TAGS,
    summary="Read a long-term memory, with whether it is searchable yet (AMS)",
    responses=documented_errors(404),
)
def get_memory(memory_id: MemoryId) -> MemoryRecordView:
    return operations_of(router).memories.get(caller_of(router), memory_id)


@router.patch(
    "/v1/long-term-memory/<memory_id>",
    tags=TAGS,
    summary="Edit a long-term memory; a new text is embedded again (AMS)",
    responses=documented_errors(404, 409),
)
def edit_memory(memory_id: MemoryId, body: Annotated[MemoryEdit, Body()]) -> MemoryRecordView:
    return operations_of(router).memories.edit(caller_of(router), memory_id, body)


@router.delete(
    "/v1/long-term-memory",
    tags=TAGS,
    summary="Delete long-term memories by id; their vectors follow (AMS)",
    responses=documented_errors(),
)
def delete_memories(
    memory_ids: Annotated[
        list[StoredId] | None,
        Query(
            max_length=100,
            description="repeat the key for each id; also takes an id stored before the id "
            "rule (docs/api.md#ids), so such a record can still be deleted",
        ),
    ] = None,
    erase: Annotated[
        bool,
        Query(
            description="also remove their history (and what an earlier delete kept): "
            "nothing is left to restore"
        ),
    ] = False,
) -> Ack:
    return operations_of(router).memories.delete(caller_of(router), memory_ids or [], erase=erase)


@router.get(
    "/v1/long-term-memory/<memory_id>/history",
    tags=TAGS,
    summary="A long-term memory's versions, newest first: who changed what, when and how",
    responses=documented_errors(404),
)
def memory_history(
    memory_id: MemoryId,
    limit: Annotated[int, Query(ge=1, le=100, description="versions a page")] = 50,
    before: Annotated[
        int | None, Query(ge=0, description="versions older than this one (next_before)")
    ] = None,
) -> MemoryHistoryView:
    return operations_of(router).memories.history(
        caller_of(router), memory_id, limit=limit, before=before
    )


@router.post(
    "/v1/long-term-memory/<memory_id>/retire",
    tags=TAGS,
    summary="Mark a long-term memory as no longer true; it stays in its history",
    responses=documented_errors(404, 409),
)
def retire_memory(
    memory_id: MemoryId, body: Annotated[MemoryRetirement, Body()]
) -> MemoryRecordView:
    return operations_of(router).memories.retire(caller_of(router), memory_id, body)


@router.post(
    "/v1/long-term-memory/<memory_id>/restore",
    tags=TAGS,
    summary="Make an earlier version of a long-term memory current again (also after a delete)",
    responses=documented_errors(404, 409),
)
def restore_memory(
    memory_id: MemoryId, body: Annotated[MemoryRestoration, Body()]
) -> MemoryRecordView:
    return operations_of(router).memories.restore(caller_of(router), memory_id, body)
