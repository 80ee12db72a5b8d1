"""The meter's reading of what AWS reports (memkit_dev.local.meter), in the real response
shapes (botocore's Stubber; Bedrock answered in process): capacity units and the indexes'
share, a vector index's bytes, and a Bedrock embedding call's texts, on one client
(`attach`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from memkit.tokens import estimate_tokens
from memkit_dev.local.meter import Meter, read_invocations

TABLE = "memkit-vectors-256"
KEY = {"PK": {"S": "d1"}, "SK": {"S": "DOC"}}


def _client(service: str) -> Any:
    return boto3.client(
        service, region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )


def test_a_write_is_metered_with_its_indexes_units_and_vector_bytes(tmp_path: Path) -> None:
    client = _client("dynamodb")
    meter = Meter(tmp_path, "IndexerFunction").attach(client)
    consumed = {
        "TableName": TABLE,
        "CapacityUnits": 14.0,
        "Table": {"CapacityUnits": 13.0},
        "GlobalSecondaryIndexes": {"GSI1": {"CapacityUnits": 1.0}},
        "VectorIndexes": {"memkit-vectors": {"VectorWriteRequestBytes": 4548.0}},
    }
    with Stubber(client) as stub:
        # the meter asks for the indexes' breakdown, and the vector indexes' bytes with it
        stub.add_response(
            "put_item",
            {"ConsumedCapacity": consumed},
            {"TableName": TABLE, "Item": KEY, "ReturnConsumedCapacity": "INDEXES"},
        )
        with meter.invocation({"Records": [{}, {}]}):
            client.put_item(TableName=TABLE, Item=KEY)

    (line,) = read_invocations(tmp_path)
    assert line["function"] == "IndexerFunction"
    assert line["records"] == 2
    assert line["dynamodb"] == {"PutItem": 1}
    assert (line["write_units"], line["index_write_units"], line["read_units"]) == (14, 1, 0)
    assert line["vector_write_bytes"] == 4548


def test_a_vector_search_is_metered_in_the_bytes_dynamodb_reports(tmp_path: Path) -> None:
    client = _client("dynamodb")
    meter = Meter(tmp_path, "ApiFunction").attach(client)
    request = {
        "TableName": TABLE,
        "IndexName": "memkit-vectors",
        "SearchVector": [{"N": "0.5"}, {"N": "0.5"}],
        "TopK": 5,
        "SearchConditionExpression": "#s = :s",
        "ExpressionAttributeNames": {"#s": "scope"},
        "ExpressionAttributeValues": {":s": {"S": "g1#T#default#N#-#U#ada"}},
    }
    with Stubber(client) as stub:
        stub.add_response(
            "search_vectors",
            {"SearchResults": [], "ConsumedCapacity": {"VectorSearchRequestBytes": 61318.0}},
            {**request, "ReturnConsumedCapacity": "INDEXES"},
        )
        with meter.invocation({}):
            client.search_vectors(**request)

    (line,) = read_invocations(tmp_path)
    assert line["vector_search_bytes"] == 61318
    assert (line["read_units"], line["write_units"]) == (0, 0)


def test_an_embedding_call_is_metered_with_the_tokens_of_the_texts_it_sent(
    tmp_path: Path,
) -> None:
    client = _client("bedrock-runtime")
    meter = Meter(tmp_path, "IndexerFunction").attach(client)
    texts = ["Ada drinks green tea every morning", "Ada flew to Oslo"]
    body = json.dumps({"texts": texts, "input_type": "search_document"})

    def bedrock_answers(request: Any, **_: Any) -> AWSResponse:
        # in place of the HTTP exchange, after every before-call handler ran
        answer = json.dumps({"embeddings": [[0.1], [0.2]]}).encode()
        return AWSResponse(request.url, 200, {"content-type": "application/json"}, _Raw(answer))

    client.meta.events.register("before-send.bedrock-runtime.InvokeModel", bedrock_answers)
    with meter.invocation({}):
        client.invoke_model(modelId="cohere.embed-english-v3", body=body)

    (line,) = read_invocations(tmp_path)
    assert line["embed_calls"] == 1
    assert line["embed_tokens"] == sum(estimate_tokens(text) for text in texts)


class _Raw(io.BytesIO):
    def stream(self, **_: Any) -> Any:
        yield self.read()
