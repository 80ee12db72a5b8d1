"""An agent's turn loop on memkit's Python SDK, against `make serve`: no network, no model.

The "model" is a stand-in written for this example: a small deterministic rule-based planner
(`RulePlanner`). memkit's local model (memkit.llm.local) summarises and tags text but cannot
choose tools, and a real model needs the network. The planner answers as a model API does:
with tool calls in that API's shape (Bedrock Converse by default, `--format anthropic` or
`openai` for Chat Completions), and reads the tool results it is given back in that shape. Put
your model's client where `planner.respond(...)` is called; the rest of the loop stays.

Each turn:
1. the user's message is stored in the session (append_messages);
2. the prompt is hydrated (memory_prompt): the session's scratchpad, long-term memories and
   recent turns, within a token budget;
3. the model sees the prompt and memkit's tools (client.tools(format=...)) and asks for tool
   calls; each runs through memkit (run_tool_call), and the results go back to it in its API's
   shape (tool_result_messages);
4. the model answers, and the answer is stored.

    make serve                        # prints: export MEMKIT_TOKEN=...  (a token for user dev)
    export MEMKIT_TOKEN=...
    .venv/bin/python examples/agent_loop.py
    .venv/bin/python examples/agent_loop.py --format openai --turn "What do I drink?"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from memkit.client import MemkitClient, MemkitClientError, ToolOutcome, tool_result_messages
from memkit.client.tools import ToolsFormat
from memkit.ids import new_ulid
from memkit.models.prompt import HydratedPrompt

TURNS = [
    "Hi! My name is Ada.",
    "Remember that I drink green tea every morning.",
    "What do I drink in the morning?",
    "What is my name?",
]
NAME = re.compile(r"\bmy name is (\w+)", re.IGNORECASE)
REMEMBER = re.compile(r"^remember that (.+?)[.!]*$", re.IGNORECASE)
ASKS_NAME = re.compile(r"\bwhat(?:'s| is) my name\b", re.IGNORECASE)
NOTED_NAME = re.compile(r"^name: (\w+)", re.MULTILINE)


def tool_names(tools: list[dict[str, Any]]) -> set[str]:
    """The names of tool definitions in any of the three formats."""
    names = set()
    for tool in tools:
        spec = tool.get("toolSpec") or tool.get("function") or tool
        names.add(spec["name"])
    return names


def content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of an Anthropic or Converse message (none for plain text)."""
    content = message.get("content")
    return content if isinstance(content, list) else []


def second_person(fact: str) -> str:
    """The user's words said back to them ("I drink tea" -> "you drink tea")."""
    swaps = {"i": "you", "my": "your", "me": "you", "am": "are", "i'm": "you're"}
    return " ".join(swaps.get(word.lower(), word) for word in fact.split())


class RulePlanner:
    """A stand-in for a model, deterministic and offline: it knows four kinds of message and
    memkit's tools, and speaks one model API's wire format (`api`)."""

    def __init__(self, api: str) -> None:
        self.api = api
        self._calls = 0

    def respond(
        self, prompt: HydratedPrompt, exchange: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The model's answer to the hydrated prompt and this turn's tool exchange so far: tool
        calls, or a text answer once it has the results."""
        said = prompt.messages[-1].content.text
        results = self._results(exchange)
        if not results:
            calls = [call for call in self._plan(said) if call[0] in tool_names(tools)]
            if calls:
                return self._tool_use(calls)
        return self._text(self._answer(said, prompt, results))

    def _plan(self, said: str) -> list[tuple[str, dict[str, Any]]]:
        if named := NAME.search(said):
            return [("update_working_memory", {"content": f"name: {named.group(1)}"})]
        if fact := REMEMBER.match(said.strip()):
            return [("add_memory", {"text": fact.group(1)})]
        if said.rstrip().endswith("?") and not ASKS_NAME.search(said):
            # Facts only: the question itself is a message of the session, indexed too.
            return [("search_memory", {"query": said, "memory_type": "semantic"})]
        return []

    def _answer(self, said: str, prompt: HydratedPrompt, results: dict[str, Any]) -> str:
        if ASKS_NAME.search(said):
            # From the scratchpad block memkit put in the prompt: no tool needed.
            blocks = "\n".join(m.content.text for m in prompt.messages if m.role == "system")
            noted = NOTED_NAME.search(blocks)
            return f"Your name is {noted.group(1)}." if noted else "You have not told me."
        if "update_working_memory" in results:
            named = NAME.search(said)
            return f"Nice to meet you, {named.group(1) if named else 'there'}. I noted your name."
        if "add_memory" in results:
            added = results["add_memory"]
            fact = second_person(REMEMBER.match(said.strip()).group(1))  # type: ignore[union-attr]
            if added.get("result", {}).get("id") is None:
                return f"I already knew that {fact}."
            return f"I'll remember that {fact}."
        if "search_memory" in results:
            hits = results["search_memory"].get("result") or []
            return f"You told me: {second_person(hits[0]['text'])}." if hits else "I don't know."
        return "OK."

    def _results(self, exchange: list[dict[str, Any]]) -> dict[str, Any]:
        """Tool name -> the result given back, read from this API's messages."""
        names: dict[str, str] = {}
        results: dict[str, Any] = {}
        for message in exchange:
            for call_id, name in self._calls_in(message):
                names[call_id] = name
            for call_id, answer in self._results_in(message):
                results[names[call_id]] = answer
        return results

    def _calls_in(self, message: dict[str, Any]) -> list[tuple[str, str]]:
        if self.api == "openai":
            calls = message.get("tool_calls") or []
            return [(c["id"], c["function"]["name"]) for c in calls]
        blocks = content_blocks(message)
        if self.api == "anthropic":
            return [(b["id"], b["name"]) for b in blocks if b.get("type") == "tool_use"]
        return [(b["toolUse"]["toolUseId"], b["toolUse"]["name"]) for b in blocks if "toolUse" in b]

    def _results_in(self, message: dict[str, Any]) -> list[tuple[str, Any]]:
        if self.api == "openai":
            if message.get("role") != "tool":
                return []
            return [(message["tool_call_id"], json.loads(message["content"]))]
        blocks = content_blocks(message)
        if self.api == "anthropic":
            return [
                (b["tool_use_id"], json.loads(b["content"]))
                for b in blocks
                if b.get("type") == "tool_result"
            ]
        return [
            (b["toolResult"]["toolUseId"], b["toolResult"]["content"][0]["json"])
            for b in blocks
            if "toolResult" in b
        ]

    def _tool_use(self, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        """The assistant message asking for these calls, as this API returns it."""
        ids = []
        for _ in calls:
            self._calls += 1
            ids.append(f"call_{self._calls}")
        if self.api == "openai":
            tool_calls = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, (n, a) in zip(ids, calls, strict=True)
            ]
            return {"role": "assistant", "content": None, "tool_calls": tool_calls}
        if self.api == "anthropic":
            blocks = [
                {"type": "tool_use", "id": i, "name": n, "input": a}
                for i, (n, a) in zip(ids, calls, strict=True)
            ]
            return {"role": "assistant", "content": blocks}
        blocks = [
            {"toolUse": {"toolUseId": i, "name": n, "input": a}}
            for i, (n, a) in zip(ids, calls, strict=True)
        ]
        return {"role": "assistant", "content": blocks}

    def _text(self, text: str) -> dict[str, Any]:
        if self.api == "openai":
            return {"role": "assistant", "content": text}
        if self.api == "anthropic":
            return {"role": "assistant", "content": [{"type": "text", "text": text}]}
        return {"role": "assistant", "content": [{"text": text}]}


def tool_calls_of(api: str, message: dict[str, Any]) -> list[Any]:
    """The tool calls in an assistant message, where each API puts them."""
    if api == "openai":
        return list(message.get("tool_calls") or [])
    blocks = content_blocks(message)
    if api == "anthropic":
        return [b for b in blocks if b.get("type") == "tool_use"]
    return [b for b in blocks if "toolUse" in b]


def text_of(api: str, message: dict[str, Any]) -> str:
    if api == "openai":
        return str(message["content"])
    return "".join(b.get("text", "") for b in message["content"])


def turn(
    memkit: MemkitClient,
    planner: RulePlanner,
    tools: list[dict[str, Any]],
    session_id: str,
    user_id: str,
    said: str,
) -> list[str]:
    """One turn of the loop; returns the lines a user sees."""
    lines = [f"> {said}"]
    memkit.append_messages(session_id, [{"role": "user", "content": said}], user_id=user_id)
    prompt = memkit.memory_prompt(
        said, session={"session_id": session_id, "user_id": user_id}, recent_messages_limit=10
    )
    exchange: list[dict[str, Any]] = []
    answer = planner.respond(prompt, exchange, tools)
    while calls := tool_calls_of(planner.api, answer):
        outcomes: list[ToolOutcome] = []
        for call in calls:
            outcome = memkit.run_tool_call(call, session_id=session_id)
            outcomes.append(outcome)
            given = outcome.call.arguments  # JSON text from OpenAI, an object from the others
            shown = given if isinstance(given, str) else json.dumps(given)
            lines.append(f"  . {outcome.call.name} {shown} -> {'ok' if outcome.ok else 'error'}")
            stored = outcome.result if outcome.call.name == "add_memory" else None
            if isinstance(stored, dict) and stored.get("id"):
                # Indexing is asynchronous (about a second): wait, so the next turn finds it.
                memkit.wait_until_indexed([stored["id"]])
        exchange += [answer, *tool_result_messages(outcomes)]
        answer = planner.respond(prompt, exchange, tools)
    reply = text_of(planner.api, answer)
    memkit.append_messages(session_id, [{"role": "assistant", "content": reply}], user_id=user_id)
    lines.append(f"< {reply}")
    return lines


def run(
    memkit: MemkitClient,
    planner: RulePlanner,
    session_id: str,
    user_id: str,
    api: ToolsFormat,
    turns: Sequence[str],
) -> None:
    """The conversation: the tools memkit offers, each turn, then the working memory."""
    tools = memkit.tools(api, session_id=session_id, user_id=user_id)
    names = ", ".join(sorted(tool_names(tools)))
    print(f"session {session_id}, user {user_id}; tools ({api}): {names}")
    for said in turns:
        print("\n".join(turn(memkit, planner, tools, session_id, user_id, said)), flush=True)
    pad = memkit.get_scratchpad(session_id, user_id=user_id)
    print(f"working memory (version {pad.version}):\n{pad.content or ''}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--url", help="the API (default: MEMKIT_URL, else http://127.0.0.1:8000)")
    parser.add_argument("--token", help="a bearer token (default: MEMKIT_TOKEN)")
    parser.add_argument("--user", default="dev", help="the user (default dev: make serve's token)")
    parser.add_argument("--session", help="the session id (default: a new one)")
    parser.add_argument("--format", choices=["bedrock", "anthropic", "openai"], default="bedrock")
    parser.add_argument(
        "--turn", action="append", help="what the user says (repeat; default: a demo)"
    )
    args = parser.parse_args(argv)
    url = args.url or os.environ.get("MEMKIT_URL", "http://127.0.0.1:8000")
    memkit = MemkitClient(url, token=args.token or os.environ.get("MEMKIT_TOKEN") or None)
    session_id = args.session or f"agent-demo-{new_ulid()}"
    planner = RulePlanner(args.format)
    try:
        with memkit:
            run(memkit, planner, session_id, args.user, args.format, args.turn or TURNS)
    except MemkitClientError as error:  # said as the API said it: status, code, detail
        print(f"memkit: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
