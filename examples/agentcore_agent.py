"""A support agent on the bedrock-agentcore SDK's memory, switched to memkit by its environment.

The agent is written for Amazon Bedrock AgentCore Memory: `MemoryClient` (control plane: its
memory, made once) and `MemorySessionManager` (data plane: each turn stored as an event, the
last turns read back, long-term memories retrieved). Nothing in it names memkit but one call,
`configure_from_env(session)`, which does nothing unless the environment asks for memkit:

    # AWS's AgentCore Memory: AWS credentials, as any boto3 program
    python examples/agentcore_agent.py --actor ada --session s1 "I drink green tea every morning"

    # memkit (`make serve` prints the token): boto3's own endpoint variables, and the token
    export AWS_ENDPOINT_URL_BEDROCK_AGENTCORE=http://127.0.0.1:8000
    export AWS_ENDPOINT_URL_BEDROCK_AGENTCORE_CONTROL=http://127.0.0.1:8000
    export MEMKIT_TOKEN=$(.venv/bin/memkit token --sub ops --admin)
    python examples/agentcore_agent.py --actor ada --session s1 "I drink green tea every morning"
    python examples/agentcore_agent.py --actor ada --session s2 "What do I drink?"

(AuthMode iam: `MEMKIT_AUTH=sigv4` and AWS credentials instead of the token.) The bedrock-
agentcore SDK pins its own dependencies, so it runs in an environment of its own:
`make .tools/agentcore/.installed` makes one (`.tools/agentcore/bin/python`), with memkit's SDK
as its wheel (`make wheels`, dist/memkit_client-*.whl).

The "model" is a rule-based stand-in, so the example runs with no network: a statement is
noted; a question is answered from the long-term memories AgentCore (or memkit) extracted
from earlier sessions (facts and preferences; summaries of sessions, the one strategy the
local stack's model can run), and "what did I just say?" from this session's last turns. Put
your model where `answer(...)` is.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import boto3
from bedrock_agentcore.memory import MemoryClient
from bedrock_agentcore.memory.constants import ConversationalMessage, MessageRole
from bedrock_agentcore.memory.session import MemorySession, MemorySessionManager

from memkit.client.agentcore import configure_from_env

MEMORY_NAME = "SupportAgentMemory"
FACTS = "/users/{actorId}/facts"
PREFERENCES = "/users/{actorId}/preferences"
SUMMARIES = "/summaries/{actorId}/{sessionId}"
STRATEGIES = [
    {"semanticMemoryStrategy": {"name": "facts", "namespaces": [FACTS]}},
    {"userPreferenceMemoryStrategy": {"name": "preferences", "namespaces": [PREFERENCES]}},
    {"summaryMemoryStrategy": {"name": "summaries", "namespaces": [SUMMARIES]}},
]
# Where a question looks, best first: the actor's facts and preferences, then the summaries
# of all its sessions (a path: every namespace under it).
RECALL = [FACTS, PREFERENCES, "/summaries/{actorId}"]


def find_or_make_memory(session: boto3.Session, name: str) -> str:
    """The id of the memory called `name`, made (ACTIVE) when there is none: what an agent's
    deployment does once. A name is unique in an account: CreateMemory refuses a second
    memory of one name ("already exists"), which the SDK reads as "use that one"."""
    memories = MemoryClient(region_name=session.region_name, boto3_session=session)
    memory = memories.create_or_get_memory(name=name, strategies=STRATEGIES, event_expiry_days=30)
    return str(memory["id"])


def recall(conversation: MemorySession, actor: str, question: str) -> list[str]:
    """The long-term memories of `actor` that best match `question`: facts, preferences,
    then what earlier sessions were about."""
    found: list[str] = []
    for template in RECALL:
        namespace = template.replace("{actorId}", actor)
        records = conversation.search_long_term_memories(
            query=question, namespace_path=namespace, top_k=3
        )
        found += [str(record["content"]["text"]) for record in records]
    return found


def last_user_words(conversation: MemorySession) -> str | None:
    """What the user said last in this session (its short-term memory), if anything: the
    SDK's last turns come newest first, each turn's messages in order."""
    for turn in conversation.get_last_k_turns(k=5):
        for message in turn:
            if message["role"] == MessageRole.USER.value:
                return str(message["content"]["text"])
    return None


def answer(text: str, conversation: MemorySession, actor: str) -> str:
    """The stand-in model: a statement is noted, a question answered from memory."""
    if not text.rstrip().endswith("?"):
        return f"Noted: {text}"
    if "just say" in text.lower():
        said = last_user_words(conversation)
        return f"You just said: {said}" if said else "You have not said anything yet."
    memories = recall(conversation, actor, text)
    print(f"  . {len(memories)} long-term memories for {actor!r}", flush=True)
    if not memories:
        return "I don't know yet."
    return f"From what you told me before: {memories[0]}"


def turn(conversation: MemorySession, actor: str, text: str) -> str:
    """One turn: the answer, then the user's words and the answer stored as one event."""
    reply = answer(text, conversation, actor)
    conversation.add_turns(
        [
            ConversationalMessage(text, MessageRole.USER),
            ConversationalMessage(reply, MessageRole.ASSISTANT),
        ]
    )
    return reply


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--actor", default="ada", help="who talks (AgentCore's actorId)")
    parser.add_argument("--session", required=True, help="the conversation (its sessionId)")
    parser.add_argument("--memory-id", help="the memory (default: find or make SupportAgentMemory)")
    parser.add_argument("turns", nargs="+", help="what the user says, a turn each")
    args = parser.parse_args(argv)

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    session = configure_from_env(boto3.Session(region_name=region))
    memory_id = args.memory_id or find_or_make_memory(session, MEMORY_NAME)
    manager = MemorySessionManager(memory_id=memory_id, region_name=region, boto3_session=session)
    conversation = manager.create_memory_session(actor_id=args.actor, session_id=args.session)
    print(f"memory {memory_id}, actor {args.actor}, session {args.session}", flush=True)
    for text in args.turns:
        print(f"> {text}", flush=True)
        print(f"< {turn(conversation, args.actor, text)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
