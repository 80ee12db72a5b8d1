"""Parameters shared by routes, with their validation (Powertools reads these annotations)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query

from memkit.models.domain import PROFILE_PATTERN, Id

SessionId = Annotated[Id, Path()]
UserIdPath = Annotated[Id, Path()]
ProfileNamePath = Annotated[str, Path(min_length=1, max_length=64, pattern=PROFILE_PATTERN)]
NamespaceQuery = Annotated[Id | None, Query(description='default: "default"')]
UserIdQuery = Annotated[Id | None, Query()]
SessionIdQuery = Annotated[Id | None, Query()]
ProfileQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=64,
        pattern=PROFILE_PATTERN,
        description='the profile to use when the session names none (default: "default")',
    ),
]
IfMatch = Annotated[
    str | None,
    Header(alias="if-match", description="the version from ETag; 409 if it changed"),
]
