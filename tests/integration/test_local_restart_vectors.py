"""Ten restarts of a local stack holding a few hundred items, on DynamoDB Local and on moto,
with the vector table (`--vector-store dynamodb`) kept by the engine
(tests/integration/restarts.py; a file apart from the loopback OpenSearch's, so that the two
run on both test workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.restarts import dynamodb_local, engines, restarts_cleanly

pytestmark = pytest.mark.integration
__all__ = ["dynamodb_local"]  # the module's DynamoDB Local, for the engine parameter


@engines
def test_a_stack_with_data_restarts_cleanly_every_time(
    request: pytest.FixtureRequest, tmp_path: Path, engine: str
) -> None:
    restarts_cleanly(request, tmp_path, engine, "dynamodb")
