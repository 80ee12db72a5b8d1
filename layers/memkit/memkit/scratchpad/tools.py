"""Tool definitions for agents (OpenAI, Anthropic, Bedrock Converse) and tool-call parsing:
the scratchpad's tools, typed by its profile, and long-term memory's (search_memory,
add_memory)."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from memkit.models.api import DEFAULT_SEARCH_RESULTS, MAX_SEARCH_RESULTS
from memkit.models.domain import PadFormat, Profile


class ToolFormat(StrEnum):
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    BEDROCK = "bedrock"


class ToolName(StrEnum):
    GET = "get_working_memory"
    UPDATE = "update_working_memory"
    CLEAR = "clear_working_memory"


# Names other frameworks' models emit for the same tools.
ALIASES: dict[str, ToolName] = {
    "get_working_memory": ToolName.GET,
    "update_working_memory": ToolName.UPDATE,
    "clear_working_memory": ToolName.CLEAR,
    "updateWorkingMemory": ToolName.UPDATE,  # Mastra, Noetic's legacy name
    "working-memory/update": ToolName.UPDATE,  # Noetic
    "working-memory/get": ToolName.GET,
    "working-memory/clear": ToolName.CLEAR,
}


class MemoryToolName(StrEnum):
    SEARCH = "search_memory"
    ADD = "add_memory"


# Names other frameworks' models emit for the long-term memory tools.
MEMORY_ALIASES: dict[str, MemoryToolName] = {
    "search_memory": MemoryToolName.SEARCH,
    "add_memory": MemoryToolName.ADD,
    "searchMemory": MemoryToolName.SEARCH,  # camelCase, as Mastra names its tools
    "addMemory": MemoryToolName.ADD,
}

ToolSchema = tuple[str, str, dict[str, Any]]


def partial_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as a merge patch: nothing required, and any property may be null."""
    patched = copy.deepcopy(schema)

    def relax(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("required", None)
            properties = node.get("properties")
            if isinstance(properties, dict):
                for name, sub in list(properties.items()):
                    relax(sub)
                    if isinstance(sub, dict):
                        properties[name] = {"anyOf": [sub, {"type": "null"}]}
            for key in ("items", "additionalProperties"):
                relax(node.get(key))
            for key in ("$defs", "definitions"):
                for sub in (node.get(key) or {}).values():
                    relax(sub)
            # Not `not`: relaxing a negated schema would tighten it.
            for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                for sub in node.get(key) or []:
                    relax(sub)

    relax(patched)
    patched.pop("$schema", None)
    return patched


def _content_parameter(profile: Profile) -> dict[str, Any]:
    if profile.pad_format is PadFormat.JSON:
        if profile.json_schema is not None:
            content = partial_schema(profile.json_schema)
        else:
            content = {"type": "object"}
        content["description"] = (
            "merge: only the fields that changed (null removes a field); replace: the whole object"
        )
        return content
    description = "merge: text to append; replace: the whole new content"
    if profile.template:
        description += ". Keep this template's structure:\n" + profile.template
    return {"type": "string", "description": description}


def tool_schemas(profile: Profile) -> list[ToolSchema]:
    """(name, description, JSON Schema of the arguments) for each scratchpad tool."""
    no_args: dict[str, Any] = {"type": "object", "properties": {}}
    content = _content_parameter(profile)
    update: dict[str, Any] = {
        "type": "object",
        "properties": {
            "content": content,
            "mode": {
                "type": "string",
                "enum": ["merge", "replace"],
                "default": "merge",
                "description": "merge into the scratchpad (default) or replace it",
            },
        },
        "required": ["content"],
    }
    # The schema's "#/$defs/..." references point at the document root: move its definitions
    # there, or they would dangle once the schema is nested under `content`.
    for key in ("$defs", "definitions"):
        if key in content:
            update[key] = content.pop(key)
    tools = [
        (ToolName.GET.value, "Read the working memory (scratchpad) of this conversation.", no_args),
        (
            ToolName.UPDATE.value,
            "Save facts, preferences or state in the working memory for later turns.",
            update,
        ),
        (ToolName.CLEAR.value, "Erase the working memory.", no_args),
    ]
    if profile.read_only:
        return tools[:1]
    return tools


def memory_tool_schemas() -> list[ToolSchema]:
    """(name, description, JSON Schema of the arguments) for each long-term memory tool."""
    tags: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
    search: dict[str, Any] = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": 'What to look for, in plain words, e.g. "where does the user '
                'live" or "trip to Oslo". Matched by meaning and by keywords.',
            },
            "topics": {
                **tags,
                "description": "Only memories tagged with at least one of these topics.",
            },
            "memory_type": {
                "type": "string",
                "enum": ["semantic", "episodic", "message"],
                "description": "Only this kind: semantic (facts, preferences), episodic "
                "(events), message (messages of past conversations). Leave out to search all.",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SEARCH_RESULTS,
                "default": DEFAULT_SEARCH_RESULTS,
                "description": f"How many memories to return at most (1-{MAX_SEARCH_RESULTS}).",
            },
        },
        "required": ["query"],
    }
    add: dict[str, Any] = {
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "description": "The memory as one self-contained statement that makes sense "
                "without this conversation: name the person, use absolute dates "
                '(e.g. "Ada is vegetarian", "Ada flies to Oslo on 2025-03-14").',
            },
            "memory_type": {
                "type": "string",
                "enum": ["semantic", "episodic"],
                "default": "semantic",
                "description": "semantic: a fact or preference that stays true; episodic: "
                "something that happened or will happen at a point in time.",
            },
            "topics": {
                **tags,
                "description": 'A few short tags to find it by later, e.g. ["food", "travel"].',
            },
            "entities": {
                **tags,
                "description": "The people, places, organisations or things it is about.",
            },
            "event_date": {
                "type": "string",
                "description": "For episodic memories: when it happened or will happen, "
                "ISO 8601 (2025-03-14 or 2025-03-14T09:00:00Z).",
            },
            "key": {
                "type": "string",
                "description": "What the fact is about, as a short snake_case name for facts "
                "that change (home_city, employer, favourite_food): it replaces the user's "
                "current memory with the same key.",
            },
            "replaces": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Ids (from search_memory) of memories this one corrects or "
                "updates: they stop being current but are kept in their history.",
            },
        },
        "required": ["text"],
    }
    return [
        (
            MemoryToolName.SEARCH.value,
            "Search long-term memory: what is known about the user from earlier conversations "
            "(facts, preferences, events, past messages). Use it when an answer may depend on "
            "something said before. Returns the best matches first, each with a relevance "
            "from 0 to 1; an empty list means nothing relevant is stored.",
            search,
        ),
        (
            MemoryToolName.ADD.value,
            "Save one lasting memory about the user for future conversations: a fact or "
            "preference (semantic) or an event (episodic, with event_date). Keep what will "
            "matter in later sessions, not small talk or secrets; notes for this conversation "
            "only belong in the working memory. A memory the user already has is not stored "
            "twice. When a fact changed (a move, a new job, a changed preference), give its "
            "key or the ids it replaces, so the old one is no longer recalled as true. It "
            "becomes searchable a few seconds later.",
            add,
        ),
    ]


def render_tools(profile: Profile, tool_format: ToolFormat) -> list[dict[str, Any]]:
    """The scratchpad's tool definitions in the wire format of one model API."""
    return render(tool_schemas(profile), tool_format)


def render_memory_tools(tool_format: ToolFormat) -> list[dict[str, Any]]:
    """The long-term memory tool definitions in the wire format of one model API."""
    return render(memory_tool_schemas(), tool_format)


def render(schemas: Sequence[ToolSchema], tool_format: ToolFormat) -> list[dict[str, Any]]:
    """Tool definitions in the wire format of one model API."""
    rendered: list[dict[str, Any]] = []
    for name, description, parameters in schemas:
        if tool_format is ToolFormat.OPENAI:
            rendered.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": description,
                        "parameters": parameters,
                    },
                }
            )
        elif tool_format is ToolFormat.ANTHROPIC:
            rendered.append({"name": name, "description": description, "input_schema": parameters})
        else:
            rendered.append(
                {
                    "toolSpec": {
                        "name": name,
                        "description": description,
                        "inputSchema": {"json": parameters},
                    }
                }
            )
    return rendered


class ToolArgumentError(ValueError):
    """Arguments a model sent that cannot be used; the message is for the model to read."""


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """Arguments as an object: models send an object, or (OpenAI) a JSON string of one."""
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolArgumentError(f"arguments are not valid JSON: {exc.msg}") from exc
    if not isinstance(arguments, dict):
        raise ToolArgumentError("arguments must be a JSON object")
    return arguments


def update_arguments(arguments: dict[str, Any], profile: Profile) -> tuple[Any, str]:
    """(content, mode) of an update call; `memory` is accepted for Mastra and Noetic."""
    if "content" in arguments:
        content = arguments["content"]
    elif "memory" in arguments:
        content = arguments["memory"]
    else:
        raise ToolArgumentError('missing argument "content"')
    # Mastra and Noetic send `memory` with no mode: markdown replaces, schema objects merge.
    default_mode = "merge"
    if "content" not in arguments and profile.pad_format is not PadFormat.JSON:
        default_mode = "replace"
    mode = arguments.get("mode")
    if mode is None:  # models send null for optional arguments
        mode = default_mode
    if mode not in ("merge", "replace"):
        raise ToolArgumentError('mode must be "merge" or "replace"')
    if profile.pad_format is PadFormat.JSON and isinstance(content, str):
        # Some models send the object as a JSON string.
        try:
            content = json.loads(content)
        except json.JSONDecodeError as exc:
            raise ToolArgumentError("content must be a JSON object for this scratchpad") from exc
    return content, mode
