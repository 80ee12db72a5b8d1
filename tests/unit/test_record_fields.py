"""A record's fields are described once (memkit.vectors.protocol.FIELDS): the search request,
the field table and the MCP search tools filter on the same fields, each of the same kind."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

from pydantic import StrictBool, StrictStr

from memkit.mcp_server import tools
from memkit.models.memory import DateOp, SearchRequest, TextOp, TypeOp
from memkit.vectors.protocol import FIELDS, SEARCH_FILTERS, FieldKind

# memory_prompt is AMS's tool: it takes no updated_at or pinned filter.
PROMPT_LEAVES_OUT = {"updated_at", "pinned"}
# The type of a filter of each kind, in the request and in the tools (a new kind adds both).
REQUEST_TYPES: dict[FieldKind, Any] = {
    "scope": dict[TextOp, Any] | StrictStr | None,
    "keyword": dict[TypeOp, Any] | None,
    "tag": dict[TextOp, Any] | None,
    "date": dict[DateOp, Any] | None,
    "bool": StrictBool | None,
}
TOOL_TYPES: dict[FieldKind, set[Any]] = {
    "scope": {tools.TextFilter | None, tools.EqFilter | None},
    "keyword": {tools.TypeFilter | None},
    "tag": {tools.TagFilter | None},
    "date": {tools.DateFilter | None},
    "bool": {bool | None},
}


def _request_filters() -> dict[str, Any]:
    """The search request's filters, with their types: its fields of the table, and those
    of a filter's type."""
    hints = get_type_hints(SearchRequest, include_extras=True)
    return {
        name: hints[name]
        for name in SearchRequest.model_fields
        if name in FIELDS or hints[name] in REQUEST_TYPES.values()
    }


def _filters_of(tool: Callable[..., Any]) -> dict[str, Any]:
    """A tool's parameters that are a search's filters or the table's fields, with their
    types."""
    hints = get_type_hints(tool, include_extras=True)
    known = _request_filters().keys() | FIELDS.keys()
    return {name: hints[name] for name in inspect.signature(tool).parameters if name in known}


def test_the_search_request_filters_on_the_field_tables_searched_fields() -> None:
    filters = _request_filters()

    assert set(filters) == set(SEARCH_FILTERS)
    assert {n: REQUEST_TYPES.get(FIELDS[n].kind) for n in filters} == filters


def test_the_mcp_search_tool_takes_every_filter_of_the_field_table() -> None:
    filters = _filters_of(tools.search_long_term_memory)

    assert set(filters) == set(SEARCH_FILTERS)
    assert all(t in TOOL_TYPES.get(FIELDS[n].kind, set()) for n, t in filters.items()), filters


def test_the_mcp_prompt_tool_takes_the_filters_of_the_field_table_but_amss_two() -> None:
    filters = _filters_of(tools.memory_prompt)

    assert set(filters) == set(SEARCH_FILTERS) - PROMPT_LEAVES_OUT
    assert all(t in TOOL_TYPES.get(FIELDS[n].kind, set()) for n, t in filters.items()), filters
