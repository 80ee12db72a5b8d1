"""If-Match against the scratchpad version (RFC 9110 entity tags)."""

from __future__ import annotations

import pytest

from memkit.versions import version_matches


def test_no_if_match_always_matches() -> None:
    # Given no If-Match header
    # When it is checked against any version
    # Then the write may go ahead
    assert all(version_matches(None, v) for v in (0, 1, 7)), "no If-Match is unconditional"


@pytest.mark.parametrize("header", ["3", '"3"', 'W/"3"', " 3 ", ' "3" '])
def test_the_current_version_matches(header: str) -> None:
    # Given an If-Match naming version 3 (bare, quoted, weak, padded)
    # When it is checked against version 3
    matched = version_matches(header, 3)

    # Then it matches
    assert matched, f"{header!r} matches version 3"


@pytest.mark.parametrize("header", ["2", '"4"', 'W/"30"', '"03"', '"3x"'])
def test_another_version_does_not_match(header: str) -> None:
    # Given an If-Match naming another version
    # When it is checked against version 3
    matched = version_matches(header, 3)

    # Then it does not match
    assert not matched, f"{header!r} does not match version 3"


@pytest.mark.parametrize("version", [1, 2])
def test_a_list_matches_any_of_its_versions(version: int) -> None:
    # Given an If-Match listing two versions
    header = '"1", "2"'

    # When it is checked against one of them
    matched = version_matches(header, version)

    # Then it matches
    assert matched, f"the list matches version {version}"


def test_a_list_does_not_match_a_version_it_lacks() -> None:
    # Given an If-Match listing two versions
    header = '"1", W/"2"'

    # When it is checked against a third
    matched = version_matches(header, 3)

    # Then it does not match
    assert not matched, "a list matches only its own versions"


@pytest.mark.parametrize("version", [1, 5])
def test_star_matches_an_existing_scratchpad(version: int) -> None:
    # Given If-Match: *
    # When it is checked against a written version
    matched = version_matches("*", version)

    # Then it matches
    assert matched, "* matches any version > 0"


def test_star_does_not_match_a_never_written_scratchpad() -> None:
    # Given If-Match: *
    # When it is checked against version 0 (never written)
    matched = version_matches("*", 0)

    # Then it does not match
    assert not matched, "* does not match version 0"


def test_zero_matches_a_never_written_scratchpad() -> None:
    # Given If-Match naming version 0
    # When it is checked against a never-written scratchpad
    matched = version_matches('"0"', 0)

    # Then it matches (a create-only write)
    assert matched, '"0" matches version 0'


def test_an_empty_if_match_does_not_match() -> None:
    # Given an empty If-Match header
    # When it is checked
    matched = version_matches("", 0)

    # Then it does not match any version
    assert not matched, "an empty If-Match matches nothing"
