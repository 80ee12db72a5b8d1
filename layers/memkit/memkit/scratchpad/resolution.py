"""Which profile and which owner a scratchpad request resolves to. Pure rules, one place.

Every Store applies these after fetching what a request names, so the rules cannot drift
between DynamoDB and the fakes.
"""

from __future__ import annotations

from memkit.errors import FieldProblem, Forbidden, NotFound, ValidationFailed
from memkit.models.domain import (
    DEFAULT_PROFILE,
    PadRef,
    Profile,
    Scope,
    SessionStub,
    builtin_default_profile,
)


def session_choices(ref: PadRef, session: SessionStub | None) -> tuple[str, str | None]:
    """(profile name, user id): the session's own choices win over what the request guesses.

    A request for another user's session is refused; naming a profile other than the one the
    session uses is a 422.
    """
    owner = ref.owner
    name = ref.profile or DEFAULT_PROFILE
    if session is None:
        return name, owner.user_id
    if owner.refuses(session.user_id):
        raise Forbidden("this session belongs to another user")
    if session.profile:
        if ref.profile and ref.profile != session.profile:
            raise ValidationFailed(
                "profile mismatch",
                [FieldProblem("profile", f"the session uses profile {session.profile!r}")],
            )
        name = session.profile
    return name, owner.user_id or session.user_id


def stored_or_default(name: str, stored: Profile | None) -> Profile:
    """The stored profile; the built-in default until `default` is stored; else 404."""
    if stored is not None:
        return stored
    if name == DEFAULT_PROFILE:
        return builtin_default_profile()
    raise NotFound(f"profile {name!r} does not exist")


def require_owner(ref: PadRef, profile: Profile, user_id: str | None) -> None:
    """A user-scoped scratchpad needs a user; a session-scoped one needs a session."""
    if profile.scope is Scope.USER and not user_id:
        raise ValidationFailed(
            "user_id is required",
            [FieldProblem("user_id", f"profile {profile.name!r} keeps one scratchpad per user")],
        )
    if profile.scope is Scope.SESSION and not ref.session_id:
        raise ValidationFailed(
            "session_id is required",
            [
                FieldProblem(
                    "session_id",
                    f"profile {profile.name!r} keeps one scratchpad per session: "
                    "use /v1/working-memory/{session_id}/scratchpad",
                )
            ],
        )
