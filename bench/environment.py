"""The environment every benchmark runs in: fake AWS credentials, no plugins, no metrics."""

from __future__ import annotations

import os

BENCH_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "PYDANTIC_DISABLE_PLUGINS": "__all__",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}


# What serves DynamoDB in the benchmarks that run the local stack: as `make serve` does
# (DynamoDB Local where Java 17+ is here, else moto), unless MEMKIT_BENCH_ENGINE says.
def stack_engine() -> str:
    return os.environ.get("MEMKIT_BENCH_ENGINE", "auto")


def apply() -> dict[str, str]:
    """Set the benchmark environment in this process (before boto3 or memkit is imported)."""
    os.environ.update(BENCH_ENVIRONMENT)
    return dict(os.environ)


class LambdaContext:
    """The Lambda context the handler's decorators read."""

    function_name = "memkit-bench-api"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:memkit-bench-api"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000
