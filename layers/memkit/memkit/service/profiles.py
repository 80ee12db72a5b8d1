"""Profiles: how scratchpads behave, stored per tenant and namespace."""

from __future__ import annotations

from memkit.errors import NotFound, ValidationFailed, VersionConflict
from memkit.models.domain import DEFAULT_PROFILE, Profile, ProfileSpec, builtin_default_profile
from memkit.scratchpad import resolution
from memkit.scratchpad.schema import schema_problems
from memkit.store.protocol import ProfilePage, Store
from memkit.versions import version_matches

PUT_ATTEMPTS = 5


class ProfileService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def _expected(self, tenant: str, namespace: str, name: str, if_match: str | None) -> int | None:
        """The version a conditional write must find, once If-Match matches the current one."""
        if if_match is None:
            return None
        current = self._store.get_profile(tenant, namespace, name)
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
        for _ in range(PUT_ATTEMPTS - 1):
            try:
                return self._store.put_profile(tenant, namespace, name, spec, expected)
            except VersionConflict:
                if expected is not None:
                    raise
                # Without If-Match the last writer wins: a lost race is simply retried.
        return self._store.put_profile(tenant, namespace, name, spec, expected)

    def get(self, tenant: str, namespace: str, name: str) -> Profile:
        return resolution.stored_or_default(name, self._store.get_profile(tenant, namespace, name))

    def list(self, tenant: str, namespace: str, limit: int, cursor: str | None) -> ProfilePage:
        page = self._store.list_profiles(tenant, namespace, limit, cursor)
        if cursor is None and all(p.name != DEFAULT_PROFILE for p in page.profiles):
            # The built-in default applies until one is stored: show it.
            return ProfilePage([builtin_default_profile(), *page.profiles], page.next_cursor)
        return page

    def delete(self, tenant: str, namespace: str, name: str, if_match: str | None) -> None:
        """Delete a profile (the default reverts to the built-in one)."""
        expected = self._expected(tenant, namespace, name, if_match)
        if not self._store.delete_profile(tenant, namespace, name, expected):
            raise NotFound(f"profile {name!r} does not exist")
