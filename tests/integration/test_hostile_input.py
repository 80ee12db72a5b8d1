"""Requests a client can send that once reached a 500: each gets a clear 4xx, nothing written.

Found by running schemathesis and hand-made probes against the local stack.
"""

from __future__ import annotations

import base64
import json

import pytest

from memkit.handlers.api import make_lambda_handler
from memkit.handlers.wiring import api_services
from tests.conftest import LambdaContextStub
from tests.events import http_event
from tests.integration.conftest import Call

pytestmark = pytest.mark.integration
PAD = "/v1/working-memory/s1/scratchpad"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def assert_refused(response, status: int, field: str) -> None:  # type: ignore[no-untyped-def]
    assert response.status == status
    assert set(response.body) == {"detail", "code", "errors"}
    assert response.body["errors"][0]["field"] == field


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/xml", "multipart/form-data", ""]
)
def test_a_body_that_is_not_json_by_media_type_is_415(api: Call, content_type: str) -> None:
    response = api("PUT", PAD, raw_body='{"content": "x"}', headers={"content-type": content_type})

    assert_refused(response, 415, "content-type")
    assert api("GET", PAD).body["version"] == 0


def test_json_media_types_with_parameters_are_accepted(api: Call) -> None:
    response = api(
        "PUT",
        PAD,
        raw_body='{"content": "x"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )

    assert response.status == 200


def test_a_body_that_is_not_utf8_is_400(dynamodb_table: str) -> None:
    from memkit.config import ApiSettings
    from memkit.store.dynamodb import DynamoStore

    settings = ApiSettings(table_name=dynamodb_table)
    handler = make_lambda_handler(lambda: api_services(DynamoStore(settings), settings))
    event = http_event("PUT", PAD)
    event["body"] = base64.b64encode(b'{"content": "caf\xe9"}').decode()
    event["isBase64Encoded"] = True

    result = handler(event, LambdaContextStub())

    assert result["statusCode"] == 400
    assert json.loads(result["body"])["errors"][0]["reason"] == "not UTF-8 text"


@pytest.mark.parametrize("depth", [65, 300, 5000])
def test_bodies_nested_past_64_levels_are_400_and_nothing_is_stored(api: Call, depth: int) -> None:
    response = api("PUT", PAD, raw_body='{"content": {"a": ' + nested(depth) + "}}")

    assert_refused(response, 400, "body")
    assert "nested deeper than 64" in response.body["detail"]
    assert api("GET", PAD).status == 200


def test_content_nested_within_the_limit_is_stored_and_reads_back(api: Call) -> None:
    api("PUT", "/v1/profiles/j", body={"format": "json", "max_tokens": 64000})
    deep: dict = {}
    node = deep
    for _ in range(60):
        node["a"] = {}
        node = node["a"]

    written = api("PUT", PAD, query={"profile": "j"}, body={"content": deep})

    assert written.status == 200
    assert api("GET", PAD).body["content"] == deep


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"content": {"x": ' + "9" * 5000 + "}}", "Exceeds the limit"),
        ('{"content": {"x": 1e309}}', "numbers must be finite"),
        ('{"content": {"x": NaN}}', "NaN is not JSON"),
        ('{"content": "\\ud800"}', "lone surrogate"),
        ('{"content": {"\\udfff": 1}}', "lone surrogate"),
    ],
)
def test_numbers_and_strings_json_cannot_carry_faithfully_are_400(
    api: Call, raw: str, reason: str
) -> None:
    response = api("PUT", PAD, raw_body=raw)

    assert_refused(response, 400, "body")
    assert reason in response.body["errors"][0]["reason"]


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ({"$ref": "https://example.com/schema.json"}, "schema.$ref"),
        ({"properties": {"a": {"$dynamicRef": "http://[::1"}}}, "schema.properties.a.$dynamicRef"),
        ({"allOf": [{}], "properties": {"a": {"$ref": "#/allOf/x"}}}, "schema.properties.a.$ref"),
        (
            {"default": {"type": 5}, "properties": {"a": {"$ref": "#/default"}}},
            "schema.properties.a.$ref",
        ),
        ({"$schema": "http://[::1"}, "schema.$schema"),
        (
            {"properties": {"a": {"$schema": "http://json-schema.org/draft-07/schema#"}}},
            "schema.properties.a.$schema",
        ),
        ({"properties": {"a": {"$id": "http://[::1"}}}, "schema.properties.a.$id"),
        ({"properties": {"a": {"$ref": "#/$defs/nope"}}}, "schema.properties.a.$ref"),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}, None),
        ({"properties": {"a": {"pattern": "^(?=a)"}}}, "schema.properties.a.pattern"),
        ({"patternProperties": {"(a)\\1": {}}}, "schema.patternProperties"),
        ({"propertyNames": {"pattern": "(?<!a)b"}}, "schema.propertyNames.pattern"),
        (
            {"patternProperties": {"^x-": {}}, "unevaluatedProperties": False},
            "schema.unevaluatedProperties",
        ),
    ],
)
def test_schemas_that_cannot_be_evaluated_safely_are_refused(
    api: Call, schema: dict, field: str | None
) -> None:
    response = api("PUT", "/v1/profiles/unsafe", body={"schema": schema})

    assert response.status == 422
    fields = [e["field"] for e in response.body["errors"]]
    assert field in fields if field else all(f.startswith("schema.") for f in fields)
    assert api("GET", "/v1/profiles/unsafe").status == 404


def test_a_pattern_needing_backtracking_is_422_with_the_field_and_reason(api: Call) -> None:
    # Given a profile stored with a pattern memkit evaluates
    good = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}
    assert api("PUT", "/v1/profiles/codes", body={"schema": good}).status == 200

    # When it is replaced by one whose pattern has a lookbehind
    bad = {"type": "object", "properties": {"code": {"type": "string", "pattern": "(?<!x)y"}}}
    response = api("PUT", "/v1/profiles/codes", body={"schema": bad})

    # Then the answer names the field and the reason, and the stored profile is unchanged
    assert response.status == 422
    assert response.body["errors"] == [
        {
            "field": "schema.properties.code.pattern",
            "reason": "not supported: negative lookbehind (?<!...); "
            "memkit evaluates patterns in linear time (RE2 syntax)",
        }
    ]
    assert api("GET", "/v1/profiles/codes").body["schema"] == good


@pytest.mark.parametrize("pattern", ["^(a+)+$", "^((a+))+$", "^(a|a)*$"])
def test_patterns_that_backtrack_in_python_are_evaluated_in_linear_time(
    api: Call, pattern: str
) -> None:
    # Given a profile whose pattern takes Python's engine exponential time (26 characters took
    # seconds; 40 would take hours): RE2 runs it in linear time, so it is accepted
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
    assert api("PUT", "/v1/profiles/nested", body={"schema": schema}).status == 200
    pad = {"query": {"profile": "nested"}}

    # When a value it cannot match is written, and then one it matches
    refused = api("PUT", PAD, body={"content": {"x": "a" * 40 + "!"}}, **pad)
    accepted = api("PUT", PAD, body={"content": {"x": "a" * 40}}, **pad)

    # Then the first is a 422 naming the field, and nothing was written; the second is stored
    assert_refused(refused, 422, "content.x")
    assert accepted.status == 200
    assert accepted.body["version"] == 1
    assert api("GET", PAD).body["content"] == {"x": "a" * 40}


def test_recursive_schemas_that_consume_the_instance_are_accepted(api: Call) -> None:
    linked = {
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
        "type": "object",
        "properties": {"head": {"$ref": "#/$defs/node"}},
    }
    api("PUT", "/v1/profiles/list", body={"schema": linked})

    response = api(
        "PUT", PAD, query={"profile": "list"}, body={"content": {"head": {"next": {"next": {}}}}}
    )

    assert response.status == 200


def _fan_out(levels: int, last: dict | None = None) -> dict:
    """Definitions each applying the next one twice (allOf), `levels` deep, used by x; the
    last one is `last`, else an object."""
    defs: dict = {
        f"d{n}": {"allOf": [{"$ref": f"#/$defs/d{n + 1}"}, {"$ref": f"#/$defs/d{n + 1}"}]}
        for n in range(levels)
    }
    defs[f"d{levels}"] = last if last is not None else {"type": "object"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


@pytest.mark.parametrize("last", [None, {"$ref": "#"}], ids=["object", "back-to-the-top"])
def test_a_schema_whose_refs_fan_out_is_422_naming_the_ref_and_nothing_is_stored(
    api: Call, last: dict | None
) -> None:
    # Given a schema of 31 small definitions that is 2**30 copies of the last one once its
    # $refs are followed (checking even {"x": {}} against it would take years), the last
    # one an object or a $ref back to the top
    schema = _fan_out(30, last)

    # When it is saved as a profile
    response = api("PUT", "/v1/profiles/fan", body={"schema": schema})

    # Then it is refused at the $ref that uses the definitions, with the reason
    assert_refused(response, 422, "schema.properties.x.$ref")
    reason = response.body["errors"][0]["reason"]
    assert reason.startswith("expands to more than 10000 JSON values")
    assert api("GET", "/v1/profiles/fan").status == 404


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        # its $refs' expansion (14 levels: 16,384 copies of the last definition)
        (_fan_out(14), "schema.properties.x.$ref"),
        # a $dynamicRef jsonschema cannot even parse
        (
            {"type": "object", "properties": {"x": {"$dynamicRef": "http://[::1"}}},
            "schema.properties.x.$dynamicRef",
        ),
        # a $ref to an object under `default` that is not a schema
        (
            {"type": "object", "default": {"type": 5}, "properties": {"x": {"$ref": "#/default"}}},
            "schema.properties.x.$ref",
        ),
    ],
)
def test_a_profile_stored_before_a_check_refuses_content_without_evaluating_it(
    api: Call, dynamodb_table: str, schema: dict, field: str
) -> None:
    from memkit.config import ApiSettings
    from memkit.models.domain import ProfileSpec
    from memkit.store.dynamodb import DynamoStore

    # Given a scratchpad with content, whose profile is then written straight to the table
    # with a schema refused since
    assert api("PUT", "/v1/profiles/old", body={"format": "json"}).status == 200
    assert api("PUT", PAD, query={"profile": "old"}, body={"content": {"x": {}}}).status == 200
    store = DynamoStore(ApiSettings(table_name=dynamodb_table, region="us-east-1"))
    store.profiles.put_profile(
        "default", "default", "old", ProfileSpec.model_validate({"schema": schema}), None
    )

    # When content is written with it, and the scratchpad read
    written = api("PUT", PAD, body={"content": {"x": {"y": 1}}})
    read = api("GET", PAD)

    # Then the write is a 422 naming the field and nothing is written; the read answers,
    # listing the same field in its problems
    assert_refused(written, 422, field)
    assert (read.status, read.body["version"], read.body["content"]) == (200, 1, {"x": {}})
    assert [p["field"] for p in read.body["problems"]] == [field]


def test_objects_shaped_like_references_in_values_are_stored_and_checked(api: Call) -> None:
    # Given a schema whose default holds an object shaped like a reference jsonschema could
    # not parse: a value, not a reference
    schema = {"type": "object", "default": {"$dynamicRef": "http://[::1"}}

    # When it is stored, and content written and read with it
    stored = api("PUT", "/v1/profiles/odd", body={"schema": schema})
    written = api("PUT", PAD, query={"profile": "odd"}, body={"content": {"a": 1}})
    read = api("GET", PAD)

    # Then each answers
    assert (stored.status, written.status, read.status) == (200, 200, 200)
    assert (read.body["content"], read.body["problems"]) == ({"a": 1}, [])


def test_schemas_that_share_definitions_check_content_through_their_refs(api: Call) -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    schema = {
        "$defs": {"address": address},
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/address"},
            "past": {"type": "array", "items": {"$ref": "#/$defs/address"}},
        },
    }
    assert api("PUT", "/v1/profiles/addr", body={"schema": schema}).status == 200
    pad = {"query": {"profile": "addr"}}

    good = api("PUT", PAD, body={"content": {"home": {"city": "Oslo"}}}, **pad)
    bad = api("PUT", PAD, body={"content": {"past": [{"city": "Rome"}, {}]}}, **pad)

    assert good.status == 200
    assert_refused(bad, 422, "content.past.1.city")


def test_ids_in_the_body_follow_the_same_rules_as_in_the_query(api: Call) -> None:
    response = api("PUT", PAD, body={"content": "x", "namespace": "a\u0000b"})

    assert_refused(response, 422, "namespace")


@pytest.mark.parametrize(
    ("field", "value"), [("max_tokens", True), ("max_tokens", "4000"), ("read_only", "yes")]
)
def test_profile_numbers_and_flags_are_not_coerced(api: Call, field: str, value: object) -> None:
    response = api("PUT", "/v1/profiles/p", body={field: value})

    assert_refused(response, 422, field)


def test_the_openapi_document_describes_errors_with_the_error_body(api: Call) -> None:
    document = api("GET", "/v1/openapi.json").body

    responses = document["paths"]["/v1/working-memory/{session_id}/scratchpad"]["patch"][
        "responses"
    ]

    for status in ("403", "409", "413", "415", "422"):
        schema = responses[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}
    # A 400 may also be API Gateway's own, for a path it cannot decode (docs/api.md#ids).
    either = responses["400"]["content"]["application/json"]["schema"]["anyOf"]
    assert either == [
        {"$ref": "#/components/schemas/ErrorBody"},
        {"$ref": "#/components/schemas/GatewayAnswer"},
    ]


# -- schema bombs: checks whose work grows faster than what was sent -------------------------


def test_a_profile_with_an_all_of_of_5000_subschemas_is_422_and_nothing_is_stored(
    api: Call,
) -> None:
    schema = {"type": "object", "allOf": [{"type": "object"} for _ in range(5_000)]}

    response = api("PUT", "/v1/profiles/wide", body={"schema": schema})

    assert_refused(response, 422, "schema.allOf")
    assert "lists 5000 subschemas" in response.body["errors"][0]["reason"]
    assert api("GET", "/v1/profiles/wide").status == 404


def test_a_profile_of_more_than_10000_schema_values_is_422(api: Call) -> None:
    properties = {f"p{n}": {"type": "string"} for n in range(6_000)}

    response = api("PUT", "/v1/profiles/big", body={"schema": {"properties": properties}})

    assert_refused(response, 422, "schema")
    assert response.body["errors"][0]["reason"].startswith("holds more than 10000 JSON values")


def test_5000_objects_under_unique_items_are_checked_on_write_and_on_every_read(
    api: Call,
) -> None:
    # Given a profile whose array must hold unique objects (12.5 million pairs to compare)
    schema = {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}
    assert api("PUT", "/v1/profiles/u", body={"schema": schema, "max_tokens": 64_000}).status == 200
    items = [{"n": n} for n in range(5_000)]

    # When 5,000 distinct objects are written, then one repeating an earlier one as 7.0
    written = api("PUT", PAD, query={"profile": "u"}, body={"content": {"a": items}})
    repeated = api("PATCH", PAD, body={"content": {"a": [{"n": 7.0}]}})

    # Then the first is stored, the repeat refused naming the field, and reads show no problem
    assert written.status == 200
    assert_refused(repeated, 422, "content.a")
    read = api("GET", PAD)
    assert (read.body["version"], read.body.get("problems", [])) == (1, [])
    assert api("GET", "/v1/working-memory/s1").status == 200


def test_an_enum_of_3000_objects_checks_content_of_3000_items(api: Call) -> None:
    enum = [{"id": n} for n in range(3_000)]
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"enum": enum}}}}
    assert api("PUT", "/v1/profiles/e", body={"schema": schema, "max_tokens": 64_000}).status == 200
    content = {"a": [{"id": n} for n in range(3_000)]}

    assert api("PUT", PAD, query={"profile": "e"}, body={"content": content}).status == 200
    content["a"][5] = {"id": -1}
    refused = api("PUT", PAD, body={"content": content})
    assert_refused(refused, 422, "content.a.5")
    assert refused.body["errors"][0]["reason"] == "{'id': -1} is not one of the 3000 values of enum"
