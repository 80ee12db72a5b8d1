"""memkit.client.agentcore's before-call handler: what it changes in a bedrock-agentcore call
(the request botocore then signs, or sends unsigned) for each auth mode."""

from __future__ import annotations

from typing import Any

import pytest

from memkit.client.agentcore import AgentCoreAuth

API = "https://abc123.execute-api.eu-west-1.amazonaws.com/memories/m-0123456789/events"


def _call(auth: AgentCoreAuth, url: str = API) -> tuple[dict[str, Any], dict[str, Any]]:
    """(params, context) of a call after the handler, as botocore's before-call passes them."""
    params: dict[str, Any] = {"url": url, "headers": {}}
    context: dict[str, Any] = {
        "auth_type": "v4",
        "client_region": "us-east-1",
        "signing": {"signing_name": "bedrock-agentcore", "region": "us-east-1"},
    }
    auth(params=params, context=context)
    return params, context


def test_sigv4_is_scoped_to_execute_api_in_the_apis_region() -> None:
    _, from_host = _call(AgentCoreAuth(sigv4=True))
    _, explicit = _call(AgentCoreAuth(sigv4=True, region="ap-south-1"))
    _, custom_domain = _call(AgentCoreAuth(sigv4=True), "https://memory.example.com/memories")

    assert from_host["signing"] == {"signing_name": "execute-api", "region": "eu-west-1"}
    assert explicit["signing"]["region"] == "ap-south-1"
    assert custom_domain["signing"]["region"] == "us-east-1"  # the client's region
    assert from_host["auth_type"] == "v4"  # still signed


def test_a_token_replaces_the_signature() -> None:
    tokens = iter(["first", "second"])
    auth = AgentCoreAuth(token=lambda: next(tokens))

    first, context = _call(auth)
    second, _ = _call(auth)

    assert first["headers"]["Authorization"] == "Bearer first"
    assert second["headers"]["Authorization"] == "Bearer second"  # renewed per call
    assert context["auth_type"] == "none"  # botocore signs nothing


@pytest.mark.parametrize(
    "options",
    [{}, {"token": "t", "sigv4": True}, {"token": "  "}],
    ids=["neither", "both", "empty token"],
)
def test_one_mode_must_be_given(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        AgentCoreAuth(**options)
