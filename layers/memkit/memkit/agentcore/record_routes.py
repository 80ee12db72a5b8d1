"""AgentCore Memory's record operations (boto3 `bedrock-agentcore`): RetrieveMemoryRecords,
ListMemoryRecords, GetMemoryRecord, DeleteMemoryRecord and the batch operations, at
botocore's paths, in its shapes, each failure in AgentCore's error shape. The mapping onto
memkit's long-term records is memkit.agentcore.records'.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit.agentcore.record_models import (
    NAMESPACE_PATTERN,
    RECORD_ID_PATTERN,
    BatchCreateInput,
    BatchDeleteInput,
    BatchUpdateInput,
    ListRecordsInput,
    RetrieveInput,
)
from memkit.agentcore.records import (
    AgentCoreRecords,
    AgentRecord,
    BatchResult,
    RecordPage,
)
from memkit.agentcore.routes import MEMORY, _answer, _body, _clean, _memory
from memkit.agentcore.wing import AgentCore
from memkit.api.context import caller_of, services_of
from memkit.errors import FieldProblem, ValidationFailed

router = APIGatewayHttpRouter()

RECORDS = f"{MEMORY}/memoryRecords"


def _records() -> AgentCoreRecords:
    return AgentCore.of(services_of(router)).records


def record_view(record: AgentRecord, *, summary: bool = True) -> dict[str, Any]:
    """MemoryRecordSummary (retrievals, listings) or MemoryRecord (GetMemoryRecord)."""
    view: dict[str, Any] = {
        "memoryRecordId": record.record_id,
        "content": {"text": record.text},
        "memoryStrategyId": record.strategy_id,
        "namespaces": [record.namespace] if record.namespace is not None else [],
        "createdAt": record.created_at,
        "timestamp": record.timestamp,
        "metadata": record.metadata or None,
        "score": record.score if summary else None,
        "expiresAt": None if summary else record.expires_at,
    }
    return {k: v for k, v in view.items() if v is not None}


def _summaries(page: RecordPage) -> Response[str]:
    views = [record_view(r) for r in page.records]
    return _answer(_clean({"memoryRecordSummaries": views, "nextToken": page.next_token}))


def _batch_view(result: BatchResult) -> dict[str, Any]:
    def one(outcome: Any) -> dict[str, Any]:
        view = {
            "memoryRecordId": outcome.record_id,
            "status": "SUCCEEDED" if outcome.succeeded else "FAILED",
            "requestIdentifier": outcome.request_identifier,
            "errorCode": outcome.error_code,
            "errorMessage": outcome.error_message,
        }
        return {k: v for k, v in view.items() if v is not None}

    return {
        "successfulRecords": [one(o) for o in result.successful],
        "failedRecords": [one(o) for o in result.failed],
    }


def _checked(value: str, name: str, pattern: str, lengths: tuple[int, int]) -> str:
    if not lengths[0] <= len(value) <= lengths[1] or not re.fullmatch(pattern, value):
        raise ValidationFailed(
            f"{name} is not valid", [FieldProblem(name, f"must match {pattern}")]
        )
    return value


def _record_id(value: str) -> str:
    return _checked(unquote(value), "memoryRecordId", RECORD_ID_PATTERN, (40, 50))


def _namespace_query() -> str | None:
    """The `namespace` query parameter of Get/DeleteMemoryRecord (IAM's condition key)."""
    raw = router.current_event.get_query_string_value("namespace")
    return None if raw is None else _checked(raw, "namespace", NAMESPACE_PATTERN, (1, 1_024))


@router.post(f"{MEMORY}/retrieve", include_in_schema=False)
def retrieve_memory_records(memory_id: str) -> Response[str]:
    body = _body(RetrieveInput)
    _, memory = _memory(memory_id)
    return _summaries(_records().retrieve(caller_of(router), memory, body))


@router.post(RECORDS, include_in_schema=False)
def list_memory_records(memory_id: str) -> Response[str]:
    body = _body(ListRecordsInput)
    _, memory = _memory(memory_id)
    return _summaries(_records().list_records(caller_of(router), memory, body))


@router.get(f"{MEMORY}/memoryRecord/<record_id>", include_in_schema=False)
def get_memory_record(memory_id: str, record_id: str) -> Response[str]:
    _, memory = _memory(memory_id)
    record = _records().get(caller_of(router), memory, _record_id(record_id), _namespace_query())
    return _answer({"memoryRecord": record_view(record, summary=False)})


@router.delete(f"{RECORDS}/<record_id>", include_in_schema=False)
def delete_memory_record(memory_id: str, record_id: str) -> Response[str]:
    _, memory = _memory(memory_id)
    deleted = _records().delete(
        caller_of(router), memory, _record_id(record_id), _namespace_query()
    )
    return _answer({"memoryRecordId": deleted})


@router.post(f"{RECORDS}/batchCreate", include_in_schema=False)
def batch_create_memory_records(memory_id: str) -> Response[str]:
    body = _body(BatchCreateInput)
    _, memory = _memory(memory_id)
    result = _records().batch_create(caller_of(router), memory, body)
    return _answer(_batch_view(result), 201)


@router.post(f"{RECORDS}/batchUpdate", include_in_schema=False)
def batch_update_memory_records(memory_id: str) -> Response[str]:
    body = _body(BatchUpdateInput)
    _, memory = _memory(memory_id)
    result = _records().batch_update(caller_of(router), memory, body)
    return _answer(_batch_view(result))


@router.post(f"{RECORDS}/batchDelete", include_in_schema=False)
def batch_delete_memory_records(memory_id: str) -> Response[str]:
    body = _body(BatchDeleteInput)
    _, memory = _memory(memory_id)
    result = _records().batch_delete(caller_of(router), memory, body)
    return _answer(_batch_view(result))
