"""`.checkov.baseline`, the checkov findings `make scan` accepts: each check id has its reason,
each finding names a resource the template has, and `make test` runs the scan."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memkit_dev.local.template import load_template

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def baseline() -> dict[str, Any]:
    document = json.loads((ROOT / ".checkov.baseline").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def _findings(baseline: dict[str, Any]) -> list[dict[str, Any]]:
    return [finding for entry in baseline["failed_checks"] for finding in entry["findings"]]


def test_every_accepted_check_id_has_its_reason(baseline: dict[str, Any]) -> None:
    accepted = {check for finding in _findings(baseline) for check in finding["check_ids"]}

    assert accepted == set(baseline["reasons"]), "a check id without a reason, or a stale reason"
    for check, reason in baseline["reasons"].items():
        assert len(reason.split()) >= 15, f"{check}: say why it is accepted"


def test_every_accepted_finding_is_a_resource_of_the_template(baseline: dict[str, Any]) -> None:
    resources = load_template(ROOT / "template.yaml")["Resources"]

    for finding in _findings(baseline):
        kind, name = finding["resource"].rsplit(".", 1)
        assert name in resources, f"{name}: no such resource (a stale baseline entry)"
        assert resources[name]["Type"] == kind


def test_make_test_runs_the_scan_offline_against_the_baseline() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    scan = re.search(r"^scan:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)

    assert re.search(r"^test:.*\bscan\b", makefile, re.MULTILINE)
    assert scan is not None
    assert "--skip-download" in scan.group(1)
    assert "--baseline .checkov.baseline" in scan.group(1)
    assert re.search(r'"checkov==\$\(CHECKOV_VERSION\)"', makefile)
