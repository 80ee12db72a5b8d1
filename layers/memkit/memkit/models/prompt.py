"""Prompt hydration as clients send and read it (API.md "Prompt hydration"; the Agent Memory
Server's MemoryPromptRequest and MemoryPromptResponse, docs/ams-client.md §4.16-4.17).

agent-memory-client sends `{"query", "session": {...}, "long_term_search": {...}}` and sends
`context_window_max` as a string ("4000"): it is read as a number. The rest of the body is
memkit's options; a key neither knows is a 422 (a misspelt option is never silently lost).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from memkit.models.domain import Id, Model
from memkit.models.memory import MAX_MESSAGE_RANGE, MAX_TEXT, MemoryHit, SearchRequest
from memkit.models.session import MAX_WINDOW_TOKENS

MAX_RECALL = 20
# Recall asks the index for recall_k + recent_messages_limit hits (at most 100, a search's
# limit) and leaves out the recent ones afterwards, so it can run alongside the session read.
MAX_RECENT_MESSAGES = 80
MAX_TOKEN_BUDGET = 10_000_000

ToolCalls = Literal["keep", "drop"]
RecalledPosition = Literal["prepend", "append", "interleave"]
Role = Literal["system", "user", "assistant"]


def _scope(description: str) -> Any:
    return Field(default=None, description=description)


class PromptSession(Model):
    """The session to hydrate from (AMS's WorkingMemoryRequest). A session that does not
    exist is an empty one; another user's session is a 403."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    session_id: Id
    namespace: Id | None = _scope('default "default"')
    user_id: Id | None = _scope("the caller's user: 403 if the session is another's")
    model_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="the default token budget is this model's window less room for the answer "
        "(without model_name or context_window_max: the session's window, if its writes gave "
        "one)",
    )
    # agent-memory-client sends a string; pydantic's lax mode reads "4000" as 4000.
    context_window_max: int | None = Field(
        default=None,
        ge=1,
        le=MAX_WINDOW_TOKENS,
        description="a window in tokens (wins over model_name); agent-memory-client sends it "
        "as a string, which is read as a number",
    )


class PromptRequest(Model):
    """POST /v1/memory/prompt body: AMS's fields, then memkit's options."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    query: StrictStr = Field(
        min_length=1, max_length=MAX_TEXT, description="the user's message: the prompt's last"
    )
    session: PromptSession | None = None
    long_term_search: StrictBool | SearchRequest | None = Field(
        default=None,
        description="filters for the long-term memories (its `text` is replaced by `query`); "
        "true or null (with a session): the user's memories outside this session; false: none",
    )
    token_budget: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKEN_BUDGET,
        description="tokens for the whole prompt; default: the model's window less room for "
        "the answer (a quarter of it, at most 4,096), else 8,000",
    )
    recall_k: int = Field(
        default=5,
        ge=0,
        le=MAX_RECALL,
        description="older messages of this session recalled by meaning (0: none)",
    )
    message_range: int = Field(
        default=1,
        ge=0,
        le=MAX_MESSAGE_RANGE,
        description="messages before and after each recalled one, shown with it",
    )
    recent_messages_limit: int = Field(
        default=40,
        ge=0,
        le=MAX_RECENT_MESSAGES,
        description="the newest messages read as recent turns (then trimmed to the budget)",
    )
    tool_calls: ToolCalls = Field(
        default="keep",
        description="drop: leave out tool calls and tool results (Mastra's ToolCallFilter)",
    )
    recalled_position: RecalledPosition = Field(
        default="prepend",
        description="where recalled older messages go (VoltAgent's mergeStrategy): prepend "
        "(before the long-term memories), append (after the recent turns) or interleave "
        "(among the recent turns, by time)",
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty or only whitespace")
        return value

    @field_validator("long_term_search", mode="wrap")
    @classmethod
    def _search(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # Filters are validated here so a problem is named by its field
        # (long_term_search.limit), not by the member of the union it failed against.
        if value is None or isinstance(value, bool):
            return value
        return SearchRequest.model_validate(value)


# -- responses -------------------------------------------------------------------------------


class TextContent(Model):
    """MCP's TextContent, the content AMS's messages carry."""

    type: Literal["text"] = "text"
    text: str


class PromptMessage(Model):
    """One message of the hydrated prompt, in AMS's shape: a system (or developer) message
    stays system; tool and other roles are sent as assistant, as AMS does."""

    role: Role
    content: TextContent


class PartTokens(Model):
    """What one part of the prompt used of the tokens it was allowed."""

    used: int = Field(description="tokens of the messages this part added")
    allowed: int = Field(description="tokens this part could use")
    items: int = Field(description="messages or memories shown (a block: 1)")
    dropped: int = Field(description="found but left out to fit the allowance")
    truncated: bool = Field(default=False, description="a block shown cut short to fit")


class PromptParts(Model):
    summary: PartTokens
    scratchpad: PartTokens
    recalled: PartTokens
    long_term: PartTokens
    recent: PartTokens
    query: PartTokens


class HydratedPrompt(Model):
    """POST /v1/memory/prompt answer: AMS's `messages` (and `long_term_memories`), with
    memkit's token accounting."""

    messages: list[PromptMessage]
    parts: PromptParts
    total_tokens: int = Field(description="tokens of every message (memkit's estimate)")
    token_budget: int
    long_term_memories: list[MemoryHit] | None = Field(
        default=None, description="the long-term memories in the prompt (null when none)"
    )
