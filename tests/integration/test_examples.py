"""examples/agent_loop.py runs as a user runs it against `make serve` (here: the local stack
with bearer tokens checked, auth jwt), in each model API's format, and says what it should."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memkit.client import MemkitClient
from memkit_dev.local.auth import mint
from memkit_dev.local.stack import LocalStack
from tests.examples import run_example

pytestmark = pytest.mark.integration
EXAMPLE = "agent_loop.py"
# A table of its own: a stack that finds another module's items in moto rebuilds its index.
JWT_STACK_OPTIONS = {"table_name": "memkit-examples"}


def run_loop(jwt_stack: LocalStack, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The example as a command, with the variables `make serve` tells a user to set."""
    environment = {"MEMKIT_URL": jwt_stack.url, "MEMKIT_TOKEN": token}
    return run_example(sys.executable, EXAMPLE, args, environment)


def test_the_agent_loop_remembers_across_turns_and_sessions(
    jwt_stack: LocalStack, dev_keys: Path
) -> None:
    # Given a token for ada, as `memkit token --sub ada` mints it
    token = mint(dev_keys, "ada", "default", ["memory:read", "memory:write"])

    # When the demo runs three times, each in a new session and another model API's format
    runs = [
        run_loop(jwt_stack, token, "--user", "ada", "--format", api, "--session", f"demo-{api}")
        for api in ("bedrock", "anthropic", "openai")
    ]

    # Then each run stores, recalls and answers from memory
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert "< Nice to meet you, Ada. I noted your name." in done.stdout
        assert "  . search_memory " in done.stdout
        assert "< You told me: you drink green tea every morning." in done.stdout
        assert "< Your name is Ada." in done.stdout
        assert "working memory (version 1):\nname: Ada" in done.stdout
    first, *later = (done.stdout for done in runs)
    assert "< I'll remember that you drink green tea every morning." in first
    # Long-term memory is the user's: later sessions find the fact already known.
    assert all("< I already knew that you drink green tea every morning." in out for out in later)
    # And the tool calls went through in each API's own shape
    for api, done in zip(("bedrock", "anthropic", "openai"), runs, strict=True):
        assert f"tools ({api}): add_memory, clear_working_memory, get_working_memory" in done.stdout
        assert '. add_memory {"text": "I drink green tea every morning"} -> ok' in done.stdout
    with MemkitClient(jwt_stack.url, token=token) as memkit:
        session = memkit.get_session("demo-openai")
        memories = list(memkit.iter_memories(user_id={"eq": "ada"}, memory_type={"eq": "semantic"}))
    assert [m.role for m in session.messages] == ["user", "assistant"] * 4
    assert [m.text for m in memories] == ["I drink green tea every morning"]


def test_the_agent_loop_says_why_when_the_token_names_another_user(
    jwt_stack: LocalStack, dev_keys: Path
) -> None:
    token = mint(dev_keys, "bob", "default", ["memory:read", "memory:write"])

    done = run_loop(jwt_stack, token, "--user", "ada", "--turn", "Hello")

    assert done.returncode == 1
    assert done.stderr.startswith("memkit: 403 forbidden: ")
    assert "Traceback" not in done.stderr
