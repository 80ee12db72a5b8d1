"""Which profile and which owner a scratchpad request resolves to. Pure rules, one place.

Every Store applies these after fetching what a request names, so the rules cannot drift
between DynamoDB and the fakes.
"""

from __future__ import annotations

from collections.abc import Mapping

from memkit.errors import FieldProblem, Forbidden, NotFound, ValidationFailed
from memkit.models.domain import (
    DEFAULT_NAMESPACE,
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


def profile_candidates(namespace: str, name: str, lenient: bool = False) -> list[tuple[str, str]]:
    """The (namespace, name) of the stored profiles that profile `name`, asked in `namespace`,
    resolves through, first found wins: the namespace's own, then the one defined without a
    namespace (namespace `default`: profiles are defined once for an app). `lenient`, for a
    session's own stored choice (a profile deleted since must not strand its sessions): then
    the `default` profile, the same way."""
    names = [name] if not lenient or name == DEFAULT_PROFILE else [name, DEFAULT_PROFILE]
    spaces = [namespace] if namespace == DEFAULT_NAMESPACE else [namespace, DEFAULT_NAMESPACE]
    return [(space, one) for one in names for space in spaces]


def effective_profile(
    namespace: str,
    name: str,
    stored: Mapping[tuple[str, str], Profile | None],
    lenient: bool = False,
) -> Profile:
    """The profile `name` means in `namespace`, given the stored profiles found among
    `profile_candidates` (by (namespace, name)): the first found, its `namespace` the one
    that defines it; else the built-in default (for `default`, or `lenient`); else 404."""
    for space, one in profile_candidates(namespace, name, lenient):
        found = stored.get((space, one))
        if found is not None:
            return found.model_copy(update={"namespace": space})
    if name == DEFAULT_PROFILE or lenient:
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
