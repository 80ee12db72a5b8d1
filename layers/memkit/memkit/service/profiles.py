"""Profiles: how scratchpads behave, stored per tenant and namespace."""

from __future__ import annotations

from memkit.errors import NotFound, ValidationFailed, VersionConflict
from memkit.models.domain import DEFAULT_PROFILE, Profile, ProfileSpec
from memkit.scratchpad import resolution
from memkit.scratchpad.schema import schema_problems
from memkit.service.retry import commit_in_time
from memkit.store.protocol import ProfilePage, ProfileStore
from memkit.versions import version_matches

PUT_ATTEMPTS = 5


class ProfileService:
    def __init__(self, profiles: ProfileStore) -> None:
        self._profiles = profiles

    def _expected(self, tenant: str, namespace: str, name: str, if_match: str | None) -> int | None:
        """The version a conditional write must find, once If-Match matches the current one."""
        if if_match is None:
            return None
        current = self._profiles.get_profile(tenant, namespace, name)
        version = current.version if current else 0
        if not version_matches(if_match, version):
            raise VersionConflict(f"profile {name!r} is at version {version}, not {if_match}")
        return version

    def put(
        self, tenant: str, namespace: str, name: str, spec: ProfileSpec, if_match: str | None
    ) -> Profile:
        """Create or replace a profile; its JSON Schema must itself be valid."""
        if spec.json_schema is not None:
            problems = schema_problems(spec.json_schema)
            if problems:
                raise ValidationFailed("schema is not a valid JSON Schema", problems)
        expected = self._expected(tenant, namespace, name, if_match)
        commit_in_time("profile")
        for _ in range(PUT_ATTEMPTS - 1):
            try:
                stored = self._profiles.put_profile(tenant, namespace, name, spec, expected)
                break
            except VersionConflict:
                if expected is not None:
                    raise
                # Without If-Match the last writer wins: a lost race is simply retried.
        else:
            stored = self._profiles.put_profile(tenant, namespace, name, spec, expected)
        return stored.model_copy(update={"namespace": namespace})

    def get(self, tenant: str, namespace: str, name: str) -> Profile:
        """The profile `name` means in `namespace`: its own, else the one defined without a
        namespace, else (for `default`) the built-in one; else 404."""
        stored = {
            (space, one): self._profiles.get_profile(tenant, space, one)
            for space, one in resolution.profile_candidates(namespace, name)
        }
        return resolution.effective_profile(namespace, name, stored)

    def list(self, tenant: str, namespace: str, limit: int, cursor: str | None) -> ProfilePage:
        """The profiles `namespace` defines (their own namespace set), and on the first page
        the `default` that applies when it defines none (inherited, or the built-in one)."""
        page = self._profiles.list_profiles(tenant, namespace, limit, cursor)
        own = [p.model_copy(update={"namespace": namespace}) for p in page.profiles]
        if cursor is None and all(p.name != DEFAULT_PROFILE for p in own):
            return ProfilePage(
                [self.get(tenant, namespace, DEFAULT_PROFILE), *own], page.next_cursor
            )
        return ProfilePage(own, page.next_cursor)

    def delete(self, tenant: str, namespace: str, name: str, if_match: str | None) -> None:
        """Delete a profile (the default reverts to the built-in one)."""
        expected = self._expected(tenant, namespace, name, if_match)
        if not self._profiles.delete_profile(tenant, namespace, name, expected):
            raise NotFound(f"profile {name!r} does not exist")
