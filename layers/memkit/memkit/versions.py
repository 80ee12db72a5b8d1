"""If-Match against memkit's versions: one reading of the header for every resource."""

from __future__ import annotations


def version_matches(if_match: str | None, version: int) -> bool:
    """RFC 9110 If-Match against a version ETag: "3", 3, W/"3", a list, or * (exists)."""
    if if_match is None:
        return True
    for candidate in if_match.split(","):
        tag = candidate.strip().removeprefix("W/").strip('"')
        if tag == "*" and version > 0:
            return True
        if tag == str(version):
            return True
    return False
