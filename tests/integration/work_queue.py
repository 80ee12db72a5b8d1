"""The memory work queue on moto's SQS for tests that run the real worker handler over it,
and the time a test moves in place of the delays SQS would wait."""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import boto3

from memkit.handlers.wiring import job_sender
from memkit.jobs.curation import Job
from tests.events import sqs_record


@dataclass
class Clock:
    """Time as the test moves it (whole seconds, so ISO stamps keep it exactly)."""

    now: float = field(default_factory=lambda: float(int(time.time())))

    def __call__(self) -> float:
        return self.now

    def catch_up(self) -> None:
        """Move to now or later, so the index takes removals stamped with this clock over
        what was written so far."""
        self.now = max(self.now, float(math.ceil(time.time())))


def work_queue() -> tuple[Any, str]:
    """moto's SQS client and a new queue (a queue of its own per test: the job sender is
    cached by queue URL) whose messages a failed attempt gives back at once."""
    sqs = boto3.client("sqs", region_name="us-east-1")
    name = f"work-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    return sqs, url


@dataclass
class DelaysOnClock:
    """The queue `url` with SQS's delays passed on `clock`: a message is sent undelayed, and
    its receipt moves the clock to `delay_seconds` after its sending, as if nothing else
    happened while SQS held it."""

    sqs: Any
    url: str
    clock: Clock
    delays: list[int] = field(default_factory=list)  # each sent message's DelaySeconds
    due: dict[str, float] = field(default_factory=dict)  # message id -> when SQS gives it
    sent: list[Job] = field(default_factory=list)  # each message the queue took, in order
    refusals: int = 0  # sends to refuse (as SQS refuses one to a queue that is gone) first

    def send(self, job: Job) -> None:
        if self.refusals:
            self.refusals -= 1
            job_sender(f"{self.url}-gone", "us-east-1", None)(job)  # raises
        sent = self.sqs.send_message(QueueUrl=self.url, MessageBody=job.to_json())
        self.delays.append(job.delay_seconds)
        self.sent.append(job)
        self.due[sent["MessageId"]] = self.clock() + job.delay_seconds

    def take(self) -> Job:
        """The next message, taken off the queue when SQS gives it (the clock moved there)."""
        [message] = self.receive()
        self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
        return Job.from_json(message["Body"])

    def receive(self) -> list[dict[str, Any]]:
        """The next message (none or one), the clock moved to when SQS would give it."""
        messages: list[dict[str, Any]] = self.sqs.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=1
        ).get("Messages", [])
        for m in messages:
            self.clock.now = max(self.clock.now, self.due.pop(m["MessageId"], 0.0))
        return messages


def received(sqs: Any, url: str, timed: DelaysOnClock | None) -> list[dict[str, Any]]:
    """The next messages of the queue `url`: on `timed`'s clock one at a time (DelaysOnClock),
    else up to 10."""
    if timed is not None:
        return timed.receive()
    messages: list[dict[str, Any]] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get(
        "Messages", []
    )
    return messages


def delivered(job: Job) -> dict[str, Any]:
    """An SQS event of one message, `job`, as Lambda hands the worker one (no queue read)."""
    body = job.to_json()
    message = {
        "MessageId": "m-1",
        "ReceiptHandle": "r-1",
        "Body": body,
        "MD5OfBody": hashlib.md5(body.encode()).hexdigest(),  # SQS's checksum of the body
    }
    return {"Records": [sqs_record(message)]}
