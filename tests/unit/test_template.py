"""template.yaml against the code: every route wired, every handler present, the table right."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from memkit.local.template import load_template

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
    return {
        (event["Properties"]["Method"].upper(), event["Properties"]["Path"])
        for properties in _functions(template).values()
        for event in properties.get("Events", {}).values()
        if event["Type"] == "HttpApi"
    }


def test_every_route_of_the_app_is_wired_through_the_template(template: dict[str, Any]) -> None:
    from memkit.api.app import app

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
            for statement in policy.get("Statement", []):
                actions = statement["Action"]
                assert all("*" not in action for action in actions), f"{name}: wildcard action"
                assert statement["Resource"] != "*", f"{name}: wildcard resource"


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
