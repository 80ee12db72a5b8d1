"""SDK errors become domain errors, whether they come through PynamoDB or botocore directly."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from memkit.errors import MemkitError, StoreUnavailable, Throttled, VersionConflict
from memkit.store.failures import translated


def _cancelled(*reasons: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "secret item text"},
            "CancellationReasons": [{"Code": r} for r in reasons],
        },
        "TransactWriteItems",
    )


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_cancelled("None", "ConditionalCheckFailed"), VersionConflict),
        (_cancelled("TransactionConflict", "None"), VersionConflict),
        (_cancelled("ThrottlingError"), Throttled),
        (_cancelled("ValidationError"), StoreUnavailable),
        (
            ClientError({"Error": {"Code": "ConditionalCheckFailedException"}}, "UpdateItem"),
            VersionConflict,
        ),
        (
            ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "Query"),
            Throttled,
        ),
        (EndpointConnectionError(endpoint_url="http://nowhere"), StoreUnavailable),
    ],
)
def test_botocore_errors_are_translated(error: Exception, expected: type[MemkitError]) -> None:
    with pytest.raises(expected) as raised, translated("write session"):
        raise error

    assert "secret" not in raised.value.detail  # the SDK's message never reaches a client
