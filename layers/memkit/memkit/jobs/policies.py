"""Scheduled lifecycle policies per namespace: stored, read and deleted through the API,
and applied by the cleanup run's PolicyPhase.

A policy says what every scheduled run does to the namespace's long-term records: forget by
a ForgetPolicy (for real, never a dry run; the budget counts each user's records) and, if
asked, compact duplicates. The phase goes through every tenant's policies in order (the
lifecycle index lists them under one partition), each namespace a window at a time, and
stops when the run's deadline is near; its cursor says which policy, which step and where
in the namespace's listing, so the next run resumes there.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from memkit.errors import NotFound
from memkit.jobs.compact import Compaction, CompactOptions
from memkit.jobs.forget import Forgetting
from memkit.jobs.phases import PhaseOutcome
from memkit.models.domain import Owner
from memkit.models.lifecycle import LifecyclePolicy, LifecyclePolicyView, StoredPolicy
from memkit.observability import logger
from memkit.store.policies import PolicyTable
from memkit.times import Deadline, now_iso

Step = Literal["forget", "compact"]
STEPS: tuple[Step, ...] = ("forget", "compact")
# Records a forgetting window lists (lightweight entries) and a compaction window reads
# and searches (one vector search each).
FORGET_WINDOW = 2_000
COMPACT_WINDOW = 200


def view_of(stored: StoredPolicy) -> LifecyclePolicyView:
    return LifecyclePolicyView(
        namespace=stored.namespace,
        forget=stored.policy.forget,
        compact=stored.policy.compact,
        updated_at=stored.updated_at,
    )


class PolicyService:
    """PUT, GET and DELETE of /v1/namespaces/{namespace}/lifecycle."""

    def __init__(self, policies: PolicyTable, clock: Callable[[], float] = time.time) -> None:
        self._policies = policies
        self._clock = clock

    def put(self, tenant: str, namespace: str, policy: LifecyclePolicy) -> LifecyclePolicyView:
        return view_of(self._policies.put_lifecycle_policy(tenant, namespace, policy, self._now()))

    def get(self, tenant: str, namespace: str) -> LifecyclePolicyView:
        stored = self._policies.get_lifecycle_policy(tenant, namespace)
        if stored is None:
            raise NotFound(f"namespace {namespace!r} has no lifecycle policy")
        return view_of(stored)

    def delete(self, tenant: str, namespace: str) -> None:
        if not self._policies.delete_lifecycle_policy(tenant, namespace):
            raise NotFound(f"namespace {namespace!r} has no lifecycle policy")

    def _now(self) -> str:
        return now_iso(self._clock())


# -- the scheduled phase ---------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyCursor:
    """Where the phase stopped: the policy (its listing position), the step, and the
    position in the namespace's record listing that step resumes after."""

    policy: str
    step: Step
    after: str | None

    def encode(self) -> str:
        raw = json.dumps({"p": self.policy, "s": self.step, "a": self.after}).encode()
        return base64.urlsafe_b64encode(raw).decode()

    @classmethod
    def decode(cls, cursor: str | None) -> PolicyCursor | None:
        """None for no cursor, or one this version cannot read (the phase starts over)."""
        if not cursor:
            return None
        try:
            raw = json.loads(base64.urlsafe_b64decode(cursor))
            step, policy, after = raw["s"], raw["p"], raw["a"]
        except (binascii.Error, ValueError, UnicodeDecodeError, KeyError, TypeError):
            return None
        if step not in STEPS or not isinstance(policy, str) or not isinstance(after, str | None):
            return None
        return cls(policy, step, after)


class PolicyPhase:
    """Applies every namespace's lifecycle policy (see the module docstring)."""

    name = "policies"

    def __init__(
        self,
        policies: PolicyTable,
        forgetting: Forgetting,
        compaction: Compaction,
        forget_window: int = FORGET_WINDOW,
        compact_window: int = COMPACT_WINDOW,
    ) -> None:
        self._policies = policies
        self._forgetting = forgetting
        self._compaction = compaction
        self._forget_window = forget_window
        self._compact_window = compact_window

    def run(self, cursor: str | None, deadline: Deadline) -> PhaseOutcome:
        resume = PolicyCursor.decode(cursor)
        counts = {
            "LifecyclePolicies": 0,
            "LifecycleRecordsExamined": 0,
            "LifecycleRecordsForgotten": 0,
            "LifecycleRecordsMerged": 0,
            "LifecycleNearDuplicatesFlagged": 0,
            "LifecyclePolicyFailures": 0,
        }
        start = resume.policy if resume is not None else None
        for tenant, namespace, position in self._policies.lifecycle_policies(start):
            mine = resume if resume is not None and resume.policy == position else None
            resume = None
            try:
                stopped = self._apply(tenant, namespace, mine, deadline, counts)
            except Exception as exc:  # one namespace's failure must not stop the others
                counts["LifecyclePolicyFailures"] += 1
                logger.warning(
                    "lifecycle policy failed",
                    extra={"error_type": type(exc).__name__, "namespace_policy": position},
                )
                continue
            if stopped is not None:
                return PhaseOutcome(False, stopped.encode(), counts)
        return PhaseOutcome(True, None, counts)

    def _apply(
        self,
        tenant: str,
        namespace: str,
        resume: PolicyCursor | None,
        deadline: Deadline,
        counts: dict[str, int],
    ) -> PolicyCursor | None:
        """Run a namespace's policy, from `resume` if it stopped there last time; where it
        stopped now, or None when done (or the policy is gone)."""
        stored = self._policies.get_lifecycle_policy(tenant, namespace)
        if stored is None:  # deleted since it was listed
            return None
        counts["LifecyclePolicies"] += 1
        for step in STEPS:
            if resume is not None and STEPS.index(step) < STEPS.index(resume.step):
                continue
            after = resume.after if resume is not None and resume.step == step else None
            stopped = self._step(step, stored, after, deadline, counts)
            if stopped is not None:
                return stopped
        return None

    def _step(
        self,
        step: Step,
        stored: StoredPolicy,
        after: str | None,
        deadline: Deadline,
        counts: dict[str, int],
    ) -> PolicyCursor | None:
        """Run one step of a policy window by window; where it stopped, or None when done."""
        policy = stored.policy
        if (step == "forget" and policy.forget is None) or (
            step == "compact" and not policy.compact
        ):
            return None
        while True:
            if deadline.passed():
                return PolicyCursor(stored.position, step, after)
            if step == "forget":
                assert policy.forget is not None
                forgotten, after = self._forgetting.forget_window(
                    stored.tenant, stored.namespace, policy.forget, after, self._forget_window
                )
                counts["LifecycleRecordsExamined"] += forgotten.scanned
                counts["LifecycleRecordsForgotten"] += forgotten.deleted
            else:
                compacted, after = self._compaction.compact(
                    Owner(stored.tenant, stored.namespace),
                    CompactOptions(limit=self._compact_window, dry_run=False),
                    after,
                    should_stop=deadline.passed,
                )
                counts["LifecycleRecordsExamined"] += compacted.scanned
                counts["LifecycleRecordsMerged"] += sum(len(m.removed) for m in compacted.merged)
                counts["LifecycleNearDuplicatesFlagged"] += len(compacted.flagged)
            if after is None:
                logger.info(
                    "lifecycle policy applied",
                    extra={"step": step, "namespace_policy": stored.position},
                )
                return None
