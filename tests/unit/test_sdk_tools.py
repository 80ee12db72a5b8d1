"""Tool calls as the openai, anthropic and boto3 SDKs return them, read by the SDK
(memkit.client.tools), and the results it gives back, checked against those SDKs' own types."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types import MessageParam, ToolResultBlockParam
from botocore.stub import Stubber
from botocore.validate import ParamValidator
from openai.types.chat import ChatCompletion, ChatCompletionToolMessageParam
from openai.types.responses import Response
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter

from memkit.client import CallFormat, ToolOutcome, parse_tool_call, tool_result_messages
from memkit.models.api import ToolFailure, ToolSuccess

FOUND = ToolSuccess(result=[{"id": "tea", "text": "Ada drinks green tea", "relevance": 0.8}])
REFUSED = ToolFailure(error='invalid arguments for search_memory: missing argument "query"')


def openai_chat_call() -> Any:
    """message.tool_calls[0] of a Chat Completions answer, as openai returns it."""
    completion = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {
                                    "name": "search_memory",
                                    "arguments": '{"query": "green tea"}',
                                },
                            }
                        ],
                    },
                }
            ],
        }
    )
    tool_calls = completion.choices[0].message.tool_calls
    assert tool_calls
    return tool_calls[0]


def openai_responses_call() -> Any:
    """An output item of type function_call of a Responses answer, as openai returns it."""
    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-4.1",
            "output": [
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_2",
                    "name": "search_memory",
                    "arguments": '{"query": "green tea"}',
                    "status": "completed",
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )
    return response.output[0]


def anthropic_call() -> Any:
    """A tool_use block of a Messages answer, as anthropic returns it."""
    message = AnthropicMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "search_memory",
                    "input": {"query": "green tea"},
                },
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
    return message.content[1]


CONVERSE_ANSWER = {
    "output": {
        "message": {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "search_memory",
                        "input": {"query": "green tea"},
                    }
                }
            ],
        }
    },
    "stopReason": "tool_use",
    "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
    "metrics": {"latencyMs": 100},
}


def bedrock_answer() -> dict[str, Any]:
    """A Converse answer as boto3 returns it (botocore Stubber: the real response shape)."""
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response("converse", CONVERSE_ANSWER)
        messages = [{"role": "user", "content": [{"text": "what do I drink?"}]}]
        return client.converse(modelId="amazon.nova-lite-v1:0", messages=messages)  # type: ignore[no-any-return]


def converse_problems(messages: list[dict[str, Any]]) -> str:
    """What botocore's own validation says of a Converse request carrying these messages."""
    model = boto3.client("bedrock-runtime", region_name="us-east-1").meta.service_model
    shape = model.operation_model("Converse").input_shape
    report = ParamValidator().validate({"modelId": "m", "messages": messages}, shape)
    return report.generate_report() if report.has_errors() else ""


def test_each_sdks_tool_call_is_read_with_its_id_name_and_arguments() -> None:
    bedrock_block = bedrock_answer()["output"]["message"]["content"][0]

    calls = [
        parse_tool_call(openai_chat_call()),
        parse_tool_call(openai_responses_call()),
        parse_tool_call(anthropic_call()),
        parse_tool_call(bedrock_block),
        parse_tool_call(bedrock_block["toolUse"]),
    ]

    assert [(c.format, c.id, c.name) for c in calls] == [
        (CallFormat.OPENAI, "call_1", "search_memory"),
        (CallFormat.OPENAI_RESPONSES, "call_2", "search_memory"),
        (CallFormat.ANTHROPIC, "toolu_1", "search_memory"),
        (CallFormat.BEDROCK, "tooluse_1", "search_memory"),
        (CallFormat.BEDROCK, "tooluse_1", "search_memory"),
    ]
    # OpenAI sends JSON text (the API parses it); the others an object.
    assert [c.arguments for c in calls] == ['{"query": "green tea"}'] * 2 + [
        {"query": "green tea"}
    ] * 3


def test_dict_forms_of_the_openai_and_anthropic_calls_are_read_too() -> None:
    chat = parse_tool_call(openai_chat_call().model_dump())
    anthropic = parse_tool_call(anthropic_call().model_dump())

    assert (chat.format, chat.id, chat.arguments) == (
        CallFormat.OPENAI,
        "call_1",
        '{"query": "green tea"}',
    )
    assert (anthropic.format, anthropic.arguments) == (
        CallFormat.ANTHROPIC,
        {"query": "green tea"},
    )


def test_an_object_that_is_no_tool_call_is_refused() -> None:
    with pytest.raises(TypeError, match="not a tool call"):
        parse_tool_call({"role": "assistant", "content": "hi"})
    with pytest.raises(TypeError, match="without a tool name"):
        parse_tool_call({"type": "tool_use", "id": "x", "input": {}})


def test_openai_results_are_a_tool_message_and_a_function_call_output() -> None:
    chat = ToolOutcome(parse_tool_call(openai_chat_call()), FOUND)
    responses = ToolOutcome(parse_tool_call(openai_responses_call()), REFUSED)

    message = TypeAdapter(ChatCompletionToolMessageParam).validate_python(chat.to_message())
    item = TypeAdapter(FunctionCallOutput).validate_python(responses.to_message())

    assert message["tool_call_id"] == "call_1"
    assert json.loads(str(message["content"])) == FOUND.model_dump()
    assert item["call_id"] == "call_2"
    assert json.loads(str(item["output"])) == {"error": REFUSED.error}
    assert tool_result_messages([chat]) == [chat.to_message()]


def test_anthropic_results_go_back_in_one_user_message_with_is_error_on_a_failure() -> None:
    found = ToolOutcome(parse_tool_call(anthropic_call()), FOUND)
    refused = ToolOutcome(parse_tool_call(anthropic_call()), REFUSED)

    [message] = tool_result_messages([found, refused])
    TypeAdapter(MessageParam).validate_python(message)
    blocks = [TypeAdapter(ToolResultBlockParam).validate_python(b) for b in message["content"]]

    assert message["role"] == "user"
    assert [b["tool_use_id"] for b in blocks] == ["toolu_1", "toolu_1"]
    assert "is_error" not in blocks[0]
    assert blocks[1]["is_error"] is True


def test_bedrock_results_are_tool_result_blocks_converse_accepts() -> None:
    answer = bedrock_answer()
    assistant = answer["output"]["message"]
    found = ToolOutcome(parse_tool_call(assistant["content"][0]), FOUND)
    refused = ToolOutcome(parse_tool_call(assistant["content"][0]), REFUSED)

    [reply] = tool_result_messages([found])
    [refusal] = tool_result_messages([refused])

    assert (
        converse_problems([{"role": "user", "content": [{"text": "hi"}]}, assistant, reply]) == ""
    )
    assert reply["content"][0]["toolResult"] == {
        "toolUseId": "tooluse_1",
        "content": [{"json": FOUND.model_dump()}],
        "status": "success",
    }
    assert refusal["content"][0]["toolResult"]["status"] == "error"
    # The check is not vacuous: a misspelt key is refused.
    assert "Unknown parameter" in converse_problems(
        [{"role": "user", "content": [{"toolResults": {}}]}]
    )


def test_one_turns_results_come_from_one_api() -> None:
    chat = ToolOutcome(parse_tool_call(openai_chat_call()), FOUND)
    anthropic = ToolOutcome(parse_tool_call(anthropic_call()), FOUND)

    with pytest.raises(ValueError, match="one model API"):
        tool_result_messages([chat, anthropic])
    assert tool_result_messages([]) == []
