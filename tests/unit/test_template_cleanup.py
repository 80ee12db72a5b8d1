"""template.yaml's scheduled cleanup: the schedule, its dead letters, its alarms, its IAM."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memkit_dev.local.template import load_template
from tests.events import load_event

ROOT = Path(__file__).resolve().parents[2]
FUNCTION = "CleanupFunction"
DLQ = {"Fn::GetAtt": ["CleanupDeadLetterQueue", "Arn"]}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template(ROOT / "template.yaml")


def _function(template: dict[str, Any]) -> dict[str, Any]:
    return dict(template["Resources"][FUNCTION]["Properties"])


def _schedule(template: dict[str, Any]) -> dict[str, Any]:
    [event] = [e for e in _function(template)["Events"].values() if e["Type"] == "ScheduleV2"]
    return dict(event["Properties"])


def _alarm(template: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(template["Resources"][name]["Properties"])


def test_the_cleanup_runs_on_a_schedule_at_the_rate_the_parameter_sets(
    template: dict[str, Any],
) -> None:
    schedule = _schedule(template)

    assert schedule["ScheduleExpression"] == {"Ref": "CleanupRate"}
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["Name"] == {"Fn::Sub": "memkit-${Stage}-cleanup"}  # one per stage
    assert template["Parameters"]["CleanupRate"]["Default"] == "rate(15 minutes)"


@pytest.mark.parametrize(
    ("rate", "accepted"),
    [
        ("rate(15 minutes)", True),
        ("rate(1 hour)", True),
        ("rate(2 days)", True),
        ("rate(0 minutes)", False),
        ("cron(0 * * * ? *)", False),
        ("rate(5 seconds)", False),
        ("15 minutes", False),
    ],
)
def test_the_rate_parameter_takes_rate_expressions(
    template: dict[str, Any], rate: str, accepted: bool
) -> None:
    pattern = template["Parameters"]["CleanupRate"]["AllowedPattern"]

    assert bool(re.fullmatch(pattern, rate)) is accepted


def test_undelivered_and_failed_runs_reach_a_dead_letter_queue_an_alarm_watches(
    template: dict[str, Any],
) -> None:
    schedule = _schedule(template)
    invoke = _function(template)["EventInvokeConfig"]
    queue = template["Resources"]["CleanupDeadLetterQueue"]["Properties"]
    alarm = _alarm(template, "CleanupDeadLetterAlarm")

    # The schedule's undeliverable invocations, after its retries
    assert schedule["DeadLetterConfig"] == {"Arn": DLQ}
    assert schedule["RetryPolicy"]["MaximumRetryAttempts"] >= 1
    # Runs that failed: not retried by Lambda (the next scheduled run is the retry)
    assert invoke["MaximumRetryAttempts"] == 0
    assert invoke["DestinationConfig"]["OnFailure"] == {"Type": "SQS", "Destination": DLQ}
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["CleanupDeadLetterQueue", "QueueName"]}}
    ]
    assert (alarm["MetricName"], alarm["ComparisonOperator"], alarm["Threshold"]) == (
        "ApproximateNumberOfMessagesVisible",
        "GreaterThanThreshold",
        0,
    )
    assert template["Outputs"]["CleanupDeadLetterQueueUrl"]["Value"] == {
        "Ref": "CleanupDeadLetterQueue"
    }


def test_an_alarm_fires_on_any_error_of_the_function(template: dict[str, Any]) -> None:
    alarm = _alarm(template, "CleanupErrorAlarm")

    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/Lambda",
        "Errors",
        "Sum",
    )
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": FUNCTION}}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["TreatMissingData"] == "notBreaching"


def test_the_function_logs_to_its_own_group_and_has_minutes_to_work(
    template: dict[str, Any],
) -> None:
    function = _function(template)
    logs = template["Resources"]["CleanupFunctionLogs"]["Properties"]

    assert function["LoggingConfig"] == {"LogGroup": {"Ref": "CleanupFunctionLogs"}}
    assert logs["LogGroupName"] == {"Fn::Sub": "/aws/lambda/memkit-${Stage}-cleanup"}
    assert logs["RetentionInDays"] == {"Ref": "LogRetentionInDays"}
    # The run keeps 10 s or 15% in reserve: a timeout of minutes leaves most of it for work.
    assert function["Timeout"] >= 120
    assert function["Environment"]["Variables"]["MEMKIT_TABLE_NAME"] == {"Ref": "MemoryTable"}


def test_the_function_reads_and_deletes_in_the_table_but_never_scans(
    template: dict[str, Any],
) -> None:
    [table] = [
        statement
        for policy in _function(template)["Policies"]
        if "Statement" in policy
        for statement in policy["Statement"]
        if statement["Sid"] == "MemoryTableLifecycle"
    ]

    assert {"dynamodb:Query", "dynamodb:DeleteItem", "dynamodb:PutItem"} <= set(table["Action"])
    assert "dynamodb:Scan" not in table["Action"]
    assert table["Resource"] == [
        {"Fn::GetAtt": ["MemoryTable", "Arn"]},
        {"Fn::Sub": "${MemoryTable.Arn}/index/*"},
    ]


def test_the_serverless_collection_lets_the_cleanup_function_in(template: dict[str, Any]) -> None:
    policy = template["Resources"]["VectorDataAccessPolicy"]["Properties"]["Policy"]["Fn::Sub"]

    [grant] = json.loads(policy.replace("${Stage}", "dev"))

    assert "${CleanupFunctionRole.Arn}" in grant["Principal"]


def test_the_canonical_schedule_event_is_what_the_schedule_sends(
    template: dict[str, Any],
) -> None:
    from memkit.handlers.cleanup import SCHEDULE_KEYS

    sent = json.loads(_schedule(template)["Input"])
    event = load_event("schedule.json")

    assert set(sent) == set(event) == set(SCHEDULE_KEYS)
    assert all(re.fullmatch(r"<aws\.scheduler\.[a-z-]+>", value) for value in sent.values())
