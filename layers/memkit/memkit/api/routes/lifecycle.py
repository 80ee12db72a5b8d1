"""Memory over time: forgetting (AMS), compaction, and the scheduled lifecycle policy of a
namespace (memkit.jobs.forget, .compact, .policies)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import caller_of, operations_of
from memkit.api.params import NamespaceQuery, SessionIdQuery, UserIdQuery
from memkit.api.responses import documented_errors
from memkit.errors import FieldProblem, ValidationFailed
from memkit.models.api import Status
from memkit.models.domain import Id
from memkit.models.lifecycle import (
    DEFAULT_NEAR_DISTANCE,
    MAX_SCAN,
    CompactRequest,
    CompactResult,
    ForgetRequest,
    ForgetResult,
    LifecyclePolicy,
    LifecyclePolicyView,
)

router = APIGatewayHttpRouter()
TAGS = ["lifecycle"]
MAX_COMPACT = 1_000

NamespacePath = Annotated[Id, Path()]
# Each route keeps AMS's default: forgetting is a dry run unless told otherwise, compaction
# (AMS has no dry run there) merges unless told otherwise.
ForgetDryRun = Annotated[
    bool | None, Query(description="report what would happen, change nothing (default: true)")
]
CompactDryRun = Annotated[
    bool | None,
    Query(description="report what would merge, change nothing (default: false, as AMS)"),
]


def chosen_dry_run(query: bool | None, body: bool | None, default: bool) -> bool:
    """The dry_run of a request that may give it in the query, the body, both (they must
    agree) or neither (the route's default, AMS's)."""
    if query is not None and body is not None and query != body:
        raise ValidationFailed(
            "dry_run differs between query and body",
            [FieldProblem("dry_run", "query and body differ")],
        )
    given = query if query is not None else body
    return default if given is None else given


@router.post(
    "/v1/long-term-memory/forget",
    tags=TAGS,
    summary="Forget long-term memories by age, inactivity, budget and type; a dry run "
    "unless dry_run=false (AMS)",
    responses=documented_errors(),
)
def forget_memories(
    body: Annotated[ForgetRequest, Body()],
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    session_id: SessionIdQuery = None,
    limit: Annotated[int, Query(ge=1, le=MAX_SCAN, description="records scanned")] = 1000,
    dry_run: ForgetDryRun = None,
) -> ForgetResult:
    return operations_of(router).upkeep.forget(
        caller_of(router),
        body.policy,
        pinned_ids=body.pinned_ids or (),
        limit=limit,
        dry_run=chosen_dry_run(dry_run, body.dry_run, default=True),
        namespace=namespace,
        user_id=user_id,
        session_id=session_id,
    )


@router.post(
    "/v1/long-term-memory/compact",
    tags=TAGS,
    summary="Merge duplicate long-term memories (exact: into the oldest; near: when the "
    "model confirms, else flagged), as AMS does; dry_run=true only reports",
    responses=documented_errors(),
)
def compact_memories(
    body: Annotated[CompactRequest | None, Body()] = None,
    namespace: NamespaceQuery = None,
    user_id: UserIdQuery = None,
    limit: Annotated[
        int,
        Query(
            ge=1,
            le=MAX_COMPACT,
            description="records scanned (with near_duplicates, each costs a vector search)",
        ),
    ] = 50,
    dry_run: CompactDryRun = None,
    near_duplicates: Annotated[
        bool, Query(description="also look for near duplicates (one vector search a record)")
    ] = True,
    distance_threshold: Annotated[
        float,
        Query(ge=0, le=2, allow_inf_nan=False, description="how close a near duplicate is"),
    ] = DEFAULT_NEAR_DISTANCE,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> CompactResult:
    caller = caller_of(router)
    chosen = chosen_dry_run(dry_run, body.dry_run if body else None, default=False)
    return operations_of(router).upkeep.compact(
        caller,
        limit=limit,
        dry_run=chosen,
        near_duplicates=near_duplicates,
        distance_threshold=distance_threshold,
        cursor=cursor,
        namespace=namespace,
        user_id=user_id,
    )


@router.put(
    "/v1/namespaces/<namespace>/lifecycle",
    tags=TAGS,
    summary="Set what the scheduled run does to the namespace's long-term memories",
    responses=documented_errors(),
)
def put_lifecycle_policy(
    namespace: NamespacePath, body: Annotated[LifecyclePolicy, Body()]
) -> LifecyclePolicyView:
    return operations_of(router).upkeep.put_policy(caller_of(router), namespace, body)


@router.get(
    "/v1/namespaces/<namespace>/lifecycle",
    tags=TAGS,
    summary="Read the namespace's lifecycle policy",
    responses=documented_errors(404),
)
def get_lifecycle_policy(namespace: NamespacePath) -> LifecyclePolicyView:
    return operations_of(router).upkeep.get_policy(caller_of(router), namespace)


@router.delete(
    "/v1/namespaces/<namespace>/lifecycle",
    tags=TAGS,
    summary="Remove the namespace's lifecycle policy (the scheduled run leaves it alone)",
    responses=documented_errors(404),
)
def delete_lifecycle_policy(namespace: NamespacePath) -> Status:
    operations_of(router).upkeep.delete_policy(caller_of(router), namespace)
    return Status()
