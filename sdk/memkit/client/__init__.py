"""memkit.client: the Python SDK for the memkit API (docs/sdk.md).

    from memkit.client import MemkitClient

    with MemkitClient("http://127.0.0.1:8000", token=token) as memkit:
        memkit.append_messages("chat-1", [{"role": "user", "content": "I drink green tea"}])
        hits = memkit.search_memories("what does Ada drink?", user_id={"eq": "ada"})

Sync (MemkitClient) and asyncio (AsyncMemkitClient) clients over httpx, answering with the
API's own models (memkit.models); bearer, OAuth client-credentials and SigV4 auth; retries
that never apply a write twice; lazy pagination; scratchpad ETags; and tool helpers that run
the tool calls OpenAI, Anthropic and Bedrock return.

It ships with the project (`pip install "memkit[client]"`), never in the Lambda layer: its
source is sdk/memkit/client, outside layers/memkit/ which `sam build` packs.
"""

from memkit.client.aio import AsyncMemkitClient
from memkit.client.auth import BearerToken, ClientCredentials, SigV4
from memkit.client.errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    IndexingTimeout,
    InternalServerError,
    MemkitClientError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    ServiceUnavailableError,
    UnprocessableEntityError,
)
from memkit.client.retries import Retries
from memkit.client.sync import MemkitClient
from memkit.client.tools import (
    CallFormat,
    ToolCall,
    ToolOutcome,
    parse_tool_call,
    tool_result_messages,
)

__all__ = [
    "APIConnectionError",
    "APIError",
    "AsyncMemkitClient",
    "AuthenticationError",
    "BadRequestError",
    "BearerToken",
    "CallFormat",
    "ClientCredentials",
    "ConflictError",
    "IndexingTimeout",
    "InternalServerError",
    "MemkitClient",
    "MemkitClientError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
    "Retries",
    "ServiceUnavailableError",
    "SigV4",
    "ToolCall",
    "ToolOutcome",
    "UnprocessableEntityError",
    "parse_tool_call",
    "tool_result_messages",
]
