"""The key scheme: tenant first, escaped components, and the sort orders reads rely on."""

from __future__ import annotations

import pytest

from memkit.store import keys


def test_every_partition_key_starts_with_the_tenant() -> None:
    built = [
        keys.profile_key("acme", "ns", "p")[0],
        keys.session_key("acme", "ns", "s")[0],
        keys.user_pad_key("acme", "ns", "u", "p")[0],
        keys.message_key("acme", "ns", "s", 1, "m")[0],
        keys.memory_key("acme", "ns", "s", "m")[0],
        keys.sessions_by_namespace("acme", "ns"),
    ]

    assert all(pk.startswith("T#acme#") for pk in built)


def test_a_hash_in_an_id_cannot_reach_another_partition() -> None:
    # Given a session id crafted to look like another namespace's key
    forged = keys.session_key("t", "a", "b#S#c")[0]

    # Then it differs from every key the real components would build
    assert forged != keys.session_key("t", "a#S#c", "b")[0]
    assert forged != keys.session_key("t", "a", "b")[0]
    assert "%23" in forged


def test_escaping_is_reversible_for_percent_and_hash() -> None:
    assert keys.part("50%#x") == "50%25%23x"
    assert keys.part("50%25") != keys.part("50%")


def test_messages_sort_by_created_at_then_id() -> None:
    created = [(2_000_000, "b"), (10, "z"), (2_000_000, "a"), (1_700_000_000_000_000, "a")]

    ordered = sorted(keys.message_sk(at, mid) for at, mid in created)

    assert ordered == [
        keys.message_sk(10, "z"),
        keys.message_sk(2_000_000, "a"),
        keys.message_sk(2_000_000, "b"),
        keys.message_sk(1_700_000_000_000_000, "a"),
    ]


def test_within_a_session_messages_then_memories_then_meta_then_scratchpads() -> None:
    pk = keys.session_pk("t", "ns", "s")
    items = {
        "pad": keys.session_pad_key("t", "ns", "s", "default"),
        "meta": keys.session_key("t", "ns", "s"),
        "memory": keys.memory_key("t", "ns", "s", "zzz"),
        "newest message": keys.message_key("t", "ns", "s", 10**16 - 1, "~"),
    }

    assert {key[0] for key in items.values()} == {pk}
    by_sort_key = sorted(items, key=lambda name: items[name][1])
    assert by_sort_key == ["newest message", "memory", "meta", "pad"]
    # the one-request read: everything between M# and META, and nothing else
    assert all(
        keys.MESSAGE_PREFIX <= items[name][1] <= keys.SESSION_META
        for name in ("newest message", "memory", "meta")
    )
    assert items["pad"][1] > keys.SESSION_META


@pytest.mark.parametrize("created_at_us", [-1, 10**16])
def test_times_outside_the_key_range_are_refused(created_at_us: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        keys.message_sk(created_at_us, "m")
