"""/v1/profiles: how scratchpads behave (scope, format, template or schema, limits)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.api.context import caller_of, operations_of
from memkit.api.params import IfMatch, NamespaceQuery, ProfileNamePath
from memkit.api.responses import documented_errors, profile_response, profile_view
from memkit.models.api import ProfileList, ProfileView, Status
from memkit.models.domain import ProfileSpec

router = APIGatewayHttpRouter()
TAGS = ["profiles"]


@router.put(
    "/v1/profiles/<name>",
    tags=TAGS,
    summary="Create or replace a profile",
    responses=documented_errors(409, 415),
)
def put_profile(
    name: ProfileNamePath,
    spec: Annotated[ProfileSpec, Body()],
    namespace: NamespaceQuery = None,
    if_match: IfMatch = None,
) -> Response[ProfileView]:
    profiles = operations_of(router).profiles
    profile = profiles.put(caller_of(router), name, spec, if_match, namespace)
    return profile_response(profile)


@router.get(
    "/v1/profiles/<name>",
    tags=TAGS,
    summary="Read a profile",
    responses=documented_errors(404),
)
def get_profile(name: ProfileNamePath, namespace: NamespaceQuery = None) -> Response[ProfileView]:
    profiles = operations_of(router).profiles
    return profile_response(profiles.get(caller_of(router), name, namespace))


@router.get(
    "/v1/profiles",
    tags=TAGS,
    summary="List the profiles of a namespace",
    responses=documented_errors(),
)
def list_profiles(
    namespace: NamespaceQuery = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> ProfileList:
    page = operations_of(router).profiles.list(caller_of(router), limit, cursor, namespace)
    return ProfileList(
        profiles=[profile_view(p) for p in page.profiles], next_cursor=page.next_cursor
    )


@router.delete(
    "/v1/profiles/<name>",
    tags=TAGS,
    summary="Delete a profile",
    responses=documented_errors(404, 409),
)
def delete_profile(
    name: ProfileNamePath, namespace: NamespaceQuery = None, if_match: IfMatch = None
) -> Status:
    operations_of(router).profiles.delete(caller_of(router), name, if_match, namespace)
    return Status()
