"""examples/agentcore_agent.py, an agent on the bedrock-agentcore SDK's memory clients, runs
against the local stack as `make serve` runs it (bearer tokens checked), switched to memkit by
its environment alone, in the environment of its own `make` gives it (.tools/agentcore)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memkit.identity import ADMIN
from memkit_dev.local.auth import mint
from memkit_dev.local.stack import LocalStack
from tests.agentcore import agentcore_client
from tests.conftest import ROOT
from tests.examples import run_example
from tests.waits import eventually

pytestmark = pytest.mark.integration
EXAMPLE = "agentcore_agent.py"
# Where `make` installs the bedrock-agentcore SDK beside memkit's (the Makefile's AGENTCORE).
AGENT_PYTHON = ROOT / ".tools" / "agentcore" / "bin" / "python"
JWT_STACK_OPTIONS = {"table_name": "memkit-agentcore-example"}
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


def run_agent(stack: LocalStack, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The agent as a command, with the environment that switches it to memkit: boto3's
    endpoint variables and the token; no AWS credentials."""
    if not AGENT_PYTHON.exists():
        pytest.fail(f"{AGENT_PYTHON} is missing: `make .tools/agentcore/.installed` makes it")
    environment = {
        "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE": stack.url,
        "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE_CONTROL": stack.url,
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
        "AWS_CONFIG_FILE": "/nonexistent/config",
        "MEMKIT_TOKEN": token,
    }
    return run_example(AGENT_PYTHON, EXAMPLE, args, environment, without=AWS_VARIABLES, timeout=180)


def test_the_sdk_agent_stores_its_turns_in_memkit_and_reads_them_back(
    jwt_stack: LocalStack, dev_keys: Path
) -> None:
    # Given an admin's token (the agent makes its memory on first run)
    token = mint(dev_keys, "ops", "default", [ADMIN])

    # When the agent talks in one session, then runs again
    first = run_agent(
        jwt_stack,
        token,
        "--session",
        "s1",
        "I drink green tea every morning",
        "What did I just say?",
    )
    again = run_agent(jwt_stack, token, "--session", "s1", "What did I just say?")

    # Then it made its memory once, stored each turn as an event and read the last ones back
    assert first.returncode == 0, first.stderr
    assert again.returncode == 0, again.stderr
    assert "< Noted: I drink green tea every morning" in first.stdout
    assert "< You just said: I drink green tea every morning" in first.stdout
    assert "< You just said: What did I just say?" in again.stdout
    memory = first.stdout.split()[1]
    assert memory.startswith("SupportAgentMemory-")
    assert again.stdout.split()[1] == memory


def test_a_later_session_answers_from_what_extraction_made_of_an_earlier_one(
    jwt_stack: LocalStack, dev_keys: Path
) -> None:
    # Given the agent told something in one session
    token = mint(dev_keys, "ops", "default", [ADMIN])
    told = run_agent(
        jwt_stack, token, "--actor", "bob", "--session", "monday", "I drink green tea every morning"
    )
    assert told.returncode == 0, told.stderr
    memory_id = told.stdout.split()[1].rstrip(",")

    # When memkit's curation has summarised that session into the memory's namespace (in the
    # background, as AgentCore's extraction runs), and the agent is asked in a new session
    agent = agentcore_client(jwt_stack.url, token)
    summarised = eventually(
        lambda: agent.retrieve_memory_records(
            memoryId=memory_id,
            namespacePath="/summaries/bob",
            searchCriteria={"searchQuery": "what does bob drink"},
        )["memoryRecordSummaries"],
        timeout=120,
    )
    asked = run_agent(jwt_stack, token, "--actor", "bob", "--session", "friday", "What do I drink?")

    # Then it answers from the earlier session's memory
    assert summarised, "no summary record of session monday"
    assert asked.returncode == 0, asked.stderr
    answer = next(line for line in asked.stdout.splitlines() if line.startswith("< "))
    assert answer.startswith("< From what you told me before:")
    assert "green tea" in answer
