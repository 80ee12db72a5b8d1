"""docs/openapi.json is the document the code serves (API.md: it must match the code)."""

from __future__ import annotations

import json
from pathlib import Path

from memkit.api.app import app, openapi_json

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_the_published_openapi_document_matches_the_code() -> None:
    published = json.loads(DOC.read_text(encoding="utf-8"))

    served = json.loads(openapi_json(app))

    assert published == served, "docs/openapi.json is stale: run `make docs`"
