"""Reading template.yaml, so local and test tables are created from the deployed definition."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

TABLE_RESOURCE = "MemoryTable"
# VectorStore dynamodb's table (memkit.vectors.dynamodb); its VectorIndexes need a DynamoDB
# that has them (memkit_dev.local.vector_dynamodb in front of moto or DynamoDB Local).
VECTOR_TABLE_RESOURCE = "VectorTable"
# Properties create_table accepts; the rest (TTL, PITR, SSE, tags) are set separately or are
# AWS-only concerns the local stack does not model.
CREATE_TABLE_PROPERTIES = (
    "AttributeDefinitions",
    "KeySchema",
    "LocalSecondaryIndexes",
    "GlobalSecondaryIndexes",
    "BillingMode",
    "StreamSpecification",
    "VectorIndexes",
)


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form intrinsics (!Ref, !Sub, !GetAtt ...)."""


def _intrinsic(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if tag_suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CfnLoader.add_multi_constructor("!", _intrinsic)


def find_template(start: Path | None = None) -> Path:
    """template.yaml in the working directory or above, else next to this checkout's layers/."""
    candidates: list[Path] = []
    here = (start or Path.cwd()).resolve()
    candidates.extend(directory / "template.yaml" for directory in (here, *here.parents))
    candidates.append(Path(__file__).resolve().parents[3] / "template.yaml")
    for candidate in candidates:
        if candidate.is_file() and "MemoryTable" in candidate.read_text(encoding="utf-8"):
            return candidate
    raise FileNotFoundError("template.yaml with a MemoryTable not found; pass --template")


@lru_cache(maxsize=4)
def load_template(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        document = yaml.load(handle, Loader=_CfnLoader)  # noqa: S506 (SafeLoader subclass)
    assert isinstance(document, dict)
    return document


def table_definition(
    template: dict[str, Any],
    table_name: str,
    resource: str = TABLE_RESOURCE,
    dimensions: int | None = None,
) -> dict[str, Any]:
    """create_table arguments for the template's `resource` table, named `table_name`; a
    vector index's dimensions (a FindInMap of the embedder in the template) are
    `dimensions`."""
    properties = template["Resources"][resource]["Properties"]
    definition: dict[str, Any] = {"TableName": table_name}
    for key in CREATE_TABLE_PROPERTIES:
        if key in properties:
            definition[key] = properties[key]
    if "VectorIndexes" in definition:
        if dimensions is None:
            raise ValueError(f"{resource} has vector indexes: give their dimensions")
        definition["VectorIndexes"] = [
            {**index, "Dimensions": dimensions} for index in definition["VectorIndexes"]
        ]
    if "StreamSpecification" in definition:
        definition["StreamSpecification"] = {
            "StreamEnabled": True,
            **definition["StreamSpecification"],
        }
    return definition


def ttl_attribute(template: dict[str, Any], resource: str = TABLE_RESOURCE) -> str | None:
    ttl = template["Resources"][resource]["Properties"].get("TimeToLiveSpecification")
    return ttl["AttributeName"] if ttl and ttl.get("Enabled") else None


def create_table(
    client: Any,
    template: dict[str, Any],
    table_name: str,
    resource: str = TABLE_RESOURCE,
    dimensions: int | None = None,
) -> bool:
    """Create the `resource` table (and its TTL setting) unless it exists; whether it did.
    `client` is a boto3 client."""
    existing = client.list_tables().get("TableNames", [])
    if table_name in existing:
        return False
    client.create_table(**table_definition(template, table_name, resource, dimensions))
    client.get_waiter("table_exists").wait(
        TableName=table_name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 50}
    )
    attribute = ttl_attribute(template, resource)
    if attribute:
        client.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute},
        )
    return True
