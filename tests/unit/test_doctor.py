"""`memkit doctor`'s dead-letter check against a CloudFormation stack on moto (its outputs name
the queues, as template.yaml's do), and its reading of a JWT's claims. The checks against a
running stack are in tests/integration/test_transfer.py."""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from memkit_dev.doctor import FAIL, OK, Findings, check_dead_letters, jwt_claims, stack_outputs

QUEUES = ("IndexerDeadLetterQueue", "CuratorDeadLetterQueue", "MemoryWorkDeadLetterQueue")
TEMPLATE = {
    "Resources": {name: {"Type": "AWS::SQS::Queue"} for name in QUEUES},
    "Outputs": {
        "ApiUrl": {"Value": "https://abc.execute-api.us-east-1.amazonaws.com"},
        **{f"{name}Url": {"Value": {"Ref": name}} for name in QUEUES},
    },
}


@pytest.fixture
def aws() -> Iterator[Any]:
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        session.client("cloudformation").create_stack(
            StackName="memkit", TemplateBody=json.dumps(TEMPLATE)
        )
        yield session


def check(aws: Any, stack: str = "memkit") -> tuple[str, str]:
    args = argparse.Namespace(stack_name=stack, region="us-east-1")
    findings = Findings()
    findings.outputs, findings.stack_error = stack_outputs(stack, "us-east-1", aws)
    result = check_dead_letters(args, findings, aws)
    return result.status, result.reason


def test_empty_dead_letter_queues_are_ok_and_the_api_url_comes_from_the_outputs(aws: Any) -> None:
    outputs, error = stack_outputs("memkit", "us-east-1", aws)
    assert error is None
    assert outputs["ApiUrl"] == "https://abc.execute-api.us-east-1.amazonaws.com"
    assert check(aws) == (OK, "3 dead-letter queues empty")


def test_a_message_in_a_dead_letter_queue_fails_the_check_naming_the_queue(aws: Any) -> None:
    outputs, _ = stack_outputs("memkit", "us-east-1", aws)
    sqs = aws.client("sqs")
    for _ in range(2):
        sqs.send_message(QueueUrl=outputs["CuratorDeadLetterQueueUrl"], MessageBody="{}")

    status, reason = check(aws)

    assert status == FAIL
    assert "CuratorDeadLetterQueue 2" in reason
    assert "Indexer" not in reason


def test_a_stack_that_cannot_be_read_fails_with_the_reason(aws: Any) -> None:
    status, reason = check(aws, "no-such-stack")
    assert status == FAIL
    assert "cannot read stack no-such-stack" in reason
    assert "ValidationError" in reason


def test_a_jwts_claims_are_read_and_anything_else_is_not_a_jwt() -> None:
    payload = base64.urlsafe_b64encode(json.dumps({"sub": "ada"}).encode()).decode().rstrip("=")
    assert jwt_claims(f"h.{payload}.s") == {"sub": "ada"}
    assert jwt_claims("mk_abc_def") is None
    assert jwt_claims("a.b!.c") is None
