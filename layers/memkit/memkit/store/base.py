"""What every table of the DynamoDB store shares: the bound item classes, the clock, batch
reads, and how a profile and a scratchpad are resolved (sessions and scratchpads both read
them)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from pynamodb.exceptions import DoesNotExist
from pynamodb.models import BatchWrite

from memkit.config import StoreSettings
from memkit.models.domain import PadFormat, PadRef, Profile, Scope, Scratchpad, SessionStub
from memkit.scratchpad import resolution
from memkit.store import keys
from memkit.store.failures import translated
from memkit.store.items import ItemClasses, bind_items
from memkit.store.protocol import PadState

# BatchGetItem takes at most 100 keys a request.
BATCH_GET_LIMIT = 100
# Items a deletion reads and deletes per Query page (a page is one deadline check).
DELETE_PAGE_SIZE = 200
# Where the next page of a partition's deletion starts (DynamoDB's LastEvaluatedKey): opaque
# to callers, who hand it back.
PageCursor = dict[str, Any]


class Table:
    """memkit's single table, shared by the store's tables (memkit.store.dynamodb). Reads are
    consistent and hide expired items.

    `index_messages` stamps session messages for the indexer (the stream filter passes only
    those); `index_all_messages` keeps indexed messages past their session (sessions.py)."""

    def __init__(
        self,
        settings: StoreSettings,
        clock: Callable[[], float] = time.time,
        index_messages: bool = False,
        index_all_messages: bool = False,
    ) -> None:
        self.items: ItemClasses = bind_items(
            settings.table_name,
            settings.region,
            settings.dynamodb_endpoint,
            settings.connect_timeout_seconds,
            settings.read_timeout_seconds,
            settings.max_retry_attempts,
        )
        self.clock = clock
        self.index_messages = index_messages
        self.index_all_messages = index_all_messages

    # -- reads -------------------------------------------------------------------------------

    def reachable(self) -> None:
        """One eventually consistent read of a key no item has (half a read unit)."""
        with translated("health check"), contextlib.suppress(DoesNotExist):
            # Every item's partition key starts with T# (keys.py): this one is never written.
            self.items.base.get(keys.HEALTH_PROBE_PK, keys.HEALTH_PROBE_PK)

    def live(self, item: Any) -> bool:
        return item is not None and (item.expires_at is None or item.expires_at > self.clock())

    def batch_get(self, wanted: Iterable[keys.Key]) -> dict[keys.Key, Any]:
        """The items found among `wanted` (one request per 100 keys)."""
        unique = list(dict.fromkeys(wanted))
        found: dict[keys.Key, Any] = {}
        with translated("read"):
            for start in range(0, len(unique), BATCH_GET_LIMIT):
                chunk = unique[start : start + BATCH_GET_LIMIT]
                for item in self.items.base.batch_get(chunk, consistent_read=True):
                    found[(item.pk, item.sk)] = item
        return found

    def consistent_item(self, key: keys.Key, operation: str) -> dict[str, Any] | None:
        """The item at `key` as the low-level client returns it (a consistent GetItem), or
        None: for items no item class maps (policies, jobs)."""
        with translated(operation):
            found = self.items.connection.client.get_item(
                TableName=self.items.base.Meta.table_name,
                Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}},
                ConsistentRead=True,
            )
        item: dict[str, Any] | None = found.get("Item")
        return item

    def delete_page(
        self,
        pk: str,
        doomed: Callable[[Any], bool],
        after: PageCursor | None,
        operation: str,
    ) -> tuple[int, PageCursor | None]:
        """Delete the `doomed` items of one Query page of partition `pk` (a consistent
        read from `after`); how many, and where the next page starts (None: the end)."""
        base = self.items.base
        with translated(operation):
            page = base.query(
                pk, consistent_read=True, limit=DELETE_PAGE_SIZE, last_evaluated_key=after
            )
            items = [item for item in page if doomed(item)]
            with BatchWrite(base) as batch:
                for item in items:
                    batch.delete(item)
        return len(items), page.last_evaluated_key

    @staticmethod
    def profile_keys(
        tenant: str, namespace: str, name: str, lenient: bool = False
    ) -> dict[tuple[str, str], keys.Key]:
        """The keys of the stored profiles profile `name` may resolve to in `namespace`
        (memkit.scratchpad.resolution.profile_candidates), by (namespace, name)."""
        return {
            (space, one): keys.profile_key(tenant, space, one)
            for space, one in resolution.profile_candidates(namespace, name, lenient)
        }

    def effective_profile(
        self,
        tenant: str,
        namespace: str,
        name: str,
        found: dict[keys.Key, Any],
        lenient: bool = False,
    ) -> Profile:
        """The profile `name` means in `namespace`, among the items `found` (which holds
        whatever exists of `_profile_keys`)."""
        candidates = self.profile_keys(tenant, namespace, name, lenient)
        stored = {
            where: self.to_profile(found[key]) if key in found else None
            for where, key in candidates.items()
        }
        return resolution.effective_profile(namespace, name, stored, lenient)

    @staticmethod
    def pad_keys(ref: PadRef, name: str, user_id: str | None) -> list[keys.Key]:
        """The profile and the scratchpads `ref` may resolve to, for profile `name`."""
        tenant, namespace = ref.owner.tenant, ref.owner.namespace
        batch = list(Table.profile_keys(tenant, namespace, name).values())
        if ref.session_id:
            batch.append(keys.session_pad_key(tenant, namespace, ref.session_id, name))
        if user_id:
            batch.append(keys.user_pad_key(tenant, namespace, user_id, name))
        return batch

    @staticmethod
    def to_profile(item: Any) -> Profile:
        spec = json.loads(item.spec)
        return Profile.model_validate(
            {**spec, "name": item.name, "version": item.version, "updated_at": item.updated_at}
        )

    @staticmethod
    def to_session(item: Any) -> SessionStub:
        return SessionStub(
            session_id=item.session_id,
            namespace=item.namespace,
            user_id=item.user_id,
            profile=item.profile,
            expires_at=int(item.expires_at) if item.expires_at is not None else None,
            version=item.version,
            gen=item.gen or "0",
            children_expire_at=(
                int(item.children_expire_at) if item.children_expire_at is not None else None
            ),
        )

    def resolve_pad(
        self,
        ref: PadRef,
        session_item: Any | None,
        found: dict[keys.Key, Any],
        fetched: set[keys.Key],
    ) -> PadState:
        tenant, namespace = ref.owner.tenant, ref.owner.namespace
        session = self.to_session(session_item) if self.live(session_item) else None
        name, user_id = resolution.session_choices(ref, session)
        # The session's own choice falls back when its profile is gone (never stranded).
        lenient = session is not None and bool(session.profile) and ref.profile is None

        wanted = [
            *self.profile_keys(tenant, namespace, name, lenient).values(),
            *self.pad_keys(ref, name, user_id),
        ]
        missing = [key for key in wanted if key not in fetched]
        if missing:  # the profile or the user was learnt from the session: one more request
            found.update(self.batch_get(missing))

        profile = self.effective_profile(tenant, namespace, name, found, lenient)
        resolution.require_owner(ref, profile, user_id)
        pad_key = keys.pad_key(
            tenant, namespace, profile.scope is Scope.USER, ref.session_id, user_id, profile.name
        )
        if profile.name != name and pad_key not in found:  # fell back to `default`'s
            found.update(self.batch_get([pad_key]))

        pad_item = found.get(pad_key)
        disk_versions: dict[str, int] = {}
        if pad_item is not None:
            disk_versions["pad"] = pad_item.version
        if session_item is not None:
            disk_versions["session"] = session_item.version
        # A session's scratchpad belongs to one life of the session.
        stale = (
            pad_item is not None
            and profile.scope is Scope.SESSION
            and session is not None
            and pad_item.gen is not None
            and pad_item.gen != session.gen
        )
        pad = self.to_pad(pad_item) if self.live(pad_item) and not stale else None
        return PadState(
            ref=ref,
            profile=profile,
            scope=profile.scope,
            user_id=user_id,
            session=session,
            pad=pad,
            disk_versions=disk_versions,
        )

    @staticmethod
    def to_pad(item: Any) -> Scratchpad:
        return Scratchpad(
            profile=item.profile,
            scope=Scope(item.scope),
            format=PadFormat(item.format),
            content=None if item.content is None else json.loads(item.content),
            version=item.version,
            tokens=int(item.tokens),
            created_at=item.created_at,
            updated_at=item.updated_at,
            expires_at=int(item.expires_at) if item.expires_at is not None else None,
        )
