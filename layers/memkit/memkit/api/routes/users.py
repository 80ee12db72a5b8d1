"""A user's full deletion (DELETE /v1/users/{user_id}) and the jobs that finish one in the
background (GET /v1/jobs/{job_id}). The user's scratchpad routes are in scratchpad.py."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import caller_of, operations_of
from memkit.api.params import NamespaceQuery, UserIdPath
from memkit.api.responses import documented_errors
from memkit.ids import ID_PATTERN
from memkit.models.users import (
    JobView,
    UserDeleted,
    UserDeletionRunning,
    deleted_counts,
    job_view,
)

router = APIGatewayHttpRouter()
TAGS = ["lifecycle"]

# Jobs are named by memkit (ULIDs); the pattern only keeps a path parameter an id.
JobId = Annotated[str, Path(min_length=1, max_length=64, pattern=ID_PATTERN)]


@router.delete(
    "/v1/users/<user_id>",
    tags=TAGS,
    summary="Delete everything of a user in a namespace: sessions, scratchpads, records, "
    "vectors. 200 when done; 202 with a job to poll when it takes longer",
    responses={
        **documented_errors(403),
        200: {
            "description": "Done: nothing of the user is left in the table or the index. "
            "Follow-up sweeps then delete what is written for the user in the namespace over "
            "the next minutes (docs/lifecycle.md)",
            "content": {content_types.APPLICATION_JSON: {"model": UserDeleted}},
        },
        202: {
            "description": "Still running: poll the job named in `Location`",
            "content": {content_types.APPLICATION_JSON: {"model": UserDeletionRunning}},
        },
    },
)
def delete_user(
    user_id: UserIdPath,
    namespace: NamespaceQuery = None,
) -> Response[UserDeleted | UserDeletionRunning]:
    outcome = operations_of(router).upkeep.delete_user(caller_of(router), user_id, namespace)
    if outcome.job is None:
        return Response(
            status_code=200,
            content_type=content_types.APPLICATION_JSON,
            body=UserDeleted(deleted=deleted_counts(outcome.counts)),
        )
    job_id = outcome.job.job_id
    return Response(
        status_code=202,
        content_type=content_types.APPLICATION_JSON,
        body=UserDeletionRunning(job_id=job_id),
        headers={"Location": f"/v1/jobs/{job_id}"},
    )


@router.get(
    "/v1/jobs/<job_id>",
    tags=TAGS,
    summary="A background job's status and counts (a user's or an AgentCore memory's deletion)",
    responses=documented_errors(404),
)
def get_job(job_id: JobId) -> JobView:
    return job_view(operations_of(router).upkeep.job(caller_of(router), job_id))
