"""Removing every doc that meets some conditions from a vector index: a user's deletion
(memkit.jobs.users) and a session's DELETE (memkit.service.sessions), at once rather than
waiting for the stream's REMOVE records."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from memkit.errors import StoreUnavailable
from memkit.times import Deadline, within
from memkit.vectors.filters import Condition
from memkit.vectors.protocol import Hit, Removal, VectorIndex

# Docs per browse of the index (and per bulk removal), and how deep one listing reaches
# (OpenSearch's default max_result_window): a tenant's docs beyond it are listed again
# after the first are removed.
VECTOR_PAGE = 500
VECTOR_WINDOW = 10_000
# OpenSearch shows removed docs until its next refresh (every second): a listing that shows
# nothing new waits this long before listing again, this many times at most.
REFRESH_WAIT_SECONDS = 0.5
STALE_LISTINGS = 20
NEVER = Deadline(math.inf)


def remove_vectors(
    index: VectorIndex,
    tenant: str,
    conditions: Sequence[Condition],
    clock: Callable[[], float] = time.time,
    deadline: Deadline = NEVER,
    *,
    window: int = VECTOR_WINDOW,
    wait: Callable[[float], None] = time.sleep,
    before: Callable[[list[Hit]], bool] | None = None,
) -> tuple[int, bool]:
    """Remove the tenant's docs that meet `conditions` from the index, at a version newer
    than any write so far (a late stream record cannot bring one back). Returns how many
    were removed and whether all were (False: the deadline came first, or the index kept
    showing removed docs). `before` deals with a listing's docs before they go (False: the
    deadline came first; they stay for the next run).

    Every request to the index ends by the deadline (memkit.times.within), the first one
    too: an index that does not answer in time (a Serverless collection waking from zero)
    leaves the rest to the next run, or to the stream's REMOVE records. A failure the
    deadline did not cause is raised.

    A listing (up to `window` docs) is read whole before anything is removed: removing while
    paging would shift the pages. An index shows removed docs until its next refresh
    (OpenSearch), so a listing that filled the window cannot tell what lies beyond it: the
    index is listed again (a doc listed again is removed once), after a wait when nothing
    new showed. All are removed only once a listing comes up short of the window."""
    removed: set[str] = set()
    stale = 0
    with within(deadline):
        while not deadline.passed():
            try:
                hits, complete = _listing(index, tenant, conditions, deadline, window)
            except StoreUnavailable:
                if deadline.passed():
                    break  # the listing outlasted the deadline
                raise
            fresh = [hit for hit in hits if hit.id not in removed]
            if fresh and before is not None and not before(fresh):
                return len(removed), False
            if not _remove(index, tenant, [hit.id for hit in fresh], clock, deadline, removed):
                return len(removed), False
            if complete:
                return len(removed), True
            stale = 0 if fresh else stale + 1
            if stale > STALE_LISTINGS or deadline.passed():
                break
            if stale:
                wait(REFRESH_WAIT_SECONDS)
    return len(removed), False


def _listing(
    index: VectorIndex,
    tenant: str,
    conditions: Sequence[Condition],
    deadline: Deadline,
    window: int,
) -> tuple[list[Hit], bool]:
    """The docs of one listing, and whether it holds every doc the index shows (it came up
    short of the window, before the deadline)."""
    page_size = min(VECTOR_PAGE, window)
    found: dict[str, Hit] = {}
    for offset in range(0, window, page_size):
        if deadline.passed():
            break
        page = index.browse(tenant, page_size, offset, conditions)
        found.update((hit.id, hit) for hit in page)
        if len(page) < page_size:
            return list(found.values()), True
    return list(found.values()), False


def _remove(
    index: VectorIndex,
    tenant: str,
    doc_ids: Sequence[str],
    clock: Callable[[], float],
    deadline: Deadline,
    removed: set[str],
) -> bool:
    """Remove the docs, a bulk request a page at a time, adding each to `removed`; False
    when the deadline came first (before a page, or while the index removed it)."""
    for start in range(0, len(doc_ids), VECTOR_PAGE):
        if deadline.passed():
            return False
        chunk = doc_ids[start : start + VECTOR_PAGE]
        version = int(clock() * 1_000_000)
        if index.remove([Removal(doc_id, tenant, version) for doc_id in chunk]):
            if deadline.passed():
                return False
            raise StoreUnavailable("the vector index did not remove every vector; retry")
        removed.update(chunk)
    return True
