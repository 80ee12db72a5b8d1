"""Forgetting's decision rules (memkit.jobs.forget.to_forget) and the bounded windows
the scheduled run reads a namespace's listing in."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from memkit.jobs.forget import Rules, read_window, to_forget
from memkit.models.lifecycle import ForgetPolicy, ForgetRequest, Listing, RecordEntry
from memkit.store import keys

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC).timestamp()
DAY = 86_400


def _at(days_ago: float) -> str:
    return datetime.fromtimestamp(NOW - days_ago * DAY, UTC).isoformat().replace("+00:00", "Z")


def entry(
    record_id: str,
    age: float,
    inactive: float | None = None,
    memory_type: str = "semantic",
    pinned: bool = False,
    user_id: str | None = "ada",
) -> RecordEntry:
    created = NOW - age * DAY
    return RecordEntry(
        id=record_id,
        user_id=user_id,
        session_id=None,
        memory_type=memory_type,
        memory_hash=f"h-{record_id}",
        pinned=pinned,
        created_at=_at(age),
        last_accessed=_at(age if inactive is None else inactive),
        position=keys.record_listing_sk(user_id, int(created * 1_000_000), record_id),
    )


def forget(
    entries: list[RecordEntry], pinned_ids: frozenset[str] = frozenset(), **rules: object
) -> list[str]:
    return to_forget(entries, Rules.of(ForgetPolicy.model_validate(rules)), NOW, pinned_ids)


# -- age and inactivity ----------------------------------------------------------------------


def test_max_age_forgets_records_created_longer_ago() -> None:
    records = [entry("old", age=40), entry("new", age=10)]

    assert forget(records, max_age_days=30) == ["old"]


def test_days_may_be_fractional() -> None:
    records = [entry("older", age=0.75), entry("newer", age=0.25)]

    assert forget(records, max_age_days=0.5) == ["older"]


def test_max_inactive_reads_last_access_not_creation() -> None:
    records = [entry("read-lately", age=90, inactive=2), entry("untouched", age=90, inactive=60)]

    assert forget(records, max_inactive_days=30) == ["untouched"]


def test_with_both_thresholds_a_record_must_be_old_and_inactive() -> None:
    records = [
        entry("old-and-idle", age=400, inactive=200),
        entry("old-but-read", age=400, inactive=1),
        entry("idle-but-young", age=20, inactive=20),
    ]

    assert forget(records, max_age_days=365, max_inactive_days=14) == ["old-and-idle"]


def test_a_policy_without_rules_forgets_nothing() -> None:
    assert forget([entry("a", age=5000)]) == []


# -- budget ----------------------------------------------------------------------------------


def test_budget_keeps_the_most_recent_and_forgets_the_rest() -> None:
    records = [entry(f"r{age}", age=age) for age in (50, 1, 30, 5, 90)]

    assert sorted(forget(records, budget=2)) == ["r30", "r50", "r90"]


def test_budget_favours_a_recently_accessed_old_record() -> None:
    records = [entry("old-but-read-today", age=60, inactive=0), entry("idle", age=50, inactive=50)]

    assert forget(records, budget=1) == ["idle"]


def test_budget_counts_only_what_age_and_inactivity_keep() -> None:
    records = [entry("ancient", age=400), entry("a", age=3), entry("b", age=2), entry("c", age=1)]

    # ancient goes by age; of the other three the budget keeps two
    assert sorted(forget(records, max_age_days=365, budget=2)) == ["a", "ancient"]


def test_a_budget_of_zero_forgets_every_record_it_may() -> None:
    records = [entry("a", age=1), entry("b", age=2, pinned=True)]

    assert forget(records, budget=0) == ["a"]


# -- allowlist and pinned records ------------------------------------------------------------


def test_allowlist_limits_which_types_may_be_forgotten() -> None:
    records = [
        entry("fact", age=100, memory_type="semantic"),
        entry("event", age=100, memory_type="episodic"),
        entry("said", age=100, memory_type="message"),
    ]

    assert forget(records, max_age_days=30, memory_type_allowlist=["episodic", "message"]) == [
        "event",
        "said",
    ]


def test_types_outside_the_allowlist_do_not_count_in_the_budget() -> None:
    records = [entry("fact", age=1, memory_type="semantic")] + [
        entry(f"event{i}", age=10 + i, memory_type="episodic") for i in range(3)
    ]

    assert forget(records, budget=2, memory_type_allowlist=["episodic"]) == ["event2"]


@pytest.mark.parametrize(
    "rules",
    [
        {"max_age_days": 1},
        {"max_inactive_days": 1},
        {"max_age_days": 1, "max_inactive_days": 1},
        {"budget": 0},
        {"memory_type_allowlist": ["semantic"], "budget": 0},
    ],
)
def test_pinned_records_survive_every_rule(rules: dict[str, object]) -> None:
    records = [
        entry("pinned", age=900, inactive=900, pinned=True),
        entry("named", age=900, inactive=900),
        entry("plain", age=900, inactive=900),
    ]

    assert forget(records, pinned_ids=frozenset({"named"}), **rules) == ["plain"]


def test_pinned_records_do_not_count_against_the_budget() -> None:
    records = [entry(f"pin{i}", age=i, pinned=True) for i in range(3)] + [
        entry("newer", age=10),
        entry("older", age=20),
    ]

    assert forget(records, budget=1) == ["older"]


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"max_age_days": -1}, "max_age_days"),
        ({"max_inactive_days": "ten"}, "max_inactive_days"),
        ({"max_age_days": True}, "max_age_days"),
        ({"budget": -2}, "budget"),
        ({"budget": 1.5}, "budget"),
        ({"memory_type_allowlist": ["facts"]}, "memory_type_allowlist"),
        ({"max_age_day": 3}, "max_age_day"),
    ],
)
def test_a_bad_policy_names_the_field(policy: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ForgetRequest.model_validate({"policy": policy})

    assert field in {str(part) for error in caught.value.errors() for part in error["loc"]}


# -- windows ---------------------------------------------------------------------------------


class Listed:
    """A listing held in memory, in index order (what ForgettingTable.list_records yields)."""

    def __init__(self, entries: list[RecordEntry]) -> None:
        self.entries = sorted(entries, key=lambda e: e.position)

    def list_records(self, listing: Listing, after: str | None = None) -> Iterator[RecordEntry]:
        return iter([e for e in self.entries if after is None or e.position > after])

    def delete_records(self, tenant: str, record_ids: object) -> int:
        raise AssertionError("a window deletes nothing")


LISTING = Listing("default", "default")


def _users(user_counts: dict[str, int]) -> Listed:
    return Listed(
        [entry(f"{u}{i}", age=100 - i, user_id=u) for u, n in user_counts.items() for i in range(n)]
    )


def test_a_window_ends_where_a_users_records_end() -> None:
    listed = _users({"ann": 3, "bob": 3, "cat": 1})

    first = read_window(listed, LISTING, None, 5)
    second = read_window(listed, LISTING, first.next_after, 5)

    assert [e.id for e in first.entries] == ["ann0", "ann1", "ann2"]
    assert first.next_after == keys.user_records_prefix("bob")
    assert [e.id for e in second.entries] == ["bob0", "bob1", "bob2", "cat0"]
    assert second.next_after is None
    assert first.partial == second.partial == frozenset()


def test_a_user_larger_than_a_window_is_cut_and_marked_partial() -> None:
    listed = _users({"ann": 5, "bob": 1})

    first = read_window(listed, LISTING, None, 3)
    second = read_window(listed, LISTING, first.next_after, 3)

    assert [e.id for e in first.entries] == ["ann0", "ann1", "ann2"]
    assert first.partial == frozenset({"ann"})
    assert [e.id for e in second.entries] == ["ann3", "ann4", "bob0"]
    assert second.partial == frozenset({"ann"})
    assert second.next_after is None


def test_the_budget_is_not_applied_to_a_user_seen_in_part() -> None:
    records = [entry(f"r{i}", age=i + 1) for i in range(4)]

    assert to_forget(records, Rules(budget=1), NOW, use_budget=False) == []
    assert to_forget(records, Rules(budget=1, max_age_days=3.5), NOW, use_budget=False) == ["r3"]
