"""Parameters shared by routes, with their validation (Powertools reads these annotations)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query

from memkit.models.domain import ID_PATTERN, PROFILE_PATTERN

SessionId = Annotated[str, Path(min_length=1, max_length=256, pattern=ID_PATTERN)]
UserIdPath = Annotated[str, Path(min_length=1, max_length=256, pattern=ID_PATTERN)]
ProfileNamePath = Annotated[str, Path(min_length=1, max_length=64, pattern=PROFILE_PATTERN)]
NamespaceQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=256, pattern=ID_PATTERN, description='default: "default"'),
]
UserIdQuery = Annotated[str | None, Query(min_length=1, max_length=256, pattern=ID_PATTERN)]
SessionIdQuery = Annotated[str | None, Query(min_length=1, max_length=256, pattern=ID_PATTERN)]
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
