"""boto3's own AgentCore clients pointed at memkit: `bedrock-agentcore` (events, records) and
`bedrock-agentcore-control` (memories), created with `endpoint_url=`. With `token` each
request carries `Authorization: Bearer <token>` in place of its SigV4 signature, as memkit's
JWT authorizer expects: the SDK's own hook (memkit.client.agentcore), so every AgentCore test
runs through it."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from memkit.client.agentcore import AgentCoreAuth

DATA_PLANE = "bedrock-agentcore"
CONTROL_PLANE = "bedrock-agentcore-control"


def agentcore_client(
    url: str, token: str | None = None, service: str = DATA_PLANE, validate: bool = True
) -> Any:
    """A boto3 client of `service` against memkit at `url`, no retries (a test sees the
    first answer); `validate=False` sends what botocore itself would refuse."""
    session = boto3.session.Session(
        aws_access_key_id="memkit", aws_secret_access_key="memkit", region_name="us-east-1"
    )
    client = session.client(
        service,
        endpoint_url=url,
        config=Config(
            retries={"max_attempts": 1, "mode": "standard"}, parameter_validation=validate
        ),
    )
    if token is not None:
        AgentCoreAuth(token=token).register(client.meta.events)
    return client
