"""Tool calls as model SDKs return them, and their results in the shape each API takes back.

`parse_tool_call` reads, by duck typing (objects or their dict forms; openai, anthropic and
boto3 are never imported):

- OpenAI Chat Completions: `message.tool_calls[i]` (`id`, `function.name`,
  `function.arguments` as a JSON string);
- OpenAI Responses: an output item of type `function_call` (`call_id`, `name`, `arguments`);
- Anthropic Messages: a content block of type `tool_use` (`id`, `name`, `input`);
- Bedrock Converse: a content block `{"toolUse": {"toolUseId", "name", "input"}}`, or the
  `toolUse` dict itself.

The API parses the arguments (a JSON string or an object). `ToolOutcome.to_message()` is the
result for the model, in the API the call came from; `tool_result_messages` makes the
message(s) to append to the conversation for several calls of one turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from memkit.models.api import ToolFailure, ToolSuccess

# What `client.tools(format=...)` takes: the API's three, and the Responses API's flat form.
ToolsFormat = Literal["openai", "openai-responses", "anthropic", "bedrock"]


class CallFormat(StrEnum):
    """The model API a tool call came from (and its result goes back to)."""

    OPENAI = "openai"
    OPENAI_RESPONSES = "openai-responses"
    ANTHROPIC = "anthropic"
    BEDROCK = "bedrock"


@dataclass(frozen=True)
class ToolCall:
    """A model's tool call, whichever API made it."""

    id: str | None
    name: str
    arguments: dict[str, Any] | str | None
    format: CallFormat


def _field(source: Any, name: str) -> Any:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def parse_tool_call(call: Any) -> ToolCall:
    """The tool call in any of the four shapes above; TypeError for anything else."""
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, Mapping) and "toolUse" in call:
        call = call["toolUse"]
    if _field(call, "toolUseId") is not None:
        return _made(
            _field(call, "toolUseId"), _field(call, "name"), _field(call, "input"), "bedrock"
        )
    kind = _field(call, "type")
    if kind == "tool_use":
        return _made(_field(call, "id"), _field(call, "name"), _field(call, "input"), "anthropic")
    if kind == "function_call":
        arguments = _field(call, "arguments")
        return _made(_field(call, "call_id"), _field(call, "name"), arguments, "openai-responses")
    function = _field(call, "function")
    if function is not None:
        arguments = _field(function, "arguments")
        return _made(_field(call, "id"), _field(function, "name"), arguments, "openai")
    raise TypeError(
        f"not a tool call of OpenAI, Anthropic or Bedrock Converse: {type(call).__name__}"
    )


def _made(call_id: Any, name: Any, arguments: Any, kind: str) -> ToolCall:
    if not isinstance(name, str) or not name:
        raise TypeError(f"a {kind} tool call without a tool name")
    if arguments is not None and not isinstance(arguments, str | Mapping):
        raise TypeError(f"a {kind} tool call whose arguments are neither JSON text nor an object")
    given = dict(arguments) if isinstance(arguments, Mapping) else arguments
    return ToolCall(
        id=call_id if isinstance(call_id, str) else None,
        name=name,
        arguments=given,
        format=CallFormat(kind),
    )


@dataclass(frozen=True)
class ToolOutcome:
    """What running a tool call gave: the API's answer (`{"result": ...}` or, for a failure
    the model can act on, `{"error": ...}`), with the call it answers."""

    call: ToolCall
    answer: ToolSuccess | ToolFailure

    @property
    def ok(self) -> bool:
        return isinstance(self.answer, ToolSuccess)

    @property
    def result(self) -> Any:
        """The tool's result (None when it failed)."""
        return self.answer.result if isinstance(self.answer, ToolSuccess) else None

    @property
    def error(self) -> str | None:
        """Why the call failed, in words for the model (None when it worked)."""
        return self.answer.error if isinstance(self.answer, ToolFailure) else None

    def content(self) -> str:
        """The answer as JSON text, what the model reads."""
        return json.dumps(self.answer.model_dump(), ensure_ascii=False)

    def to_message(self) -> dict[str, Any]:
        """The result in the shape the call's API takes back: a Chat Completions `tool`
        message, a Responses `function_call_output` item, an Anthropic `tool_result` block or
        a Converse `toolResult` block (the last two go in a user message:
        `tool_result_messages`)."""
        call_id = self.call.id or ""
        if self.call.format is CallFormat.OPENAI:
            return {"role": "tool", "tool_call_id": call_id, "content": self.content()}
        if self.call.format is CallFormat.OPENAI_RESPONSES:
            return {"type": "function_call_output", "call_id": call_id, "output": self.content()}
        if self.call.format is CallFormat.ANTHROPIC:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": self.content(),
            }
            if not self.ok:
                block["is_error"] = True
            return block
        return {
            "toolResult": {
                "toolUseId": call_id,
                "content": [{"json": self.answer.model_dump()}],
                "status": "success" if self.ok else "error",
            }
        }


def tool_result_messages(outcomes: Sequence[ToolOutcome]) -> list[dict[str, Any]]:
    """What to append to the conversation after a turn's tool calls: one `tool` message each
    (Chat Completions), the `function_call_output` items (Responses), or one user message with
    every result block (Anthropic, Converse)."""
    formats = {outcome.call.format for outcome in outcomes}
    if len(formats) > 1:
        raise ValueError("tool results of one turn come from one model API")
    if not outcomes:
        return []
    pieces = [outcome.to_message() for outcome in outcomes]
    if formats & {CallFormat.ANTHROPIC, CallFormat.BEDROCK}:
        return [{"role": "user", "content": pieces}]
    return pieces


def responses_tools(chat_tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions tool definitions in the Responses API's flat form. `strict` is off:
    the Responses API's default (on) requires every property, and the scratchpad's update
    tool takes a partial object (a merge patch)."""
    return [{"type": "function", **tool["function"], "strict": False} for tool in chat_tools]
