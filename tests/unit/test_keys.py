"""The key scheme: tenant first, escaped components, and the sort orders reads rely on."""

from __future__ import annotations

import pytest

from memkit.store import keys


def test_every_key_a_tenant_names_starts_with_that_tenant() -> None:
    # Every key builder that takes the tenant, found by its signature (a new one is checked
    # as soon as it exists), with a tenant crafted to look like another tenant's prefix
    import inspect

    forged = "acme#T#other"
    checked = []
    for name, build in inspect.getmembers(keys, inspect.isfunction):
        parameters = list(inspect.signature(build).parameters)
        if not parameters or parameters[0] != "tenant":
            continue
        built = build(forged, *(["x"] * (len(parameters) - 1)))
        first = built[0] if isinstance(built, tuple) else built
        assert first.startswith("T#acme%23T%23other#"), name
        checked.append(name)

    assert len(checked) >= 15  # profiles, sessions, pads, messages, records, their indexes


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

    ordered = sorted(keys.message_order(at, mid) for at, mid in created)

    assert ordered == [
        keys.message_order(10, "z"),
        keys.message_order(2_000_000, "a"),
        keys.message_order(2_000_000, "b"),
        keys.message_order(1_700_000_000_000_000, "a"),
    ]


def test_a_message_is_keyed_by_its_id_alone() -> None:
    # the same id written again (a retried append) lands on the same item whatever its time
    assert keys.message_key("t", "ns", "s", "m1") == keys.message_key("t", "ns", "s", "m1")
    assert keys.message_key("t", "ns", "s", "m1")[1] != keys.memory_key("t", "ns", "s", "m1")[1]


def test_the_order_index_holds_messages_below_meta() -> None:
    # the one-request read: LSI1 keys between M# and META are the messages and the session
    newest = keys.message_order(10**16 - 1, "~~~")
    oldest = keys.message_order(0, "!")

    assert keys.ORDER_PREFIX <= oldest < newest < keys.SESSION_META


@pytest.mark.parametrize("created_at_us", [-1, 10**16])
def test_times_outside_the_key_range_are_refused(created_at_us: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        keys.message_order(created_at_us, "m")


def test_a_component_too_long_for_a_key_keeps_a_prefix_and_a_digest() -> None:
    long_id = "\U0001d11e" * 256  # 1,024 bytes
    other = "\U0001d11e" * 255 + "x"

    built = keys.part(long_id)

    assert len(built.encode()) <= keys.MAX_PART_BYTES
    assert built != keys.part(other)  # the digest keeps them apart
    assert built.startswith("\U0001d11e" * 10)
    assert keys.part("short#id") == "short%23id"  # short ones are only escaped
    pk, sk = keys.message_key(long_id, long_id, long_id, long_id)
    assert len(pk.encode()) <= 2_048
    assert len(sk.encode()) <= 1_024


def test_sort_keys_built_of_several_long_ids_fit_and_keys_that_fitted_are_unchanged() -> None:
    from memkit.store.policies import policy_position

    long_id = "\U0001d11e" * 256  # 1,024 bytes each
    session_pk = keys.session_pk(long_id[:128], long_id, long_id)

    built = [
        keys.record_listing_sk(long_id, 1_700_000_000_000_000, long_id),
        keys.expiry_entry(session_pk, 1_700_000_000)[1],
        policy_position(long_id[:128], long_id),
    ]

    assert all(len(sk.encode()) <= keys.MAX_SORT_KEY_BYTES for sk in built)
    assert keys.record_listing_sk(long_id, 1, long_id) != keys.record_listing_sk(long_id, 1, "x")
    assert keys.record_listing_sk("ada", 7, "r#1") == "ada#0000000000000007#r%231"
    assert keys.expiry_entry("T#t#S#ns#s", 9)[1] == "0000000009#T#t#S#ns#s"
    assert policy_position("t", "ns") == "t#ns"
