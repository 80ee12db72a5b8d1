"""template.yaml against the code: every route wired, every handler present, the table right,
and the long-term memory pipeline (stream -> indexer -> vector store) wired as the code expects."""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from memkit_dev.local.template import load_template
from tests.events import load_event

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template(ROOT / "template.yaml")


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: resource["Properties"]
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def _wired_routes(template: dict[str, Any]) -> set[tuple[str, str]]:
    from memkit_dev.local.gateway import http_api_routes

    return {(route.method, route.path) for route in http_api_routes(template, "ApiFunction")}


def test_every_route_of_the_app_is_wired_through_the_template(template: dict[str, Any]) -> None:
    from memkit.handlers.api import app

    # API Gateway routes /a/ to the route /a (route paths cannot end with a slash), so the
    # app's /v1/working-memory/ (agent-memory-client's exact path) is wired as /v1/working-memory.
    app_routes = {
        (route.method.upper(), route.openapi_path.rstrip("/") or "/")
        for route in app._static_routes + app._dynamic_routes
    }

    wired = _wired_routes(template)

    assert app_routes - wired == set(), "routes the API serves but API Gateway would not route"
    assert wired - app_routes == set(), "routes in the template that no handler serves"


def test_every_handler_path_exists(template: dict[str, Any]) -> None:
    for name, properties in _functions(template).items():
        module, function = properties["Handler"].rsplit(".", 1)
        source = ROOT / properties["CodeUri"] / f"{module.replace('.', '/')}.py"
        assert source.is_file(), f"{name}: {source} does not exist"
        tree = ast.parse(source.read_text(encoding="utf-8"))
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)} | {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        assert function in defined, f"{name}: {function} is not defined in {source}"


def test_functions_run_python312_on_arm64_with_the_memkit_layer(template: dict[str, Any]) -> None:
    function_globals = template["Globals"]["Function"]
    layer = template["Resources"]["MemkitLayer"]

    assert function_globals["Runtime"] == "python3.12"
    assert function_globals["Architectures"] == ["arm64"]
    assert layer["Metadata"]["BuildMethod"] == "python3.12"
    for properties in _functions(template).values():
        assert {"Ref": "MemkitLayer"} in properties["Layers"]


def test_the_table_has_ttl_streams_recovery_and_encryption(template: dict[str, Any]) -> None:
    table = template["Resources"]["MemoryTable"]["Properties"]

    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert table["SSESpecification"]["SSEEnabled"] is True
    assert template["Resources"]["MemoryTable"]["DeletionPolicy"] == "Retain"


def test_iam_names_actions_and_the_table_never_wildcards(template: dict[str, Any]) -> None:
    for name, properties in _functions(template).items():
        for policy in properties.get("Policies", []):
            # A conditional policy (Fn::If [condition, policy, AWS::NoValue]) is checked too.
            branches = policy["Fn::If"][1:] if "Fn::If" in policy else [policy]
            for branch in branches:
                for statement in branch.get("Statement", []):
                    actions = statement["Action"]
                    assert isinstance(actions, list), f"{name}: Action as a list"
                    assert all("*" not in action for action in actions), f"{name}: wildcard"
                    assert "*" not in json.dumps(statement["Resource"]).replace("/*", ""), (
                        f"{name}: wildcard resource"
                    )


def test_layer_requirements_match_the_package_dependencies() -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = (ROOT / "layers/memkit/requirements.txt").read_text().splitlines()
    layer = [line.strip() for line in lines if line.strip() and not line.startswith("#")]

    assert sorted(layer) == sorted(declared)


def test_the_template_outputs_the_api_url_and_the_table_name(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]

    assert re.search(r"execute-api", outputs["ApiUrl"]["Value"]["Fn::Sub"])
    assert outputs["TableName"]["Value"] == {"Ref": "MemoryTable"}


# --- The long-term memory pipeline: stream -> indexer -> vector store -------------------------

STREAM_EVENTS = (
    "stream_insert_record.json",
    "stream_modify_record.json",
    "stream_remove_record.json",
    "stream_ttl_remove_message.json",
)
# What Lambda accepts for a DynamoDB event source mapping (AWS::Lambda::EventSourceMapping).
LAMBDA_RANGES = {
    "BatchSize": (1, 10_000),
    "MaximumBatchingWindowInSeconds": (0, 300),
    "MaximumRetryAttempts": (-1, 10_000),
    "MaximumRecordAgeInSeconds": (60, 604_800),  # or -1 (no limit), which memkit never uses
}
_NO_VALUE: Any = object()


def _parameters(template: dict[str, Any], **overrides: str) -> dict[str, str]:
    """Parameter values as CloudFormation passes them (strings): defaults, then overrides."""
    values = {name: str(spec.get("Default", "")) for name, spec in template["Parameters"].items()}
    assert set(overrides) <= set(values), f"unknown parameters {set(overrides) - set(values)}"
    return {**values, **overrides}


def _evaluate(template: dict[str, Any], value: Any, parameters: dict[str, str]) -> Any:
    """`value` with Ref (parameters), Fn::If, Fn::FindInMap and the condition functions
    resolved the way CloudFormation would; other intrinsics (GetAtt, Sub) stay as written."""

    def condition(name: str) -> bool:
        return bool(evaluate(template["Conditions"][name]))

    def evaluate(node: Any) -> Any:
        if isinstance(node, list):
            return [item for item in map(evaluate, node) if item is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Ref"} and node["Ref"] in parameters:
            return parameters[node["Ref"]]
        if node == {"Ref": "AWS::NoValue"}:
            return _NO_VALUE
        if set(node) in ({"Condition"}, {"Fn::Condition"}):  # !Condition loads as the latter
            return condition(next(iter(node.values())))
        key, arguments = next(iter(node.items())) if len(node) == 1 else (None, None)
        if key == "Fn::If":
            name, when_true, when_false = arguments
            return evaluate(when_true if condition(name) else when_false)
        if key == "Fn::FindInMap":
            table, first, second = (str(evaluate(argument)) for argument in arguments)
            return template["Mappings"][table][first][second]
        if key == "Fn::Equals":
            left, right = (str(evaluate(argument)) for argument in arguments)
            return left == right
        if key == "Fn::Not":
            return not evaluate(arguments[0])
        if key == "Fn::And":
            return all(evaluate(argument) for argument in arguments)
        if key == "Fn::Or":
            return any(evaluate(argument) for argument in arguments)
        if key == "Fn::Contains":
            options, needle = evaluate(arguments[0]), evaluate(arguments[1])
            return needle in options
        return {k: v for k, v in ((k, evaluate(v)) for k, v in node.items()) if v is not _NO_VALUE}

    return evaluate(value)


def _statements(
    template: dict[str, Any], function: str, parameters: dict[str, str]
) -> list[dict[str, Any]]:
    """The function's IAM statements as a deployment with `parameters` would create them."""
    policies = _evaluate(template, _functions(template)[function]["Policies"], parameters)
    return [statement for policy in policies for statement in policy["Statement"]]


def _granting(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [statement for statement in statements if action in statement["Action"]]


# An existing VPC with two private subnets, as a deployer passes them.
IN_A_VPC = {
    "VpcId": "vpc-0123456789abcdef0",
    "VpcSubnetIds": "subnet-0123456789abcdef0,subnet-0fedcba9876543210",
}

# The functions that embed and reach the vector store: the API and the MCP server search, the
# indexer indexes, the memory worker searches to deduplicate what it extracts, the cleanup run
# removes orphan vectors and compares records' vectors.
VECTOR_FUNCTIONS = (
    "ApiFunction",
    "McpFunction",
    "IndexerFunction",
    "MemoryWorkerFunction",
    "CleanupFunction",
)


def _stream_event(template: dict[str, Any]) -> dict[str, Any]:
    events = _functions(template)["IndexerFunction"]["Events"]
    [event] = [event for event in events.values() if event["Type"] == "DynamoDB"]
    return event


def _stream_record(name: str) -> dict[str, Any]:
    [record] = load_event(name)["Records"]
    return record


def _with_image(record: dict[str, Any], image: str, **attributes: Any) -> dict[str, Any]:
    """A copy of `record` whose `image` (NewImage/OldImage) has `attributes` set (None drops)."""
    changed = copy.deepcopy(record)
    target = changed["dynamodb"][image]
    for attribute, value in attributes.items():
        if value is None:
            target.pop(attribute, None)
        else:
            target[attribute] = {"S": value}
    return changed


def _inserted(record: dict[str, Any]) -> dict[str, Any]:
    """`record` (a REMOVE of an item) as the INSERT that wrote that item."""
    changed = copy.deepcopy(record)
    changed["eventName"] = "INSERT"
    changed.pop("userIdentity", None)
    changed["dynamodb"]["NewImage"] = changed["dynamodb"].pop("OldImage")
    return changed


def test_the_indexer_reads_the_table_stream_in_small_batches_with_partial_failures(
    template: dict[str, Any],
) -> None:
    event = _stream_event(template)
    properties = _evaluate(template, event["Properties"], _parameters(template))

    assert properties["Stream"] == {"Fn::GetAtt": ["MemoryTable", "StreamArn"]}
    assert properties["StartingPosition"] == "TRIM_HORIZON"
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert properties["BisectBatchOnFunctionError"] is True
    assert (properties["BatchSize"], properties["MaximumBatchingWindowInSeconds"]) == ("100", "1")
    assert (properties["MaximumRetryAttempts"], properties["MaximumRecordAgeInSeconds"]) == (
        "5",
        "86400",
    )


def test_every_value_the_indexer_parameters_allow_is_one_lambda_accepts(
    template: dict[str, Any],
) -> None:
    properties = _stream_event(template)["Properties"]

    for name, (low, high) in LAMBDA_RANGES.items():
        parameter = template["Parameters"][properties[name]["Ref"]]
        assert low <= parameter["MinValue"] <= parameter["Default"] <= parameter["MaxValue"] <= high


def test_the_local_stack_reads_the_same_event_source_mapping(template: dict[str, Any]) -> None:
    from memkit_dev.local.streams import EventSourceMapping

    mapping = EventSourceMapping.from_template(template, "IndexerFunction")

    assert mapping.batch_size == 100
    assert mapping.bisect_on_error is True
    assert mapping.report_batch_item_failures is True
    assert mapping.maximum_retry_attempts == 5
    assert mapping.maximum_record_age_seconds == 86_400
    assert len(mapping.filters) == len(
        _stream_event(template)["Properties"]["FilterCriteria"]["Filters"]
    )


def test_failed_batches_go_to_the_queue_the_alarm_watches(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    destination = _stream_event(template)["Properties"]["DestinationConfig"]["OnFailure"]
    alarm = resources["IndexerDeadLetterAlarm"]["Properties"]
    queue = resources["IndexerDeadLetterQueue"]["Properties"]
    send = _granting(
        _statements(template, "IndexerFunction", _parameters(template)), "sqs:SendMessage"
    )

    assert destination["Destination"] == {"Fn::GetAtt": ["IndexerDeadLetterQueue", "Arn"]}
    assert [statement["Resource"] for statement in send] == [destination["Destination"]]
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["IndexerDeadLetterQueue", "QueueName"]}}
    ]
    assert (alarm["MetricName"], alarm["ComparisonOperator"], alarm["Threshold"]) == (
        "ApproximateNumberOfMessagesVisible",
        "GreaterThanThreshold",
        0,
    )
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert template["Outputs"]["IndexerDeadLetterQueueUrl"]["Value"] == {
        "Ref": "IndexerDeadLetterQueue"
    }


@pytest.mark.parametrize("topic", ["", "arn:aws:sns:us-east-1:123456789012:ops"])
def test_the_alarm_notifies_a_topic_only_when_one_is_given(
    template: dict[str, Any], topic: str
) -> None:
    alarm = template["Resources"]["IndexerDeadLetterAlarm"]["Properties"]

    resolved = _evaluate(template, alarm, _parameters(template, AlarmTopicArn=topic))

    assert resolved.get("AlarmActions") == ([topic] if topic else None)


def _filters(template: dict[str, Any]) -> list[str]:
    return [
        f["Pattern"] for f in _stream_event(template)["Properties"]["FilterCriteria"]["Filters"]
    ]


def test_every_stream_filter_is_a_json_pattern(template: dict[str, Any]) -> None:
    from memkit_dev.local.event_filter import parse_pattern

    for text in _filters(template):
        assert isinstance(json.loads(text), dict)
        parse_pattern(text)  # the local stack refuses syntax Lambda does not have


_INDEXED = [
    ("a new long-term record", lambda: _stream_record("stream_insert_record.json")),
    ("an edited long-term record", lambda: _stream_record("stream_modify_record.json")),
    ("a deleted long-term record", lambda: _stream_record("stream_remove_record.json")),
    ("an indexed message expired by TTL", lambda: _stream_record("stream_ttl_remove_message.json")),
    (
        "an indexed message written",
        lambda: _inserted(_stream_record("stream_ttl_remove_message.json")),
    ),
    (
        "a pending memory to promote",
        lambda: _with_image(_stream_record("stream_insert_record.json"), "NewImage", kind="memory"),
    ),
]
_IGNORED = [
    (
        "a message not stamped for indexing",
        lambda: _with_image(
            _inserted(_stream_record("stream_ttl_remove_message.json")), "NewImage", idx=None
        ),
    ),
    (
        "an expired message never indexed",
        lambda: _with_image(_stream_record("stream_ttl_remove_message.json"), "OldImage", idx=None),
    ),
    (
        "a pending memory removed (promoted or its session deleted)",
        lambda: _with_image(_stream_record("stream_remove_record.json"), "OldImage", kind="memory"),
    ),
    (
        "a session write",
        lambda: _with_image(
            _with_image(_stream_record("stream_modify_record.json"), "NewImage", kind="session"),
            "OldImage",
            kind="session",
        ),
    ),
    (
        "a scratchpad write",
        lambda: _with_image(
            _stream_record("stream_insert_record.json"), "NewImage", kind="scratchpad"
        ),
    ),
    (
        "the indexer's own index state",
        lambda: _with_image(
            _stream_record("stream_insert_record.json"), "NewImage", kind="index_state"
        ),
    ),
]


@pytest.mark.parametrize(("what", "record"), _INDEXED, ids=[what for what, _ in _INDEXED])
def test_the_stream_filters_pass_what_the_index_holds(
    template: dict[str, Any], what: str, record: Any
) -> None:
    from memkit_dev.local.event_filter import passes

    assert passes(_filters(template), record()), f"{what} must reach the indexer"


@pytest.mark.parametrize(("what", "record"), _IGNORED, ids=[what for what, _ in _IGNORED])
def test_the_stream_filters_keep_everything_else_from_the_indexer(
    template: dict[str, Any], what: str, record: Any
) -> None:
    from memkit_dev.local.event_filter import passes

    assert not passes(_filters(template), record()), f"{what} must not invoke the indexer"


@pytest.mark.parametrize("name", STREAM_EVENTS)
def test_the_canonical_stream_events_are_what_lambda_delivers(name: str) -> None:
    [record] = load_event(name)["Records"]
    stream = record["dynamodb"]
    images = {"INSERT": {"NewImage"}, "MODIFY": {"NewImage", "OldImage"}, "REMOVE": {"OldImage"}}

    assert (record["eventSource"], record["eventVersion"]) == ("aws:dynamodb", "1.1")
    assert stream["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert images[record["eventName"]] <= set(stream)
    assert not (images["MODIFY"] - images[record["eventName"]]) & set(stream)
    for image in images[record["eventName"]]:
        assert {k: stream[image][k] for k in ("PK", "SK")} == stream["Keys"]
    assert re.fullmatch(
        r"arn:aws:dynamodb:[a-z0-9-]+:\d{12}:table/.+/stream/.+", record["eventSourceARN"]
    )


def test_the_ttl_event_is_marked_as_a_dynamodb_service_delete() -> None:
    record = _stream_record("stream_ttl_remove_message.json")
    old = record["dynamodb"]["OldImage"]

    assert record["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert int(old["expires_at"]["N"]) < record["dynamodb"]["ApproximateCreationDateTime"]


@pytest.mark.parametrize(
    ("provider", "dimensions", "expected"),
    [
        ("local", "1024", 256),
        ("local", "512", 256),
        ("titan", "1024", 1024),
        ("titan", "512", 512),
        ("titan", "256", 256),
        ("cohere", "256", 1024),
        ("cohere", "1024", 1024),
    ],
)
def test_the_index_dimension_is_the_embedders(
    template: dict[str, Any], provider: str, dimensions: str, expected: int
) -> None:
    parameters = _parameters(
        template,
        EmbeddingProvider=provider,
        EmbeddingDimensions=dimensions,
        DeployerPrincipalArn="arn:aws:iam::123456789012:role/deployer",
    )
    index = template["Resources"]["VectorIndex"]["Properties"]
    variables = template["Globals"]["Function"]["Environment"]["Variables"]

    vector = _evaluate(template, index["Mappings"]["Properties"]["vector"], parameters)
    environment = _evaluate(template, variables, parameters)

    assert vector["Dimension"] == expected
    assert int(environment["MEMKIT_EMBEDDING_DIMENSIONS"]) == expected
    assert environment["MEMKIT_EMBEDDER"] == provider


def test_the_dimension_table_agrees_with_the_embedders(template: dict[str, Any]) -> None:
    from memkit.embeddings.bedrock import COHERE_DIMENSIONS, TITAN_DIMENSIONS
    from memkit.embeddings.local import LocalEmbedder

    table = template["Mappings"]["VectorDimensions"]
    asked = template["Parameters"]["EmbeddingDimensions"]["AllowedValues"]

    assert sorted(asked) == sorted(TITAN_DIMENSIONS)
    assert table["titan"] == {str(size): size for size in TITAN_DIMENSIONS}
    assert set(table["local"].values()) == {LocalEmbedder().dimensions}
    assert set(table["cohere"].values()) == {COHERE_DIMENSIONS}
    assert all(set(sizes) == {str(size) for size in asked} for sizes in table.values())


def test_the_default_deployment_embeds_locally_without_a_model_id(
    template: dict[str, Any],
) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]

    environment = _evaluate(template, variables, _parameters(template))

    assert environment["MEMKIT_EMBEDDER"] == "local"
    assert "MEMKIT_EMBEDDING_MODEL" not in environment
    assert environment["MEMKIT_OPENSEARCH_FLAVOUR"] == "serverless"
    assert environment["MEMKIT_OPENSEARCH_ENDPOINT"] == {
        "Fn::GetAtt": ["VectorCollection", "CollectionEndpoint"]
    }


def test_the_serverless_index_maps_vectors_for_hnsw_inner_product_and_filters_as_keywords(
    template: dict[str, Any],
) -> None:
    from memkit.vectors.protocol import KEYWORD_FIELDS

    index = template["Resources"]["VectorIndex"]
    fields = index["Properties"]["Mappings"]["Properties"]

    assert index["Properties"]["Settings"] == {"Index": {"Knn": True}}
    assert fields["vector"]["Type"] == "knn_vector"
    assert fields["vector"]["Method"] == {
        "Name": "hnsw",
        "Engine": "faiss",
        "SpaceType": "innerproduct",
    }
    assert fields["text"] == {"Type": "text"}
    for name in (*KEYWORD_FIELDS, "doc_id"):
        assert fields[name] == {"Type": "keyword"}, name
    assert index["Properties"]["IndexName"] == {"Ref": "OpenSearchIndexName"}


# What AWS::OpenSearchServerless::Index can type a field as (its resource schema's enum).
CLOUDFORMATION_FIELD_TYPES = {"text", "keyword", "integer", "knn_vector"}


def _opensearch_mapping(field: dict[str, Any]) -> dict[str, Any]:
    """A CloudFormation PropertyMapping (Type, Dimension, Method) as OpenSearch writes it."""
    names = {"Name": "name", "Engine": "engine", "SpaceType": "space_type"}
    mapping: dict[str, Any] = {"type": field["Type"]}
    if "Dimension" in field:
        mapping["dimension"] = field["Dimension"]
    if "Method" in field:
        mapping["method"] = {names[k]: v for k, v in field["Method"].items()}
    return mapping


def test_the_serverless_index_agrees_with_the_adapters_mapping(template: dict[str, Any]) -> None:
    from memkit.vectors.opensearch import index_body

    parameters = _parameters(template, EmbeddingProvider="titan", EmbeddingDimensions="512")
    index = _evaluate(template, template["Resources"]["VectorIndex"]["Properties"], parameters)
    adapter = index_body(512, "serverless")
    fields = {
        name: _opensearch_mapping(field) for name, field in index["Mappings"]["Properties"].items()
    }
    expected = adapter["mappings"]["properties"]
    # An analyzer cannot be added to a field that exists: a field that names one is left to
    # the functions whole. Multi-fields can be added: the functions add them to a field the
    # template declares without them.
    left_to_the_functions = {
        name
        for name, field in expected.items()
        if field["type"] not in CLOUDFORMATION_FIELD_TYPES or "analyzer" in field
    }
    without_multi_fields = {
        name: {key: value for key, value in field.items() if key != "fields"}
        for name, field in expected.items()
    }

    assert index["Settings"]["Index"]["Knn"] is adapter["settings"]["index"]["knn"]
    assert fields == {name: without_multi_fields[name] for name in fields}
    # The functions add these with PUT _mapping (ensure_index) before their first write.
    assert set(expected) - set(fields) == left_to_the_functions


@pytest.mark.parametrize(
    ("provider", "model"),
    [("titan", "amazon.titan-embed-text-v2:0"), ("cohere", "cohere.embed-english-v3")],
)
def test_bedrock_access_is_the_configured_model_alone(
    template: dict[str, Any], provider: str, model: str
) -> None:
    parameters = _parameters(template, EmbeddingProvider=provider, EmbeddingModelId=model)

    for function in VECTOR_FUNCTIONS:
        [invoke] = _granting(_statements(template, function, parameters), "bedrock:InvokeModel")
        assert invoke["Action"] == ["bedrock:InvokeModel"]
        assert invoke["Resource"] == {
            "Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/"
            "${EmbeddingModelId}"
        }


def test_a_local_embedder_gets_no_bedrock_access(template: dict[str, Any]) -> None:
    parameters = _parameters(template, EmbeddingProvider="local")

    for function in VECTOR_FUNCTIONS:
        assert _granting(_statements(template, function, parameters), "bedrock:InvokeModel") == []


@pytest.mark.parametrize(
    ("provider", "model", "accepted"),
    [
        ("local", "amazon.titan-embed-text-v2:0", True),
        ("titan", "amazon.titan-embed-text-v2:0", True),
        ("cohere", "cohere.embed-multilingual-v3", True),
        ("cohere", "amazon.titan-embed-text-v2:0", False),
        ("titan", "amazon.titan-embed-text-v1", False),
    ],
)
def test_the_stack_refuses_a_model_whose_size_the_index_would_not_match(
    template: dict[str, Any], provider: str, model: str, accepted: bool
) -> None:
    parameters = _parameters(
        template, EmbeddingProvider=provider, EmbeddingModelId=model, **IN_A_VPC
    )

    assert (_refusals(template, parameters) == []) is accepted


# The rules about who may call (AuthMode): the tests of other settings leave them out, so a
# default deployment (jwt without an issuer, refused) does not hide what they check.
IDENTITY_RULES = frozenset({"AuthNoneIsAskedFor", "JwtNeedsAnIssuer", "UserPoolScopesArePrefixed"})


def _refusals(
    template: dict[str, Any], parameters: dict[str, str], identity: bool = False
) -> list[str]:
    """The AssertDescription of every Rules assertion a deployment with `parameters` fails
    (the identity rules only when asked)."""
    return [
        assertion["AssertDescription"]
        for name, rule in template["Rules"].items()
        if identity or name not in IDENTITY_RULES
        if _evaluate(template, rule.get("RuleCondition", True), parameters)
        for assertion in rule["Assertions"]
        if not _evaluate(template, assertion["Assert"], parameters)
    ]


# The collection stage `dev` deploys (the policies name it; VectorCollection's Name).
COLLECTION = "memkit-dev-vectors"


def _named(template: dict[str, Any], name: str) -> str:
    """A resource's Name (a !Sub of ${Stage}) as stage `dev` deploys it."""
    return str(template["Resources"][name]["Properties"]["Name"]["Fn::Sub"]).replace(
        "${Stage}", "dev"
    )


def _policy(template: dict[str, Any], name: str, **overrides: str) -> Any:
    """An OpenSearch Serverless policy document as stage `dev` deploys it with `overrides`
    (a resource's attribute, such as ${DataKey.Arn}, stays as written)."""
    policy = template["Resources"][name]["Properties"]["Policy"]
    resolved = _evaluate(template, policy, _parameters(template, **overrides))
    text = resolved["Fn::Sub"] if isinstance(resolved, dict) else resolved
    return json.loads(text.replace("${Stage}", "dev"))


def test_a_serverless_store_is_reached_through_the_collection_and_its_data_policy(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    parameters = _parameters(template, VectorStore="serverless")
    [grant] = _policy(template, "VectorDataAccessPolicy")
    rules = {rule["ResourceType"]: rule for rule in grant["Rules"]}

    for function in VECTOR_FUNCTIONS:
        statements = _statements(template, function, parameters)
        [access] = _granting(statements, "aoss:APIAccessAll")
        assert access["Resource"] == {"Fn::GetAtt": ["VectorCollection", "Arn"]}
        assert _granting(statements, "es:ESHttpPost") == []
        assert f"${{{function}Role.Arn}}" in grant["Principal"]
    assert rules["collection"]["Resource"] == [f"collection/{COLLECTION}"]
    assert rules["index"]["Resource"] == [f"index/{COLLECTION}/*"]
    assert {"aoss:ReadDocument", "aoss:WriteDocument", "aoss:CreateIndex"} <= set(
        rules["index"]["Permission"]
    )
    [network] = _policy(template, "VectorNetworkPolicy", **IN_A_VPC)
    assert network["Rules"] == [
        {"ResourceType": "collection", "Resource": [f"collection/{COLLECTION}"]}
    ]
    assert resources["VectorCollection"]["Properties"]["Type"] == "VECTORSEARCH"
    assert {"VectorEncryptionPolicy", "VectorNetworkPolicy"} <= set(
        resources["VectorCollection"]["DependsOn"]
    )


def test_every_policy_names_the_collection_the_stack_creates(template: dict[str, Any]) -> None:
    reindex, functions = (
        _policy(template, name)[0]
        for name in ("VectorReindexAccessPolicy", "VectorDataAccessPolicy")
    )
    deployer = _policy(template, "VectorDeployerAccessPolicy", DeployerPrincipalArn="arn:x")[0]
    [network] = _policy(template, "VectorNetworkPolicy", OpenSearchNetworkAccess="public")
    encryption = _policy(template, "VectorEncryptionPolicy")

    # The collection (renamed when it moved into its group) is the one every policy covers,
    # by its collection and by its indexes
    assert _named(template, "VectorCollection") == COLLECTION
    for policy in (reindex, functions, deployer, network, encryption):
        for rule in policy["Rules"]:
            kind = rule["ResourceType"]
            expected = f"{kind}/{COLLECTION}" + ("/*" if kind == "index" else "")
            assert rule["Resource"] == [expected], policy


def test_the_collection_scales_in_a_nextgen_group_between_its_minimum_and_maximum(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template, OpenSearchMinCapacity="1", OpenSearchMaxCapacity="8")
    group = _properties(template, "VectorCollectionGroup", parameters)
    collection = _properties(template, "VectorCollection", parameters)

    # Scale to zero is NextGen's: the group is NEXTGEN, holds the collection (by name: its
    # Ref is its id), and both components scale between the two parameters
    assert group["Generation"] == "NEXTGEN"
    assert collection["CollectionGroupName"] == {"Fn::Sub": "memkit-${Stage}"}
    assert _named(template, "VectorCollectionGroup") == "memkit-dev"
    assert "VectorCollectionGroup" in template["Resources"]["VectorCollection"]["DependsOn"]
    assert group["CapacityLimits"] == {
        "MinIndexingCapacityInOcu": "1",
        "MinSearchCapacityInOcu": "1",
        "MaxIndexingCapacityInOcu": "8",
        "MaxSearchCapacityInOcu": "8",
    }
    assert group["StandbyReplicas"] == collection["StandbyReplicas"] == "ENABLED"
    for store, created in (("serverless", True), ("domain", False), ("dynamodb", False)):
        assert (
            _created(template, "VectorCollectionGroup", {**parameters, "VectorStore": store})
            is created
        )


def test_the_default_collection_bills_no_capacity_while_idle(template: dict[str, Any]) -> None:
    parameters = _parameters(template)
    limits = _properties(template, "VectorCollectionGroup", parameters)["CapacityLimits"]

    # A NEXTGEN group whose minimum is 0 for indexing and for search: after 10 idle minutes
    # both scale to 0 OCU and bill nothing
    assert parameters["VectorStore"] == "serverless"
    assert _properties(template, "VectorCollectionGroup", parameters)["Generation"] == "NEXTGEN"
    assert limits["MinIndexingCapacityInOcu"] == limits["MinSearchCapacityInOcu"] == "0"


def test_every_capacity_the_parameters_allow_is_one_the_group_accepts(
    template: dict[str, Any],
) -> None:
    minimums = [float(v) for v in template["Parameters"]["OpenSearchMinCapacity"]["AllowedValues"]]
    maximums = [float(v) for v in template["Parameters"]["OpenSearchMaxCapacity"]["AllowedValues"]]

    # CollectionGroup CapacityLimits: multiples of 0.5 OCU, a minimum from 0, a maximum from
    # 1; and any minimum with any maximum (no rule can compare two numbers): min <= max
    assert all(value * 2 == int(value * 2) for value in minimums + maximums)
    assert min(minimums) == 0
    assert min(maximums) >= 1
    assert max(minimums) <= min(maximums)


def _samconfig_overrides(stage: str = "default") -> dict[str, str]:
    """The parameter overrides `sam deploy --config-env <stage>` passes (samconfig.toml)."""
    import shlex
    import tomllib

    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    overrides = config[stage]["deploy"]["parameters"]["parameter_overrides"]
    return dict(p.split("=", 1) for p in shlex.split(overrides))


def _sam_update(
    template: dict[str, Any], previous: dict[str, str], overrides: dict[str, str]
) -> dict[str, str]:
    """The values an update by `sam deploy` of a stack deployed with `previous` runs with: SAM
    CLI sends each parameter the template declares, its override or else UsePreviousValue
    (samcli's DeployContext.merge_parameters), so a parameter the stack had keeps its value,
    a new one takes its default, and one the template no longer declares is never sent."""
    return {
        name: overrides.get(name, previous.get(name, str(spec.get("Default", ""))))
        for name, spec in template["Parameters"].items()
    }


def test_the_dev_stage_of_samconfig_deploys(template: dict[str, Any]) -> None:
    parameters = _parameters(template, **_samconfig_overrides())

    # What `sam deploy` passes for dev breaks none of the template's rules
    assert _refusals(template, parameters, identity=True) == []


def test_sam_deploy_updates_a_dev_stack_deployed_with_standby_replicas_disabled(
    template: dict[str, Any],
) -> None:
    # Given the dev stack as samconfig.toml deployed it before the collection group: with
    # OpenSearchStandbyReplicas=DISABLED, a value the stack keeps
    previous = {
        "Stage": "dev",
        "LogLevel": "INFO",
        "OpenSearchStandbyReplicas": "DISABLED",
        "OpenSearchNetworkAccess": "public",
        "CreateUserPool": "true",
    }

    # When `sam deploy` updates it with today's samconfig.toml
    parameters = _sam_update(template, previous, _samconfig_overrides())

    # Then no rule refuses the update, and the NEXTGEN group and its collection keep standby
    # replicas, the one value a NEXTGEN group takes
    assert _refusals(template, parameters, identity=True) == []
    group = _properties(template, "VectorCollectionGroup", parameters)
    collection = _properties(template, "VectorCollection", parameters)
    assert group["StandbyReplicas"] == collection["StandbyReplicas"] == "ENABLED"


# A Serverless collection that scaled to zero answers the first request to its search, and the
# first to its indexing, after 10 to 30 s ("Scale to zero for Amazon OpenSearch Serverless");
# the first searches after idle measured 18 to 19 s (a public DynamoDB vs OpenSearch
# Serverless comparison, us-west-2, August 2026).
WAKE_AT_MOST = 30
WAKE_MEASURED = 19
# What a request needs after its last request to OpenSearch (the table's writes, a job queued,
# the answer), and a Lambda cold start before the handler runs: both inside API Gateway's
# integration timeout.
REST_OF_A_REQUEST = 3
COLD_START = 2
# The most requests to the collection an API or MCP request makes one after another, each of
# which may meet a component asleep (search and indexing wake on their own): a DELETE's
# listing of the vectors (a search), then their bulk removal (indexing).
REQUESTS_IN_A_ROW = 2
# The functions that wait for the collection in the background, and how many requests in a row
# may meet a sleeping component (an indexer batch: a lookup on search, then a bulk write).
BACKGROUND = {
    "IndexerFunction": 2,
    "MemoryWorkerFunction": 2,
    "CleanupFunction": 2,
    "ReindexFunction": 2,
}


# A managed domain, as a deployer names it.
A_DOMAIN = {
    "VectorStore": "domain",
    "OpenSearchDomainEndpoint": "https://search-memkit.us-east-1.es.amazonaws.com",
    "OpenSearchDomainArn": "arn:aws:es:us-east-1:123456789012:domain/memkit",
}


def _environment(template: dict[str, Any], function: str, parameters: dict[str, str]) -> Any:
    """A function's variables as deployed: the Globals', then its own over them."""
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    own = _functions(template)[function].get("Environment", {}).get("Variables", {})
    return _evaluate(template, {**variables, **own}, parameters)


def _serverless_wait(template: dict[str, Any], function: str) -> float:
    """How long one of the function's requests to a Serverless collection may take."""
    parameters = _parameters(template, VectorStore="serverless")
    return float(_environment(template, function, parameters)["MEMKIT_OPENSEARCH_TIMEOUT_SECONDS"])


@pytest.mark.parametrize(
    ("function", "integration"),
    [("ApiFunction", "ApiIntegration"), ("McpFunction", "McpIntegration")],
)
def test_requests_to_a_sleeping_collection_end_in_time_for_the_functions_own_503(
    template: dict[str, Any], function: str, integration: str
) -> None:
    from memkit.handlers.http import ANSWER_MARGIN_SECONDS
    from memkit.vectors.opensearch import BULK_WAIT_SECONDS

    wait = _serverless_wait(template, function)
    timeout = _functions(template)[function]["Timeout"]
    gateway = template["Resources"][integration]["Properties"]["TimeoutInMillis"] / 1000

    # The longest the function may wait for the collection: its longest request (a bulk
    # write's) as many times as a route sends one after another, each meeting a wake, but
    # nothing past the invocation's deadline (its remaining time less the margin)
    longest_request = max(wait, BULK_WAIT_SECONDS)
    waited = min(REQUESTS_IN_A_ROW * longest_request, timeout - ANSWER_MARGIN_SECONDS)

    # The usual wake fits in a search's wait; whatever the collection does, the function has
    # the time to answer its own 503 with Retry-After, before Lambda's timeout and before
    # API Gateway's
    assert wait > WAKE_MEASURED
    assert waited + REST_OF_A_REQUEST <= timeout
    assert timeout + COLD_START <= gateway


@pytest.mark.parametrize(("function", "in_a_row"), BACKGROUND.items())
def test_background_functions_wait_out_a_collections_wake(
    template: dict[str, Any], function: str, in_a_row: int
) -> None:
    wait = _serverless_wait(template, function)

    # Each request outwaits the longest wake, and the function outwaits them all
    assert wait > WAKE_AT_MOST
    assert in_a_row * wait < _functions(template)[function]["Timeout"]


def test_a_domain_waits_as_before(template: dict[str, Any]) -> None:
    from memkit.config import IndexSettings

    parameters = _parameters(template, **A_DOMAIN)

    # No wake to wait for: every function keeps the settings' default
    for function in (*VECTOR_FUNCTIONS, "ReindexFunction"):
        assert "MEMKIT_OPENSEARCH_TIMEOUT_SECONDS" not in _environment(
            template, function, parameters
        )
    assert IndexSettings().opensearch_timeout_seconds == 10


def test_a_domain_store_is_reached_through_its_paths_alone(template: dict[str, Any]) -> None:
    parameters = _parameters(template, **A_DOMAIN)
    environment = _evaluate(
        template, template["Globals"]["Function"]["Environment"]["Variables"], parameters
    )

    for function in VECTOR_FUNCTIONS:
        statements = _statements(template, function, parameters)
        [access] = _granting(statements, "es:ESHttpPost")
        assert access["Resource"] == {"Fn::Sub": "${OpenSearchDomainArn}/*"}
        assert all(action.startswith("es:ESHttp") for action in access["Action"])
        assert _granting(statements, "aoss:APIAccessAll") == []
    assert environment["MEMKIT_OPENSEARCH_FLAVOUR"] == "domain"
    assert environment["MEMKIT_OPENSEARCH_ENDPOINT"] == parameters["OpenSearchDomainEndpoint"]


@pytest.mark.parametrize(
    ("deployer", "created"), [("", False), ("arn:aws:iam::123456789012:role/ci", True)]
)
def test_the_stack_creates_the_serverless_index_only_for_a_named_deployer(
    template: dict[str, Any], deployer: str, created: bool
) -> None:
    index = template["Resources"]["VectorIndex"]
    parameters = _parameters(template, VectorStore="serverless", DeployerPrincipalArn=deployer)

    assert _evaluate(template, {"Condition": index["Condition"]}, parameters) is created


def test_every_parameter_says_what_it_is_for(template: dict[str, Any]) -> None:
    grouped = {
        name
        for group in template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
        for name in group["Parameters"]
    }

    for name, parameter in template["Parameters"].items():
        assert parameter.get("Description"), f"{name} has no Description"
    assert grouped == set(template["Parameters"])


# --- Browsers: CORS on the HTTP API ----------------------------------------------------------

ORIGINS = "https://app.example.com,http://localhost:5173"


def _cors(template: dict[str, Any], **overrides: str) -> Any:
    """HttpApi's CorsConfiguration as a deployment with `overrides` gets it (its origins split
    at the commas, as Fn::Split does)."""
    api = template["Resources"]["HttpApi"]["Properties"]
    cors = _evaluate(template, api, _parameters(template, **overrides)).get("CorsConfiguration")
    if cors is not None:
        separator, origins = cors["AllowOrigins"]["Fn::Split"]
        cors["AllowOrigins"] = origins.split(separator)
    return cors


def test_without_allowed_origins_the_api_has_no_cors(template: dict[str, Any]) -> None:
    assert template["Parameters"]["CorsAllowedOrigins"]["Default"] == ""
    assert _cors(template) is None


def test_allowed_origins_become_the_http_apis_cors_configuration(
    template: dict[str, Any],
) -> None:
    cors = _cors(template, CorsAllowedOrigins=ORIGINS)

    assert cors["AllowOrigins"] == ["https://app.example.com", "http://localhost:5173"]
    # Tokens are headers, never cookies; and API Gateway refuses credentials with "*".
    assert "AllowCredentials" not in cors
    assert 0 < cors["MaxAge"] <= 7200  # Chromium caps a preflight's cache at 2 hours


def test_cors_allows_every_method_and_request_header_the_api_uses(
    template: dict[str, Any],
) -> None:
    from memkit.handlers.api import app
    from memkit_dev.local.gateway import http_api_routes

    cors = _cors(template, CorsAllowedOrigins="*")
    routes = http_api_routes(template, "ApiFunction") + http_api_routes(template, "McpFunction")
    declared = {
        field.alias.lower()
        for route in app._static_routes + app._dynamic_routes
        for field in route.dependant.header_params
    }

    assert {route.method for route in routes} <= set(cors["AllowMethods"])
    assert declared | {"authorization", "content-type", "mcp-session-id"} <= set(
        cors["AllowHeaders"]
    )


def test_cors_exposes_the_headers_a_client_reads(template: dict[str, Any]) -> None:
    from memkit.handlers.http import WARNING_HEADER

    cors = _cors(template, CorsAllowedOrigins="*")

    assert {"etag", "retry-after", "location", WARNING_HEADER} <= set(cors["ExposeHeaders"])


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("", True),
        ("*", True),
        ("https://app.example.com", True),
        (ORIGINS, True),
        ("http://127.0.0.1:8080", True),
        ("https://app.example.com, http://localhost:5173", False),  # a space
        ("app.example.com", False),  # no scheme
        ("https://app.example.com/", False),  # a path: browsers send none
        ("https://a.example.com,", False),
    ],
)
def test_allowed_origins_must_be_origins(
    template: dict[str, Any], value: str, allowed: bool
) -> None:
    pattern = template["Parameters"]["CorsAllowedOrigins"]["AllowedPattern"]

    assert bool(re.fullmatch(pattern, value)) is allowed


# --- Background curation: stream -> curator -> work queue -> worker --------------------------

CURATION_VARIABLES = (
    "MEMKIT_LLM_PROVIDER",
    "MEMKIT_SUMMARY_WINDOW_TOKENS",
    "MEMKIT_SUMMARY_THRESHOLD",
    "MEMKIT_EXTRACTION_QUIET_SECONDS",
)


def _event_of(template: dict[str, Any], function: str, kind: str) -> dict[str, Any]:
    [event] = [e for e in _functions(template)[function]["Events"].values() if e["Type"] == kind]
    return event


def _curator_filters(template: dict[str, Any]) -> list[str]:
    criteria = _event_of(template, "CuratorFunction", "DynamoDB")["Properties"]["FilterCriteria"]
    return [entry["Pattern"] for entry in criteria["Filters"]]


def _session(record: dict[str, Any]) -> dict[str, Any]:
    """`record` as a change to a session document (kind "session" in each image it has)."""
    for image in ("NewImage", "OldImage"):
        if image in record["dynamodb"]:
            record = _with_image(record, image, kind="session")
    return record


_CURATED = [
    ("a session created", lambda: _session(_stream_record("stream_insert_record.json"))),
    ("a session updated", lambda: _session(_stream_record("stream_modify_record.json"))),
    ("a long-term record written", lambda: _stream_record("stream_insert_record.json")),
]
_NOT_CURATED = [
    ("a session deleted", lambda: _session(_stream_record("stream_remove_record.json"))),
    ("a message appended", lambda: _inserted(_stream_record("stream_ttl_remove_message.json"))),
    (
        "a long-term record deleted",
        lambda: _stream_record("stream_remove_record.json"),
    ),
    (
        "a scratchpad written",
        lambda: _with_image(
            _stream_record("stream_insert_record.json"), "NewImage", kind="scratchpad"
        ),
    ),
    (
        "a pending memory",
        lambda: _with_image(_stream_record("stream_insert_record.json"), "NewImage", kind="memory"),
    ),
]


@pytest.mark.parametrize(("what", "record"), _CURATED, ids=[what for what, _ in _CURATED])
def test_the_curator_reads_session_and_record_writes(
    template: dict[str, Any], what: str, record: Any
) -> None:
    from memkit_dev.local.event_filter import passes

    assert passes(_curator_filters(template), record()), f"{what} must reach the curator"


@pytest.mark.parametrize(("what", "record"), _NOT_CURATED, ids=[what for what, _ in _NOT_CURATED])
def test_the_curator_reads_nothing_else(template: dict[str, Any], what: str, record: Any) -> None:
    from memkit_dev.local.event_filter import passes

    assert not passes(_curator_filters(template), record()), f"{what} must not invoke the curator"


def test_the_curator_reads_the_stream_in_batches_with_partial_failures_and_bounded_retries(
    template: dict[str, Any],
) -> None:
    from memkit_dev.local.streams import EventSourceMapping

    properties = _event_of(template, "CuratorFunction", "DynamoDB")["Properties"]
    mapping = EventSourceMapping.from_template(template, "CuratorFunction")

    assert properties["Stream"] == {"Fn::GetAtt": ["MemoryTable", "StreamArn"]}
    assert mapping.starting_position == "TRIM_HORIZON"
    assert (mapping.batch_size, mapping.batching_window_seconds) == (100, 1)
    assert mapping.bisect_on_error is True
    assert mapping.report_batch_item_failures is True
    assert (mapping.maximum_retry_attempts, mapping.maximum_record_age_seconds) == (3, 3600)
    assert _curator_filters(template) == [
        '{"dynamodb": {"NewImage": {"kind": {"S": ["session", "record"]}}}}'
    ]
    assert mapping.filters == _curator_filters(template)


def test_the_table_stream_has_at_most_two_readers(template: dict[str, Any]) -> None:
    # DynamoDB Streams throttles beyond two concurrent readers of a shard.
    readers = [
        name
        for name, properties in _functions(template).items()
        for event in properties.get("Events", {}).values()
        if event["Type"] == "DynamoDB"
        and event["Properties"]["Stream"] == {"Fn::GetAtt": ["MemoryTable", "StreamArn"]}
    ]

    assert sorted(readers) == ["CuratorFunction", "IndexerFunction"]


def _assert_watched(template: dict[str, Any], queue: str, alarm: str) -> None:
    """`queue` keeps dead letters 14 days and `alarm` fires on its first one (every queue's
    encryption: test_every_queue_and_log_group_is_encrypted_with_the_key_when_asked)."""
    resources = template["Resources"]
    properties = resources[queue]["Properties"]
    watch = resources[alarm]["Properties"]

    assert properties["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert watch["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}
    ]
    assert (watch["MetricName"], watch["ComparisonOperator"], watch["Threshold"]) == (
        "ApproximateNumberOfMessagesVisible",
        "GreaterThanThreshold",
        0,
    )
    for topic in ("", "arn:aws:sns:us-east-1:123456789012:ops"):
        resolved = _evaluate(template, watch, _parameters(template, AlarmTopicArn=topic))
        assert resolved.get("AlarmActions") == ([topic] if topic else None)


def test_failed_curator_batches_go_to_a_queue_an_alarm_watches(template: dict[str, Any]) -> None:
    properties = _event_of(template, "CuratorFunction", "DynamoDB")["Properties"]
    destination = properties["DestinationConfig"]["OnFailure"]["Destination"]
    send = _granting(
        _statements(template, "CuratorFunction", _parameters(template)), "sqs:SendMessage"
    )

    assert destination == {"Fn::GetAtt": ["CuratorDeadLetterQueue", "Arn"]}
    assert destination in [statement["Resource"] for statement in send]
    _assert_watched(template, "CuratorDeadLetterQueue", "CuratorDeadLetterAlarm")
    assert template["Outputs"]["CuratorDeadLetterQueueUrl"]["Value"] == {
        "Ref": "CuratorDeadLetterQueue"
    }


def test_the_curator_reads_the_table_and_queues_jobs_without_a_model(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template, LlmProvider="bedrock", EmbeddingProvider="titan")
    statements = _statements(template, "CuratorFunction", parameters)
    curator = _functions(template)["CuratorFunction"]
    actions = {action for statement in statements for action in statement["Action"]}

    assert curator["Environment"]["Variables"]["MEMKIT_WORK_QUEUE_URL"] == {
        "Ref": "MemoryWorkQueue"
    }
    assert [s["Resource"] for s in _granting(statements, "sqs:SendMessage")] == [
        {"Fn::GetAtt": ["MemoryWorkQueue", "Arn"]},
        {"Fn::GetAtt": ["CuratorDeadLetterQueue", "Arn"]},
    ]
    assert actions == {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "sqs:SendMessage",
    }


def test_a_deletion_sweeps_again_after_the_longest_job_that_read_what_it_removed(
    template: dict[str, Any],
) -> None:
    from memkit.jobs.deletion import LATE_WRITES_SECONDS, WRITER_SECONDS

    functions = _functions(template)
    writers = [functions[name]["Timeout"] for name in ("MemoryWorkerFunction", "IndexerFunction")]

    # The follow-up a deletion queues comes after any job that read what it removed can have
    # ended: an extraction (the worker) that read a session, a promotion (the indexer) that
    # read a pending memory; the longest timeout of the two, and a margin
    assert max(writers) == WRITER_SECONDS
    assert LATE_WRITES_SECONDS > WRITER_SECONDS


def test_the_work_queue_sends_poison_jobs_to_a_dead_letter_queue_an_alarm_watches(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    queue = resources["MemoryWorkQueue"]["Properties"]
    worker = _functions(template)["MemoryWorkerFunction"]

    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": ["MemoryWorkDeadLetterQueue", "Arn"]},
        "maxReceiveCount": 5,  # Lambda's advice for SQS event sources: at least 5
    }
    # Lambda's advice: at least six times the function's timeout.
    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]
    assert queue["MessageRetentionPeriod"] == 4 * 24 * 3600
    _assert_watched(template, "MemoryWorkDeadLetterQueue", "MemoryWorkDeadLetterAlarm")
    assert template["Outputs"]["MemoryWorkQueueUrl"]["Value"] == {"Ref": "MemoryWorkQueue"}
    assert template["Outputs"]["MemoryWorkDeadLetterQueueUrl"]["Value"] == {
        "Ref": "MemoryWorkDeadLetterQueue"
    }


def test_the_worker_reports_failed_jobs_alone_and_runs_as_wide_as_the_parameter_allows(
    template: dict[str, Any],
) -> None:
    from memkit_dev.local.queues import queue_mapping_from_template

    properties = _event_of(template, "MemoryWorkerFunction", "SQS")["Properties"]
    concurrency = template["Parameters"]["MemoryWorkerConcurrency"]
    mapping = queue_mapping_from_template(template, "MemoryWorkerFunction")

    assert properties["Queue"] == {"Fn::GetAtt": ["MemoryWorkQueue", "Arn"]}
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert properties["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "MemoryWorkerConcurrency"}}
    # ScalingConfig.MaximumConcurrency takes 2 to 1,000.
    assert 2 <= concurrency["MinValue"] <= concurrency["Default"] <= concurrency["MaxValue"] <= 1000
    assert (mapping.queue_resource, mapping.batch_size) == ("MemoryWorkQueue", 5)
    assert mapping.report_batch_item_failures is True


LLM_MODEL_ARN = {
    "Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${LlmModelId}"
}


@pytest.mark.parametrize(("provider", "granted"), [("local", False), ("bedrock", True)])
def test_the_worker_may_converse_with_the_configured_model_only_on_bedrock(
    template: dict[str, Any], provider: str, granted: bool
) -> None:
    parameters = _parameters(template, LlmProvider=provider, EmbeddingProvider="local")

    invoke = _granting(
        _statements(template, "MemoryWorkerFunction", parameters), "bedrock:InvokeModel"
    )

    # Converse is authorised by bedrock:InvokeModel (Bedrock API reference).
    assert [(s["Action"], s["Resource"]) for s in invoke] == (
        [(["bedrock:InvokeModel"], LLM_MODEL_ARN)] if granted else []
    )


def test_no_other_function_may_call_the_curation_model(template: dict[str, Any]) -> None:
    parameters = _parameters(template, LlmProvider="bedrock", EmbeddingProvider="titan")

    for function in _functions(template):
        # The worker curates; the cleanup run's compaction asks whether near duplicates match.
        if function in ("MemoryWorkerFunction", "CleanupFunction"):
            continue
        resources = [
            s["Resource"]
            for s in _granting(_statements(template, function, parameters), "bedrock:InvokeModel")
        ]
        assert LLM_MODEL_ARN not in resources, function


@pytest.mark.parametrize(
    ("provider", "model"), [("local", None), ("bedrock", "amazon.nova-lite-v1:0")]
)
def test_every_function_sees_the_same_curation_settings(
    template: dict[str, Any], provider: str, model: str | None
) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]

    environment = _evaluate(template, variables, _parameters(template, LlmProvider=provider))

    assert environment["MEMKIT_LLM_PROVIDER"] == provider
    assert environment.get("MEMKIT_LLM_MODEL") == model
    assert (
        environment["MEMKIT_SUMMARY_WINDOW_TOKENS"],
        environment["MEMKIT_SUMMARY_THRESHOLD"],
    ) == (
        "16000",
        "0.7",
    )
    assert environment["MEMKIT_EXTRACTION_QUIET_SECONDS"] == "60"
    for name, properties in _functions(template).items():
        overridden = set(properties.get("Environment", {}).get("Variables", {}))
        assert not overridden & {*CURATION_VARIABLES, "MEMKIT_LLM_MODEL"}, name


@pytest.mark.parametrize(
    ("threshold", "accepted"),
    [
        ("0.7", True),
        ("0.1", True),
        ("0.95", True),
        (".85", True),
        ("0.5", True),
        ("0.05", False),
        ("0.96", False),
        ("1", False),
        ("1.0", False),
        ("0.7x", False),
        ("", False),
    ],
)
def test_the_summary_threshold_is_a_fraction_from_a_tenth_to_0_95(
    template: dict[str, Any], threshold: str, accepted: bool
) -> None:
    pattern = template["Parameters"]["SummaryThreshold"]["AllowedPattern"]

    assert bool(re.fullmatch(pattern, threshold)) is accepted


def test_the_quiet_period_fits_in_an_sqs_delay(template: dict[str, Any]) -> None:
    quiet = template["Parameters"]["ExtractionQuietSeconds"]

    # An extraction job is a message delayed by the quiet period: SQS delays 0 to 900 s.
    assert 0 <= quiet["MinValue"] <= quiet["Default"] <= quiet["MaxValue"] <= 900


def test_the_default_curation_model_is_a_foundation_model_id(template: dict[str, Any]) -> None:
    model = template["Parameters"]["LlmModelId"]

    # The worker's IAM names foundation-model/<id>; an inference profile (us.…) would need more.
    assert re.fullmatch(model["AllowedPattern"], model["Default"])
    assert model["Default"].split(".", 1)[0] not in {"us", "eu", "apac", "global"}


@pytest.mark.parametrize("bound", ["MinValue", "Default", "MaxValue"])
def test_every_curation_setting_the_stack_allows_is_one_the_functions_accept(
    template: dict[str, Any], bound: str
) -> None:
    from memkit.config import CurationSettings, LLMSettings

    numbers = ("SummaryWindowTokens", "ExtractionQuietSeconds")
    thresholds = {"MinValue": "0.1", "Default": "0.7", "MaxValue": "0.95"}
    parameters = _parameters(
        template,
        LlmProvider="bedrock",
        SummaryThreshold=thresholds[bound],
        **{name: str(template["Parameters"][name][bound]) for name in numbers},
    )
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    environment = {
        name: value
        for name, value in _evaluate(template, variables, parameters).items()
        if name in (*CURATION_VARIABLES, "MEMKIT_LLM_MODEL")
    }

    curation = CurationSettings.from_env({**environment, "MEMKIT_TABLE_NAME": "memkit-dev"})
    llm = LLMSettings.from_env(environment)

    assert curation.summary_threshold == float(thresholds[bound])
    assert (
        curation.extraction_quiet_seconds == template["Parameters"]["ExtractionQuietSeconds"][bound]
    )
    assert (llm.llm_provider, llm.llm_model) == ("bedrock", "amazon.nova-lite-v1:0")


# --- Encryption, network access and abuse limits ----------------------------------------------

KEY_ARN = {"Fn::GetAtt": ["DataKey", "Arn"]}
# What the access log may say about a request. Never the path, the query string, a header or
# a claim: user, session and memory ids travel in those.
ACCESS_LOG_VARIABLES = {
    "$context.requestId",
    "$context.requestTimeEpoch",
    "$context.identity.sourceIp",
    "$context.httpMethod",
    "$context.routeKey",
    "$context.protocol",
    "$context.status",
    "$context.responseLatency",
    "$context.integrationStatus",
    "$context.integrationLatency",
    "$context.integrationErrorMessage",
    "$context.error.message",
    "$context.authorizer.error",
    "$context.error.responseType",
    "$context.responseLength",
}


def _resources_of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def _created(template: dict[str, Any], name: str, parameters: dict[str, str]) -> bool:
    condition = template["Resources"][name].get("Condition")
    return condition is None or bool(_evaluate(template, {"Condition": condition}, parameters))


def _properties(template: dict[str, Any], name: str, parameters: dict[str, str]) -> Any:
    return _evaluate(template, template["Resources"][name]["Properties"], parameters)


def _function_roles(template: dict[str, Any]) -> set[str]:
    return {f"{name}Role" for name in _functions(template)}


def test_the_access_log_names_the_route_never_the_path(template: dict[str, Any]) -> None:
    settings = template["Resources"]["HttpApiStage"]["Properties"]["AccessLogSettings"]
    record = json.loads(settings["Format"])
    variables = set(re.findall(r"\$context\.[A-Za-z.]+", settings["Format"]))

    assert record["routeKey"] == "$context.routeKey"
    assert "$context.path" not in variables
    assert variables <= ACCESS_LOG_VARIABLES, "a new access log field: does it carry an id?"
    assert {
        "$context.requestId",
        "$context.status",
        "$context.responseLatency",
        "$context.integrationErrorMessage",
    } <= variables
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["HttpApiAccessLogs", "Arn"]}


def test_by_default_the_key_encrypts_the_table_every_log_group_queue_and_the_collection(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template)
    key = template["Resources"]["DataKey"]

    assert _created(template, "DataKey", parameters)
    assert key["Properties"]["EnableKeyRotation"] is True
    # Kept with the table it encrypts: a retained table is unreadable without its key.
    assert (key["DeletionPolicy"], key["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert template["Resources"]["MemoryTable"]["DeletionPolicy"] == "Retain"
    assert _properties(template, "MemoryTable", parameters)["SSESpecification"] == {
        "SSEEnabled": True,
        "SSEType": "KMS",
        "KMSMasterKeyId": KEY_ARN,
    }
    groups = _resources_of(template, "AWS::Logs::LogGroup")
    queues = _resources_of(template, "AWS::SQS::Queue")
    assert len(groups) == len(_functions(template)) + 1  # and the access logs
    for name in groups:
        assert _properties(template, name, parameters)["KmsKeyId"] == KEY_ARN, name
    for name in queues:
        queue = _properties(template, name, parameters)
        assert queue["KmsMasterKeyId"] == {"Ref": "DataKey"}, name
        assert queue["SqsManagedSseEnabled"] is False, name
    assert _policy(template, "VectorEncryptionPolicy") == {
        "Rules": [{"ResourceType": "collection", "Resource": [f"collection/{COLLECTION}"]}],
        "AWSOwnedKey": False,
        "KmsARN": "${DataKey.Arn}",
    }


def test_without_the_key_aws_keys_encrypt_everything_and_nothing_refers_to_it(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template, UseCustomerManagedKey="false")
    created = [name for name in template["Resources"] if _created(template, name, parameters)]

    assert not {"DataKey", "DataKeyAlias", "DataKeyUsePolicy"} & set(created)
    assert "DataKey" not in json.dumps(
        [_properties(template, name, parameters) for name in created]
    )
    # The table's AWS managed key (aws/dynamodb), as before the key existed.
    assert _properties(template, "MemoryTable", parameters)["SSESpecification"] == {
        "SSEEnabled": True,
        "SSEType": "KMS",
    }
    for name in _resources_of(template, "AWS::SQS::Queue"):
        queue = _properties(template, name, parameters)
        assert (queue.get("KmsMasterKeyId"), queue["SqsManagedSseEnabled"]) == (None, True), name
    for name in _resources_of(template, "AWS::Logs::LogGroup"):
        assert "KmsKeyId" not in _properties(template, name, parameters), name
    encryption = _policy(template, "VectorEncryptionPolicy", UseCustomerManagedKey="false")
    assert (encryption["AWSOwnedKey"], encryption.get("KmsARN")) == (True, None)


def test_the_key_policy_lets_cloudwatch_logs_encrypt_this_stacks_log_groups_alone(
    template: dict[str, Any],
) -> None:
    import fnmatch

    policy = template["Resources"]["DataKey"]["Properties"]["KeyPolicy"]
    statements = {statement["Sid"]: statement for statement in policy["Statement"]}
    logs = statements["CloudWatchLogsEncryptsTheLogGroups"]
    context = logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    patterns = [pattern["Fn::Sub"] for pattern in context]
    prefix = "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:"

    assert set(statements) == {"AccountAdministersTheKey", "CloudWatchLogsEncryptsTheLogGroups"}
    assert statements["AccountAdministersTheKey"]["Principal"] == {
        "AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}
    }
    assert logs["Principal"] == {"Service": {"Fn::Sub": "logs.${AWS::Region}.amazonaws.com"}}
    for name, group in _resources_of(template, "AWS::Logs::LogGroup").items():
        arn = prefix + group["Properties"]["LogGroupName"]["Fn::Sub"]
        assert any(fnmatch.fnmatchcase(arn, pattern) for pattern in patterns), name
    for other in ("/aws/lambda/billing-api", "/aws/http-api/other"):
        assert not any(fnmatch.fnmatchcase(prefix + other, pattern) for pattern in patterns)


def test_every_role_that_reaches_the_table_or_a_queue_uses_the_key_through_them_alone(
    template: dict[str, Any],
) -> None:
    policy = template["Resources"]["DataKeyUsePolicy"]
    schedule_roles = {
        f"{function}{name}Role"  # SAM's role for a ScheduleV2 event (it sends dead letters)
        for function, properties in _functions(template).items()
        for name, event in properties.get("Events", {}).items()
        if event["Type"] == "ScheduleV2"
    }
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]

    assert policy["Condition"] == "UsesCustomerManagedKey"
    with_keys = _parameters(template, AuthMode="apikey")  # every function exists
    roles = _evaluate(template, policy["Properties"]["Roles"], with_keys)
    assert {role["Ref"] for role in roles} == (_function_roles(template) | schedule_roles)
    assert schedule_roles == {"CleanupFunctionScheduleRole"}
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == KEY_ARN
    assert sorted(statement["Action"]) == [
        "kms:Decrypt",
        "kms:DescribeKey",
        "kms:Encrypt",
        "kms:GenerateDataKey",
    ]
    assert statement["Condition"] == {
        "StringEquals": {
            "kms:ViaService": [
                {"Fn::Sub": "dynamodb.${AWS::Region}.amazonaws.com"},
                {"Fn::Sub": "sqs.${AWS::Region}.amazonaws.com"},
            ]
        }
    }


@pytest.mark.parametrize(
    ("access", "vpc", "public"),
    [("public", {}, True), ("public", IN_A_VPC, True), ("vpc", IN_A_VPC, False)],
)
def test_the_collection_is_public_only_when_a_deployer_asks(
    template: dict[str, Any], access: str, vpc: dict[str, str], public: bool
) -> None:
    parameters = _parameters(template, OpenSearchNetworkAccess=access, **vpc)

    [network] = _policy(template, "VectorNetworkPolicy", OpenSearchNetworkAccess=access, **vpc)

    assert _refusals(template, parameters) == []
    assert network["AllowFromPublic"] is public
    assert _created(template, "VectorVpcEndpoint", parameters) is not public
    assert network.get("SourceVPCEs") == (None if public else ["${VectorVpcEndpoint}"])


def test_the_default_collection_is_private_and_a_deploy_without_a_vpc_is_refused(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template)

    [network] = _policy(template, "VectorNetworkPolicy")
    [refusal] = _refusals(template, parameters)

    assert parameters["OpenSearchNetworkAccess"] == "vpc"
    assert "OpenSearchNetworkAccess=public" in refusal
    # Were it deployed anyway, it would answer no one rather than everyone.
    assert (network["AllowFromPublic"], network["SourceVPCEs"]) == (False, [])


DOMAIN = {
    "VectorStore": "domain",
    "OpenSearchDomainEndpoint": "https://search-memkit.us-east-1.es.amazonaws.com",
    "OpenSearchDomainArn": "arn:aws:es:us-east-1:123456789012:domain/memkit",
}
DEPLOYER = {"DeployerPrincipalArn": "arn:aws:iam::123456789012:role/ci"}


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        ({**IN_A_VPC, **DEPLOYER}, True),  # CloudFormation cannot reach a private collection
        ({"OpenSearchNetworkAccess": "public", **DEPLOYER}, False),
        ({"OpenSearchNetworkAccess": "public", "VpcId": IN_A_VPC["VpcId"]}, True),
        ({"OpenSearchNetworkAccess": "public", "VpcSubnetIds": IN_A_VPC["VpcSubnetIds"]}, True),
        (DOMAIN, False),  # a domain's network is the domain's own
        ({**DOMAIN, **IN_A_VPC}, False),
    ],
)
def test_the_stack_refuses_network_settings_that_cannot_work(
    template: dict[str, Any], overrides: dict[str, str], refused: bool
) -> None:
    assert bool(_refusals(template, _parameters(template, **overrides))) is refused


def test_in_a_vpc_every_function_runs_in_its_subnets_and_reaches_the_collection_over_https(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template, **IN_A_VPC)
    vpc = _evaluate(template, template["Globals"]["Function"]["VpcConfig"], parameters)
    endpoint = _properties(template, "VectorVpcEndpoint", parameters)
    [ingress] = _properties(template, "VectorEndpointSecurityGroup", parameters)[
        "SecurityGroupIngress"
    ]
    [egress] = _properties(template, "FunctionSecurityGroup", parameters)["SecurityGroupEgress"]

    assert vpc == {
        "SubnetIds": {"Fn::Split": [",", IN_A_VPC["VpcSubnetIds"]]},
        "SecurityGroupIds": [{"Ref": "FunctionSecurityGroup"}],
    }
    assert not any("VpcConfig" in properties for properties in _functions(template).values())
    assert (endpoint["VpcId"], endpoint["SubnetIds"]) == (IN_A_VPC["VpcId"], vpc["SubnetIds"])
    assert (ingress["IpProtocol"], ingress["FromPort"], ingress["ToPort"]) == ("tcp", 443, 443)
    assert ingress["SourceSecurityGroupId"] == {"Ref": "FunctionSecurityGroup"}
    assert (egress["IpProtocol"], egress["FromPort"], egress["ToPort"]) == ("tcp", 443, 443)
    assert not _created(template, "NoNetworkInterfacesOutsideVpc", parameters)


def test_outside_a_vpc_the_functions_may_not_create_network_interfaces(
    template: dict[str, Any],
) -> None:
    # SAM grants AWSLambdaVPCAccessExecutionRole whenever VpcConfig is written at all.
    parameters = _parameters(template, OpenSearchNetworkAccess="public")
    deny = template["Resources"]["NoNetworkInterfacesOutsideVpc"]["Properties"]
    [statement] = deny["PolicyDocument"]["Statement"]
    vpc = _evaluate(
        template, {"VpcConfig": template["Globals"]["Function"]["VpcConfig"]}, parameters
    )

    assert vpc == {}
    assert _created(template, "NoNetworkInterfacesOutsideVpc", parameters)
    assert not _created(template, "FunctionSecurityGroup", parameters)
    with_keys = {**parameters, "AuthMode": "apikey"}  # every function exists
    roles = _evaluate(template, deny["Roles"], with_keys)
    assert {role["Ref"] for role in roles} == _function_roles(template)
    assert statement["Effect"] == "Deny"
    assert "ec2:CreateNetworkInterface" in statement["Action"]


@pytest.mark.parametrize(
    ("function", "parameter"),
    [
        ("ApiFunction", "ApiReservedConcurrency"),
        ("IndexerFunction", "IndexerConcurrency"),
        ("McpFunction", "McpReservedConcurrency"),
    ],
)
@pytest.mark.parametrize(("reserved", "expected"), [("0", None), ("50", "50")])
def test_concurrency_is_reserved_only_when_asked(
    template: dict[str, Any], function: str, parameter: str, reserved: str, expected: str | None
) -> None:
    properties = {k: v for k, v in _functions(template)[function].items() if k != "Events"}

    resolved = _evaluate(template, properties, _parameters(template, **{parameter: reserved}))

    assert resolved.get("ReservedConcurrentExecutions") == expected


def test_the_stage_throttles_every_route_by_the_parameters(template: dict[str, Any]) -> None:
    api = template["Resources"]["HttpApiStage"]["Properties"]

    assert api["DefaultRouteSettings"] == {
        "ThrottlingRateLimit": {"Ref": "ApiThrottlingRateLimit"},
        "ThrottlingBurstLimit": {"Ref": "ApiThrottlingBurstLimit"},
    }
    assert "RouteSettings" not in api  # no route escapes the stage's limits


# --- identity: AuthMode ---------------------------------------------------------------------

JWT_ISSUER = {"JwtIssuer": "https://idp.example.com", "JwtAudience": "memkit-api,other"}


def _routes(template: dict[str, Any]) -> dict[str, str]:
    """route key -> the logical id of its AWS::ApiGatewayV2::Route."""
    return {
        resource["Properties"]["RouteKey"]: name
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::ApiGatewayV2::Route"
    }


@pytest.mark.parametrize("bound", ["MinValue", "Default", "MaxValue"])
def test_the_functions_that_delete_users_know_how_long_the_gateway_caches_a_key(
    template: dict[str, Any], bound: str
) -> None:
    from memkit.config import ApiSettings, CurationSettings

    seconds = template["Parameters"]["ApiKeyCacheSeconds"][bound]
    parameters = _parameters(template, AuthMode="apikey", ApiKeyCacheSeconds=str(seconds))
    authorizer = _properties(template, "ApiKeyAuthorizer", parameters)
    api = _environment(template, "ApiFunction", parameters)
    worker = _environment(template, "MemoryWorkerFunction", parameters)

    # The request and the worker time a deletion's follow-up sweep by the gateway's cache.
    assert authorizer["AuthorizerResultTtlInSeconds"] == str(seconds)
    table = {"MEMKIT_TABLE_NAME": "memkit-dev"}
    cached = "MEMKIT_API_KEY_CACHE_SECONDS"
    assert ApiSettings.from_env({**table, cached: api[cached]}).api_key_cache_seconds == seconds
    curation = CurationSettings.from_env({**table, cached: worker[cached]})
    assert curation.api_key_cache_seconds == seconds


@pytest.mark.parametrize("mode", ["jwt", "iam", "apikey", "none"])
def test_every_route_is_authorized_as_auth_mode_says_with_the_scope_the_app_declares(
    template: dict[str, Any], mode: str
) -> None:
    from memkit.api.scopes import MCP_ROUTE_SCOPES, VERIFIED_BY_FUNCTION
    from memkit.handlers.api import ALL_ROUTE_SCOPES

    parameters = _parameters(template, AuthMode=mode, **JWT_ISSUER)
    expected_type = {"jwt": "JWT", "iam": "AWS_IAM", "apikey": "CUSTOM", "none": "NONE"}[mode]
    authorizer = {"jwt": "JwtAuthorizer", "apikey": "ApiKeyAuthorizer"}.get(mode)
    routes = _routes(template)
    assert {key.rstrip("/") for key in ALL_ROUTE_SCOPES} == set(routes)

    for key, name in routes.items():
        route = _properties(template, name, parameters)
        scope = ALL_ROUTE_SCOPES[key]
        integration = "McpIntegration" if key in MCP_ROUTE_SCOPES else "ApiIntegration"
        assert route["Target"] == {"Fn::Sub": f"integrations/${{{integration}}}"}
        if scope is None:  # health, the OpenAPI document, its page: public in every mode
            assert route["AuthorizationType"] == "NONE", key
            continue
        if key in VERIFIED_BY_FUNCTION and mode in ("jwt", "apikey"):
            # POST /mcp: its function verifies the credential (its 401 names the metadata)
            assert route["AuthorizationType"] == "NONE", key
            assert "AuthorizerId" not in route, key
            assert "AuthorizationScopes" not in route, key
            continue
        assert route["AuthorizationType"] == expected_type, key
        assert route.get("AuthorizerId") == ({"Ref": authorizer} if authorizer else None), key
        if mode != "jwt":
            assert "AuthorizationScopes" not in route, key
            continue
        [listed] = route["AuthorizationScopes"]["Fn::Split"][1:]
        accepted = set(listed["Fn::Sub"].split(","))
        plain = {scope, "memory:admin"}  # admin implies read and write
        # Exactly as the provider names them: never the bare scope beside a prefix
        assert accepted == {f"${{JwtScopePrefix}}{s}" for s in plain}, key


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        ({}, True),  # jwt, the default, needs an issuer: no deploy is open by accident
        (JWT_ISSUER, False),
        ({"JwtIssuer": "https://idp.example.com"}, True),  # and an audience
        ({"CreateUserPool": "true"}, False),
        ({"CreateUserPool": "true", "JwtScopePrefix": ""}, True),  # its scopes are memkit/'s
        ({"CreateUserPool": "true", "JwtScopePrefix": "other/"}, True),
        ({**JWT_ISSUER, "JwtScopePrefix": ""}, False),  # a provider of bare scopes
        ({"AuthMode": "iam"}, False),
        ({"AuthMode": "apikey"}, False),
        ({"AuthMode": "none"}, True),
        ({"AuthMode": "none", "AllowUnauthenticated": "true"}, False),
    ],
)
def test_the_stack_refuses_an_auth_mode_that_would_leave_the_api_open_or_unverifiable(
    template: dict[str, Any], overrides: dict[str, str], refused: bool
) -> None:
    parameters = _parameters(template, **IN_A_VPC, **overrides)
    assert bool(_refusals(template, parameters, identity=True)) is refused


@pytest.mark.parametrize(
    ("overrides", "created"),
    [
        (JWT_ISSUER, {"JwtAuthorizer"}),
        ({"CreateUserPool": "true"}, {"JwtAuthorizer", "UserPool", "UserPoolClient"}),
        ({"AuthMode": "apikey"}, {"ApiKeyAuthorizer", "ApiKeyAuthorizerFunction"}),
        ({"AuthMode": "iam"}, set()),
        ({"AuthMode": "none", "AllowUnauthenticated": "true"}, set()),
    ],
)
def test_each_auth_mode_creates_its_own_authorizer_and_nothing_else(
    template: dict[str, Any], overrides: dict[str, str], created: set[str]
) -> None:
    parameters = _parameters(template, **overrides)
    candidates = {
        "JwtAuthorizer",
        "UserPool",
        "UserPoolClient",
        "ApiKeyAuthorizer",
        "ApiKeyAuthorizerFunction",
    }
    assert {name for name in candidates if _created(template, name, parameters)} == created


def test_the_user_pool_issues_the_tokens_the_jwt_authorizer_accepts(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template, CreateUserPool="true")
    jwt = _properties(template, "JwtAuthorizer", parameters)["JwtConfiguration"]
    client = _properties(template, "UserPoolClient", parameters)
    scopes = _properties(template, "UserPoolScopes", parameters)

    assert jwt["Audience"] == [{"Ref": "UserPoolClient"}]
    assert "${UserPool}" in jwt["Issuer"]["Fn::Sub"]
    prefix = parameters["JwtScopePrefix"]
    assert set(client["AllowedOAuthScopes"]) == {
        f"{prefix}{s['ScopeName']}" for s in scopes["Scopes"]
    }
    assert prefix == f"{scopes['Identifier']}/"


def test_the_api_function_reads_who_calls_as_the_template_verifies_it(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template, TenantClaim="custom:tenant", **JWT_ISSUER)
    variables = _properties(template, "ApiFunction", parameters)["Environment"]["Variables"]

    assert variables["MEMKIT_AUTH_MODE"] == "jwt"
    assert variables["MEMKIT_TENANT_CLAIM"] == "custom:tenant"
    assert variables["MEMKIT_USER_CLAIM"] == "sub"
    assert "MEMKIT_IAM_TENANT_PATTERN" not in variables  # unset: the account is the tenant
    assert variables["MEMKIT_TENANT_REQUESTS_PER_MINUTE"] == "0"
    # The scopes count only with the prefix the routes' authorizer compares them with
    assert variables["MEMKIT_SCOPE_PREFIX"] == parameters["JwtScopePrefix"] == "memkit/"
    # And the settings those variables make are valid: the function starts with them.
    from memkit.config import ApiSettings

    plain = {k: v for k, v in variables.items() if isinstance(v, str)}  # refs resolve on AWS
    settings = ApiSettings.from_env({**plain, "MEMKIT_TABLE_NAME": "memkit-t"})
    assert (settings.auth_mode, settings.tenant_claim) == ("jwt", "custom:tenant")
    assert settings.identity.scope_prefix == "memkit/"


# --- the MCP server: a function of its own -------------------------------------------------


def test_the_mcp_function_serves_exactly_its_routes(template: dict[str, Any]) -> None:
    from memkit.api.scopes import MCP_ROUTE_SCOPES
    from memkit_dev.local.gateway import http_api_routes

    wired = {route.key for route in http_api_routes(template, "McpFunction")}

    assert wired == set(MCP_ROUTE_SCOPES)
    assert _functions(template)["McpFunction"]["Handler"] == "mcp_server.lambda_handler"


def test_the_mcp_sdk_is_the_mcp_functions_own_never_the_layers() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = (ROOT / "functions/mcp/requirements.txt").read_text().splitlines()
    own = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    layer = (ROOT / "layers/memkit/requirements.txt").read_text()

    assert own == project["optional-dependencies"]["mcp"]
    assert "mcp" not in {re.split(r"[<>=\[ ]", line)[0] for line in layer.splitlines()}
    dev = project["optional-dependencies"]["dev"]
    assert any(re.fullmatch(r"memkit\[[a-z,]*\bmcp\b[a-z,]*\]", entry) for entry in dev), dev


@pytest.mark.parametrize(
    ("overrides", "issuer", "prefix"),
    [
        (JWT_ISSUER, "https://idp.example.com", "memkit/"),
        (
            {"CreateUserPool": "true"},
            {"Fn::Sub": "https://cognito-idp.${AWS::Region}.amazonaws.com/${UserPool}"},
            "memkit/",
        ),
        ({"AuthMode": "apikey"}, None, None),
        ({"AuthMode": "iam"}, None, None),
    ],
)
def test_the_mcp_function_reads_who_calls_as_the_api_does_and_names_the_token_issuer(
    template: dict[str, Any], overrides: dict[str, str], issuer: Any, prefix: str | None
) -> None:
    parameters = _parameters(template, TenantClaim="custom:tenant", **overrides)
    api = _properties(template, "ApiFunction", parameters)["Environment"]["Variables"]
    mcp = _properties(template, "McpFunction", parameters)["Environment"]["Variables"]

    # The API's own: a user's deletion (its job queue, its follow-up after the key cache).
    deletions = ("MEMKIT_WORK_QUEUE_URL", "MEMKIT_API_KEY_CACHE_SECONDS")
    identity = {k: v for k, v in api.items() if k not in deletions}
    assert {k: mcp[k] for k in identity} == identity
    assert mcp.get("MEMKIT_OAUTH_ISSUER") == issuer
    assert mcp.get("MEMKIT_SCOPE_PREFIX") == prefix
    # POST /mcp verifies tokens in the function: the audiences the JWT authorizer accepts
    audience = mcp.get("MEMKIT_JWT_AUDIENCE")
    if issuer is None:
        assert audience is None
    else:
        accepted = _properties(template, "JwtAuthorizer", parameters)["JwtConfiguration"]
        if overrides.get("CreateUserPool") == "true":
            assert accepted["Audience"] == [audience] == [{"Ref": "UserPoolClient"}]
        else:
            assert accepted["Audience"] == {"Fn::Split": [",", audience]}
    # And the settings those variables make are valid: the function starts with them.
    from memkit.config import McpSettings

    plain = {k: v for k, v in mcp.items() if isinstance(v, str)}
    McpSettings.from_env(plain)


def test_the_mcp_function_may_do_what_the_api_does_but_queue_jobs(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template, EmbeddingProvider="titan", VectorStore="serverless")

    api = _statements(template, "ApiFunction", parameters)
    mcp = _statements(template, "McpFunction", parameters)

    assert [s for s in api if "sqs:SendMessage" not in s["Action"]] == mcp
    assert _granting(mcp, "sqs:SendMessage") == []


# -- VectorStore dynamodb ----------------------------------------------------------------------


def _deployed(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, str]:
    """The resources a deployment with `parameters` creates: logical id -> type."""
    resources = template["Resources"]
    return {
        name: r["Type"] for name, r in resources.items() if _created(template, name, parameters)
    }


def test_a_dynamodb_vector_store_replaces_opensearch_with_one_on_demand_table(
    template: dict[str, Any],
) -> None:
    # Given the same deployment with the serverless collection and with the vector table
    public = {"OpenSearchNetworkAccess": "public"}
    serverless = _deployed(template, _parameters(template, VectorStore="serverless", **public))
    dynamodb = _deployed(template, _parameters(template, VectorStore="dynamodb", **public))

    # Then the vector table is the one resource added, and every OpenSearch resource (the
    # collection's group, which bills a floor while idle if OpenSearchMinCapacity asks) is gone
    assert set(dynamodb) - set(serverless) == {"VectorTable"}
    assert {t for t in dynamodb.values() if "OpenSearch" in t} == set()
    assert {t for t in serverless.values() if "OpenSearch" in t}


def test_the_vector_table_bills_while_idle_for_its_storage_alone(template: dict[str, Any]) -> None:
    table = template["Resources"]["VectorTable"]["Properties"]

    # On demand (no provisioned capacity on the table or its index), no stream, no point-in-
    # time recovery or contributor insights (each bills by the hour or the GB on its own)
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert "ProvisionedThroughput" not in table
    assert all("ProvisionedThroughput" not in index for index in table["GlobalSecondaryIndexes"])
    for extra in (
        "StreamSpecification",
        "PointInTimeRecoverySpecification",
        "ContributorInsightsSpecification",
        "KinesisStreamSpecification",
    ):
        assert extra not in table, extra
    assert template["Resources"]["VectorTable"]["DeletionPolicy"] == "Delete"


def test_the_vector_index_is_partitioned_by_scope_with_the_embedders_dimensions(
    template: dict[str, Any],
) -> None:
    from memkit.vectors.dynamodb import INLINE_ATTRIBUTES, PROJECTED, SCOPE, VECTOR

    parameters = _parameters(template, VectorStore="dynamodb", EmbeddingProvider="cohere")
    table = _evaluate(template, template["Resources"]["VectorTable"]["Properties"], parameters)
    [index] = table["VectorIndexes"]
    schema = {e["AttributeName"]: e["SearchSchemaElementType"] for e in index["SearchSchema"]}
    defined = {d["AttributeName"]: d["AttributeType"] for d in table["AttributeDefinitions"]}

    # The adapter's attributes are the template's: HASH scope, the equality filters inline
    # (each declared, as DynamoDB requires), the projected fields; 1,024 for Cohere
    assert index["VectorAttribute"] == {"AttributeName": VECTOR}
    assert schema == {SCOPE: "HASH", **dict.fromkeys(INLINE_ATTRIBUTES, "INLINE_FILTER")}
    assert all(name in defined for name in schema)
    assert index["Projection"]["NonKeyAttributes"] == list(PROJECTED)
    assert index["Dimensions"] == 1024
    assert index["DistanceFunction"] == "COSINE"


def test_a_dynamodb_store_is_reached_through_the_table_and_searchvectors_alone(
    template: dict[str, Any],
) -> None:
    parameters = _parameters(template, VectorStore="dynamodb")
    environment = _evaluate(
        template, template["Globals"]["Function"]["Environment"]["Variables"], parameters
    )

    for function in VECTOR_FUNCTIONS:
        statements = _statements(template, function, parameters)
        [access] = _granting(statements, "dynamodb:SearchVectors")
        assert access["Resource"] == [
            {"Fn::GetAtt": ["VectorTable", "Arn"]},
            {"Fn::Sub": "${VectorTable.Arn}/index/*"},
        ]
        assert _granting(statements, "aoss:APIAccessAll") == []
        assert _granting(statements, "es:ESHttpPost") == []
    assert environment["MEMKIT_VECTOR_TABLE"] == {"Ref": "VectorTable"}
    assert "MEMKIT_OPENSEARCH_ENDPOINT" not in environment
    assert "MEMKIT_OPENSEARCH_FLAVOUR" not in environment
    assert _refusals(template, parameters) == []
