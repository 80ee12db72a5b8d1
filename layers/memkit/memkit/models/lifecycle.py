"""Forgetting, compaction and namespace lifecycle policies as clients send and read them
(API.md "Long-term memory"; AMS's ForgetPolicy and ForgetResponse), and the lightweight
record entries the lifecycle lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import ConfigDict, Field, StrictInt

from memkit.models.domain import Id, Model
from memkit.models.session import MemoryType

# Days may be fractional (AMS reads them as floats); a century and a half is "forever".
MAX_DAYS = 60_000
MAX_BUDGET = 10_000_000
MAX_PINNED_IDS = 1_000
# How many records one forget or compact request may look at.
MAX_SCAN = 5_000
# How close a near duplicate is (vector distance).
DEFAULT_NEAR_DISTANCE = 0.15

Days = Annotated[float, Field(strict=True, ge=0, le=MAX_DAYS, allow_inf_nan=False)]
RecordId = Id


@dataclass(frozen=True)
class RecordEntry:
    """A long-term record as the lifecycle index lists it: no text, just what forgetting
    and compaction decide on. `position` is where it sits in its namespace's listing."""

    id: str
    user_id: str | None
    session_id: str | None
    memory_type: str
    memory_hash: str
    pinned: bool
    created_at: str
    last_accessed: str
    position: str


@dataclass(frozen=True)
class Unchanged:
    """What a long-term record must still hold for a lifecycle deletion decided on an
    earlier read to go ahead: not pinned, this version, hash and type, and no access after
    `last_accessed` (None: accesses do not matter)."""

    version: int
    memory_hash: str
    memory_type: str
    last_accessed: str | None


@dataclass(frozen=True)
class Listing:
    """Which records of a namespace to list: every user's, or with `one_user` only
    `user_id`'s (None: the records that belong to no user); optionally of one session and
    of some memory types."""

    tenant: str
    namespace: str
    user_id: str | None = None
    one_user: bool = False
    session_id: str | None = None
    memory_types: frozenset[str] | None = None


class ForgetPolicy(Model):
    """What to forget (AMS's ForgetPolicy). Every rule given must hold for a record to go;
    pinned records never go and never count against the budget."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    max_age_days: Days | None = Field(
        default=None, description="forget records created more than this many days ago"
    )
    max_inactive_days: Days | None = Field(
        default=None,
        description="forget records not accessed (or, never accessed, created) for this many "
        "days; with max_age_days, a record must be both old and inactive",
    )
    budget: StrictInt | None = Field(
        default=None,
        ge=0,
        le=MAX_BUDGET,
        description="keep the N most recently created and accessed records in scope "
        "(pinned ones are kept besides and not counted); forget the rest",
    )
    memory_type_allowlist: list[MemoryType] | None = Field(
        default=None,
        min_length=1,
        max_length=3,
        description="only records of these types may be forgotten (and count in the budget)",
    )


class ForgetRequest(Model):
    """POST /v1/long-term-memory/forget body (AMS; `dry_run` may also be a query parameter)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    policy: ForgetPolicy
    pinned_ids: list[RecordId] | None = Field(
        default=None,
        max_length=MAX_PINNED_IDS,
        description="records kept whatever the policy says, as if pinned",
    )
    dry_run: bool | None = Field(
        default=None, description="report what would be forgotten, delete nothing (default)"
    )


class CompactRequest(Model):
    """POST /v1/long-term-memory/compact body, optional (AMS sends none; `dry_run` may also
    be a query parameter)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    dry_run: bool | None = Field(
        default=None, description="report what would merge, change nothing (default: false)"
    )


class ForgetResult(Model):
    """AMS's ForgetResponse: in a dry run, `deleted` and `deleted_ids` are what would go."""

    scanned: int
    deleted: int
    deleted_ids: list[str]
    dry_run: bool


class MergedGroup(Model):
    kept: str = Field(description="the record the others were merged into")
    removed: list[str] = Field(description="the records deleted into it")
    reason: str = Field(description='"exact" (same content hash) or "judged" (by the model)')


class FlaggedPair(Model):
    a: str
    b: str
    distance: float = Field(description="their vector distance (0: identical meaning)")


class CompactResult(Model):
    """What a compaction did (or, in a dry run, would do) in the records it scanned."""

    merged: list[MergedGroup]
    flagged: list[FlaggedPair] = Field(
        description="near duplicates left alone for a person to judge: no model that can "
        "judge meaning is configured (or it failed, or this request's share of its calls is "
        "spent), or both are pinned"
    )
    scanned: int
    dry_run: bool
    next_cursor: str | None = Field(
        description="pass as `cursor` to compact the records after these (null: the end)"
    )


class LifecyclePolicy(Model):
    """PUT /v1/namespaces/{namespace}/lifecycle body: what the scheduled run does to the
    namespace's long-term records."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    forget: ForgetPolicy | None = Field(
        default=None,
        description="forget by this policy on every run (the budget counts each user's "
        "records; no dry run)",
    )
    compact: bool = Field(default=False, description="compact duplicates on every run")


class LifecyclePolicyView(LifecyclePolicy):
    namespace: str
    updated_at: str


@dataclass(frozen=True)
class StoredPolicy:
    """A namespace's lifecycle policy as stored; `position` is where the scheduled run's
    listing of every tenant's policies has it."""

    tenant: str
    namespace: str
    policy: LifecyclePolicy
    updated_at: str
    position: str
