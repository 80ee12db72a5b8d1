"""AgentCore memory records' wire shapes (RetrieveMemoryRecords, ListMemoryRecords,
BatchCreate/Update/DeleteMemoryRecords), with the service model's lengths, patterns and
enums as constraints. Shared members (`Wire`, keys, tokens) are memkit.agentcore.models's.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from memkit.agentcore.models import (
    METADATA_PATTERN,
    MaxResults,
    MetadataKey,
    NextToken,
    Wire,
)
from memkit.models.session import as_utc, not_blank

NAMESPACE_PATTERN = r"^[a-zA-Z0-9/*][a-zA-Z0-9_/*-]*(?::[a-zA-Z0-9_/*-]+)*[a-zA-Z0-9_/*-]*$"
STRATEGY_ID_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$"
RECORD_ID_PATTERN = r"^mem-[a-zA-Z0-9_-]*$"
REQUEST_IDENTIFIER_PATTERN = r"^[a-zA-Z0-9_-]+$"
MAX_RECORD_TEXT = 16_000
MAX_BATCH = 100
DEFAULT_TOP_K = 10
# System keys AgentCore filters on without an indexed key: the record's own times.
CREATED_AT_KEY = "x-amz-agentcore-memory-createdAt"
UPDATED_AT_KEY = "x-amz-agentcore-memory-updatedAt"
SYSTEM_KEYS = (CREATED_AT_KEY, UPDATED_AT_KEY)

Namespace = Annotated[str, Field(min_length=1, max_length=1_024, pattern=NAMESPACE_PATTERN)]
StrategyId = Annotated[str, Field(min_length=1, max_length=100, pattern=STRATEGY_ID_PATTERN)]
RecordId = Annotated[str, Field(min_length=40, max_length=50, pattern=RECORD_ID_PATTERN)]
MetadataText = Annotated[str, Field(min_length=1, max_length=256, pattern=METADATA_PATTERN)]
ListMember = Annotated[str, Field(min_length=1, max_length=64, pattern=METADATA_PATTERN)]


def _utc(value: datetime) -> datetime:
    aware = as_utc(value)
    if aware.year < 1970:
        raise ValueError("is before 1970")
    return aware


class RecordMetadataValue(Wire):
    """The MemoryRecordMetadataValue union: a string, a list of strings, a number or a time."""

    string_value: MetadataText | None = None
    string_list_value: list[ListMember] | None = Field(default=None, min_length=1, max_length=5)
    number_value: float | None = None
    date_time_value: datetime | None = None

    @model_validator(mode="after")
    def _union(self) -> RecordMetadataValue:
        members = [n for n in type(self).model_fields if getattr(self, n) is not None]
        if len(members) != 1:
            raise ValueError(
                "a metadata value holds exactly one of stringValue, stringListValue, "
                "numberValue, dateTimeValue"
            )
        if self.number_value is not None and not math.isfinite(self.number_value):
            raise ValueError("numberValue must be a finite number")
        if self.date_time_value is not None:
            self.date_time_value = _utc(self.date_time_value)
        return self

    def wire(self) -> dict[str, object]:
        """As the service keeps and compares it (a time as epoch seconds)."""
        if self.date_time_value is not None:
            return {"dateTimeValue": self.date_time_value.timestamp()}
        return self.model_dump(by_alias=True, exclude_none=True)


Timestamp = Annotated[datetime, AfterValidator(_utc)]
RecordMetadata = Annotated[
    dict[MetadataKey, RecordMetadataValue], Field(min_length=1, max_length=20)
]


class Content(Wire):
    """The MemoryContent union: text is its one member."""

    text: Annotated[StrictStr, AfterValidator(not_blank)] = Field(
        min_length=1, max_length=MAX_RECORD_TEXT
    )


class RecordExpiry(Wire):
    """RecordExpirySpecification: days until the records expire (31 or more), or REMOVE."""

    record_expiry_duration_days: int | None = Field(default=None, ge=31, le=36_500)
    action: Literal["REMOVE"] | None = None

    @model_validator(mode="after")
    def _union(self) -> RecordExpiry:
        if (self.record_expiry_duration_days is None) == (self.action is None):
            raise ValueError("give exactly one of recordExpiryDurationDays, action")
        return self


class RecordCreate(Wire):
    """MemoryRecordCreateInput."""

    request_identifier: str = Field(min_length=1, max_length=80, pattern=REQUEST_IDENTIFIER_PATTERN)
    namespaces: list[Namespace] = Field(max_length=1)
    content: Content
    timestamp: Timestamp
    memory_strategy_id: StrategyId | None = None
    metadata: RecordMetadata | None = None


class BatchCreateInput(Wire):
    """BatchCreateMemoryRecords (POST /memories/{memoryId}/memoryRecords/batchCreate)."""

    records: list[RecordCreate] = Field(max_length=MAX_BATCH)
    client_token: str | None = Field(default=None, min_length=1, max_length=500)
    record_expiry_specification: RecordExpiry | None = None

    @field_validator("records")
    @classmethod
    def _identified_once(cls, records: list[RecordCreate]) -> list[RecordCreate]:
        seen: set[str] = set()
        for record in records:
            if record.request_identifier in seen:
                raise ValueError(f"requestIdentifier {record.request_identifier} repeats")
            seen.add(record.request_identifier)
        return records

    @field_validator("record_expiry_specification")
    @classmethod
    def _no_removal(cls, spec: RecordExpiry | None) -> RecordExpiry | None:
        if spec is not None and spec.action is not None:
            raise ValueError("REMOVE does not apply when creating records")
        return spec


class RecordUpdate(Wire):
    """MemoryRecordUpdateInput: the members given replace the record's."""

    memory_record_id: RecordId
    timestamp: Timestamp
    content: Content | None = None
    namespaces: list[Namespace] | None = Field(default=None, max_length=1)
    source_namespaces: list[Namespace] | None = Field(default=None, max_length=1)
    memory_strategy_id: StrategyId | None = None
    metadata: RecordMetadata | None = None


class BatchUpdateInput(Wire):
    """BatchUpdateMemoryRecords (POST /memories/{memoryId}/memoryRecords/batchUpdate)."""

    records: list[RecordUpdate] = Field(max_length=MAX_BATCH)
    record_expiry_specification: RecordExpiry | None = None


class RecordDelete(Wire):
    memory_record_id: RecordId
    namespace: Namespace | None = None


class BatchDeleteInput(Wire):
    """BatchDeleteMemoryRecords (POST /memories/{memoryId}/memoryRecords/batchDelete)."""

    records: list[RecordDelete] = Field(max_length=MAX_BATCH)


class FilterKey(Wire):
    metadata_key: MetadataKey


class FilterValue(Wire):
    metadata_value: RecordMetadataValue


Operator = Literal[
    "EQUALS_TO",
    "EXISTS",
    "NOT_EXISTS",
    "BEFORE",
    "AFTER",
    "CONTAINS",
    "GREATER_THAN",
    "GREATER_THAN_OR_EQUALS",
    "LESS_THAN",
    "LESS_THAN_OR_EQUALS",
]
# The right-hand value each operator compares with.
OPERANDS: dict[str, tuple[str, ...]] = {
    "EQUALS_TO": ("stringValue", "numberValue"),
    "EXISTS": (),
    "NOT_EXISTS": (),
    "BEFORE": ("dateTimeValue",),
    "AFTER": ("dateTimeValue",),
    "CONTAINS": ("stringListValue",),
    "GREATER_THAN": ("numberValue",),
    "GREATER_THAN_OR_EQUALS": ("numberValue",),
    "LESS_THAN": ("numberValue",),
    "LESS_THAN_OR_EQUALS": ("numberValue",),
}


class FilterExpression(Wire):
    """MemoryMetadataFilterExpression: a metadata key, an operator, and (except for EXISTS
    and NOT_EXISTS) the value it compares with."""

    left: FilterKey
    operator: Operator
    right: FilterValue | None = None

    @model_validator(mode="after")
    def _operand(self) -> FilterExpression:
        key = self.left.metadata_key
        if key in SYSTEM_KEYS and self.operator not in ("BEFORE", "AFTER"):
            raise ValueError(f"{key} is compared with BEFORE or AFTER")
        wanted = OPERANDS[self.operator]
        if not wanted:
            if self.right is not None:
                raise ValueError(f"{self.operator} takes no right-hand value")
            return self
        given = self.right.metadata_value.wire() if self.right is not None else {}
        if not any(kind in given for kind in wanted):
            raise ValueError(f"{self.operator} compares with a right-hand {' or '.join(wanted)}")
        return self


MetadataFilters = Annotated[list[FilterExpression], Field(min_length=1, max_length=5)]


class SearchCriteria(Wire):
    search_query: Annotated[StrictStr, AfterValidator(not_blank)] = Field(
        min_length=1, max_length=10_000
    )
    memory_strategy_id: StrategyId | None = None
    top_k: int = Field(default=DEFAULT_TOP_K, ge=1, le=100)
    metadata_filters: MetadataFilters | None = None


class NamespaceScope(Wire):
    """`namespace` (exactly) or `namespacePath` (a hierarchy): one of them."""

    namespace: Namespace | None = None
    namespace_path: Namespace | None = Field(default=None, validate_default=True)

    @field_validator("namespace_path")
    @classmethod
    def _one(cls, value: str | None, info: ValidationInfo) -> str | None:
        if "namespace" not in info.data:  # refused already
            return value
        if (info.data["namespace"] is None) == (value is None):
            raise ValueError("give exactly one of namespace, namespacePath")
        return value


class RetrieveInput(NamespaceScope):
    """RetrieveMemoryRecords (POST /memories/{memoryId}/retrieve)."""

    search_criteria: SearchCriteria
    max_results: MaxResults = 20
    next_token: NextToken = None


class ListRecordsInput(NamespaceScope):
    """ListMemoryRecords (POST /memories/{memoryId}/memoryRecords)."""

    memory_strategy_id: StrategyId | None = None
    max_results: MaxResults = 20
    next_token: NextToken = None
    metadata_filters: MetadataFilters | None = None
