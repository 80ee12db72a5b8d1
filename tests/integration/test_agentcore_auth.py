"""boto3's own `bedrock-agentcore` clients made to call memkit by configuration: the endpoint
from boto3's AWS_ENDPOINT_URL_BEDROCK_AGENTCORE(_CONTROL) variables, the auth from
memkit.client.agentcore: a bearer token (AuthMode jwt, apikey) sent unsigned, or SigV4
re-scoped to execute-api (AuthMode iam) and checked by the gateway as API Gateway checks it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from memkit.client.agentcore import AgentCoreAuth, configure_from_env, configure_session
from memkit.identity import ADMIN, READ, WRITE
from memkit_dev.local.auth import IamPrincipal, mint
from memkit_dev.local.stack import LocalStack
from tests.integration.conftest import small_stack

pytestmark = pytest.mark.integration
JWT_STACK_OPTIONS = {"table_name": "memkit-agentcore-auth", "index_messages": False}
IAM_STACK_OPTIONS = {"table_name": "memkit-agentcore-iam", "index_messages": False}
WHEN = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
REGION = "us-east-1"


def _say(agent: Any, memory_id: str, text: str) -> None:
    """Ada's event in session chat: `text`, her words."""
    turn = {"conversational": {"content": {"text": text}, "role": "USER"}}
    agent.create_event(
        memoryId=memory_id, actorId="ada", sessionId="chat", eventTimestamp=WHEN, payload=[turn]
    )


@pytest.fixture
def memkit_endpoints(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Point boto3's bedrock-agentcore clients at a stack by boto3's own variables, with no
    AWS credentials anywhere (a bearer token needs none)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    def point_at(stack: LocalStack) -> None:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", stack.url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE_CONTROL", stack.url)

    return point_at


def _memory(control: Any, name: str) -> str:
    made = control.create_memory(
        name=name,
        eventExpiryDuration=7,
        memoryStrategies=[{"semanticMemoryStrategy": {"name": "facts"}}],
    )
    return str(made["memory"]["id"])


def test_a_token_session_calls_memkit_unsigned_with_no_aws_credentials(
    jwt_stack: LocalStack, dev_keys: Path, memkit_endpoints: Any
) -> None:
    # Given a session configured with tokens, its clients found by boto3's variables alone
    memkit_endpoints(jwt_stack)
    admin = mint(dev_keys, "ops", "default", [ADMIN])
    ada = mint(dev_keys, "ada", "default", [READ, WRITE])
    control = configure_session(boto3.Session(region_name=REGION), token=admin).client(
        "bedrock-agentcore-control"
    )
    agent = configure_session(boto3.Session(region_name=REGION), token=lambda: ada).client(
        "bedrock-agentcore"
    )
    assert boto3.Session().get_credentials() is None

    # When the admin makes a memory and the agent writes and lists its events
    memory_id = _memory(control, "tokens")
    _say(agent, memory_id, "I drink green tea")
    listed = agent.list_events(memoryId=memory_id, actorId="ada", sessionId="chat")["events"]

    # Then memkit answers them as the token's user
    assert agent.meta.endpoint_url == jwt_stack.url
    assert [e["payload"][0]["conversational"]["content"]["text"] for e in listed] == [
        "I drink green tea"
    ]
    with pytest.raises(agent.exceptions.AccessDeniedException):
        agent.list_events(memoryId=memory_id, actorId="bob", sessionId="chat")


def test_without_the_hook_a_plain_client_is_refused_by_the_gateway(
    jwt_stack: LocalStack, memkit_endpoints: Any
) -> None:
    memkit_endpoints(jwt_stack)
    session = boto3.Session(
        aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="secret", region_name=REGION
    )

    with pytest.raises(ClientError) as refused:
        session.client("bedrock-agentcore").list_actors(memoryId="tokens-0123456789")

    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 401


def test_a_sigv4_session_signs_for_execute_api_and_acts_as_its_account(
    iam_stack: LocalStack,
    iam_principals: tuple[IamPrincipal, IamPrincipal],
    memkit_endpoints: Any,
) -> None:
    # Given sessions of two accounts' principals, configured for SigV4
    memkit_endpoints(iam_stack)
    first, second = (
        boto3.Session(
            aws_access_key_id=p.access_key_id,
            aws_secret_access_key=p.secret_access_key,
            region_name=REGION,
        )
        for p in iam_principals
    )
    mine = configure_session(first, sigv4=True)
    theirs = configure_session(second, sigv4=True)

    # When the first makes a memory and an event (an IAM caller is a backend: any actor)
    memory_id = _memory(mine.client("bedrock-agentcore-control"), "signed")
    agent = mine.client("bedrock-agentcore")
    _say(agent, memory_id, "I live in Oslo")
    actors = agent.list_actors(memoryId=memory_id)["actorSummaries"]

    # Then it reads them back, and the other account (another tenant) finds no such memory
    assert [a["actorId"] for a in actors] == ["ada"]
    other = theirs.client("bedrock-agentcore")
    with pytest.raises(other.exceptions.ResourceNotFoundException):
        other.list_actors(memoryId=memory_id)


def test_an_unconfigured_sigv4_client_is_refused_for_its_signing_name(
    iam_stack: LocalStack,
    iam_principals: tuple[IamPrincipal, IamPrincipal],
    memkit_endpoints: Any,
) -> None:
    memkit_endpoints(iam_stack)
    first, _ = iam_principals
    session = boto3.Session(
        aws_access_key_id=first.access_key_id,
        aws_secret_access_key=first.secret_access_key,
        region_name=REGION,
    )

    with pytest.raises(ClientError) as refused:
        session.client("bedrock-agentcore").list_actors(memoryId="signed-0123456789")

    error = refused.value.response["Error"]
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert error["Code"] == "InvalidSignatureException"
    assert error["Message"] == "Credential should be scoped to correct service: 'execute-api'. "


def test_one_client_can_be_configured_and_the_environment_chooses_the_mode(
    jwt_stack: LocalStack, dev_keys: Path, memkit_endpoints: Any
) -> None:
    memkit_endpoints(jwt_stack)
    token = mint(dev_keys, "ada", "default", [READ, WRITE])
    client = boto3.Session(region_name=REGION).client("bedrock-agentcore")
    AgentCoreAuth(token=token).register(client.meta.events)
    from_env = configure_from_env(boto3.Session(region_name=REGION), {"MEMKIT_TOKEN": token})
    untouched = boto3.Session(region_name=REGION)

    # memkit answers both (the token passed the gateway): no such memory
    for configured in (client, from_env.client("bedrock-agentcore")):
        with pytest.raises(configured.exceptions.ResourceNotFoundException):
            configured.list_actors(memoryId="nothing-0123456789")
    assert configure_from_env(untouched, {}) is untouched
    with pytest.raises(ValueError, match="sigv4 or token"):
        configure_from_env(untouched, {"MEMKIT_AUTH": "basic"})


def test_an_api_key_is_sent_as_the_key_authorizer_reads_it(
    tmp_path: Path, memkit_endpoints: Any
) -> None:
    config = small_stack(
        engine="moto",
        auth="apikey",
        table_name="memkit-agentcore-keys",
        data_dir=tmp_path,
        index_messages=False,
    )
    with LocalStack(config) as stack:
        memkit_endpoints(stack)
        assert stack.dev_key is not None
        agent = configure_session(boto3.Session(region_name=REGION), token=stack.dev_key)

        with pytest.raises(ClientError) as answered:
            agent.client("bedrock-agentcore").list_actors(memoryId="nothing-0123456789")

    assert answered.value.response["Error"]["Code"] == "ResourceNotFoundException"
