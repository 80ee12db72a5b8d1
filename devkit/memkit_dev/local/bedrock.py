"""A Bedrock runtime on loopback for the local stack's Bedrock embedders: InvokeModel of Titan
Text Embeddings V2 and Cohere Embed v3 with their request checks and response shapes, so the
production embedders (memkit.embeddings.bedrock), botocore and its endpoint handling run end
to end with no AWS account (`LocalStackConfig.embedder`, and what bench.cost meters).

The vectors carry the local embedder's meaning (memkit.embeddings.local), so a search finds
what it would find there: its 256-dimension vector times a fixed random projection to the
size asked (nearby texts stay nearby), normalised, rounded to float32 and written in
float32's shortest decimal form, as Bedrock writes them, so a vector stored from here takes
the room a real one takes. Cohere embeds a query as it embeds a document (the local model
has one space).

What is checked, as Bedrock checks it: the model id (POST /model/{modelId}/invoke, Titan V2
or Cohere English/Multilingual v3), a JSON body with only the model's keys, Titan's
`inputText` (1 to 50,000 characters) and `dimensions` (256, 512, 1024), Cohere's `texts`
(1 to 96, each at most 2,048 characters unless `truncate` allows more) and `input_type`.
Anything else is a 400 ValidationException in Bedrock's error shape. `calls` records every
call answered (the model, how many texts) and `texts` every text embedded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import numpy as np
from werkzeug.wrappers import Request, Response

from memkit.embeddings.local import DIMENSIONS as LOCAL_DIMENSIONS
from memkit.embeddings.local import LocalEmbedder
from memkit.tokens import estimate_tokens
from memkit_dev.local.loopback import LoopbackServer

TITAN_MODELS = frozenset({"amazon.titan-embed-text-v2:0"})
COHERE_MODELS = frozenset({"cohere.embed-english-v3", "cohere.embed-multilingual-v3"})
TITAN_KEYS = frozenset({"inputText", "dimensions", "normalize", "embeddingTypes"})
TITAN_DIMENSIONS = (256, 512, 1024)
TITAN_MAX_CHARS = 50_000
COHERE_KEYS = frozenset({"texts", "input_type", "truncate", "embedding_types"})
COHERE_DIMENSIONS = 1024
COHERE_MAX_TEXTS = 96
COHERE_MAX_CHARS = 2_048
COHERE_INPUT_TYPES = frozenset({"search_document", "search_query", "classification", "clustering"})
COHERE_TRUNCATE = frozenset({"NONE", "START", "END"})
# The projection's seed: the same text gets the same vector in every run.
PROJECTION_SEED = 20_260_805


class _Invalid(Exception):
    """A request Bedrock refuses: 400 ValidationException with this message."""


def _float32_list(vector: np.ndarray) -> str:
    """`vector` as a JSON array of float32 values, each in its shortest round-trip form."""
    values = vector.astype(np.float32)
    return (
        "[" + ",".join(np.format_float_positional(x, unique=True, trim="0") for x in values) + "]"
    )


class LoopbackBedrock(LoopbackServer):
    """Bedrock's InvokeModel for the embedding models memkit uses, on 127.0.0.1 (port 0: any
    free port), in a thread of this process; thread-safe."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._embedder = LocalEmbedder()
        self._projections: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self.calls: list[tuple[str, int]] = []
        self.texts: list[str] = []
        super().__init__("loopback-bedrock", host, port)

    # --- the vectors ----------------------------------------------------------------------

    def _projection(self, dimensions: int) -> np.ndarray:
        with self._lock:
            if dimensions not in self._projections:
                rng = np.random.default_rng(PROJECTION_SEED + dimensions)
                matrix = rng.standard_normal((LOCAL_DIMENSIONS, dimensions))
                self._projections[dimensions] = matrix.astype(np.float32)
            return self._projections[dimensions]

    def vectors(self, texts: list[str], dimensions: int) -> np.ndarray:
        """The unit vectors this server answers for `texts` at `dimensions`."""
        projected: np.ndarray = self._embedder.embed_array(texts) @ self._projection(dimensions)
        norms = np.linalg.norm(projected, axis=1, keepdims=True)
        np.divide(projected, norms, out=projected, where=norms > 0)
        return projected

    # --- WSGI -----------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        try:
            response = self._route(request)
        except _Invalid as problem:
            response = Response(
                json.dumps({"message": str(problem)}),
                status=400,
                mimetype="application/json",
                headers={"x-amzn-ErrorType": "ValidationException"},
            )
        return response(environ, start_response)

    def _route(self, request: Request) -> Response:
        segments = request.path.strip("/").split("/")
        if request.method != "POST" or len(segments) != 3 or segments[::2] != ["model", "invoke"]:
            raise _Invalid(f"no operation at {request.method} {request.path}")
        model = unquote(segments[1])
        try:
            body = json.loads(request.get_data(cache=False))
        except ValueError as exc:
            raise _Invalid("Malformed input request: the body is not JSON") from exc
        if not isinstance(body, dict):
            raise _Invalid("Malformed input request: expected type: JSONObject")
        if model in TITAN_MODELS:
            payload = self._titan(body)
        elif model in COHERE_MODELS:
            payload = self._cohere(body)
        else:
            raise _Invalid("The provided model identifier is invalid.")
        return Response(payload, status=200, mimetype="application/json")

    def _titan(self, body: dict[str, Any]) -> str:
        _only(body, TITAN_KEYS)
        text = body.get("inputText")
        if not isinstance(text, str) or not 1 <= len(text) <= TITAN_MAX_CHARS:
            raise _Invalid(
                f"Malformed input request: #/inputText: expected a string of 1 to "
                f"{TITAN_MAX_CHARS} characters"
            )
        dimensions = body.get("dimensions", 1024)
        if dimensions not in TITAN_DIMENSIONS:
            raise _Invalid(f"Malformed input request: #/dimensions: {dimensions} is not allowed")
        types = body.get("embeddingTypes", ["float"])
        if not isinstance(types, list) or not set(types) <= {"float", "binary"}:
            raise _Invalid("Malformed input request: #/embeddingTypes: expected float or binary")
        vector = _float32_list(self.vectors([text], dimensions)[0])
        with self._lock:
            self.calls.append(("titan", 1))
            self.texts.append(text)
        by_type = f', "embeddingsByType": {{"float": {vector}}}' if "embeddingTypes" in body else ""
        tokens = estimate_tokens(text)
        return f'{{"embedding": {vector}{by_type}, "inputTextTokenCount": {tokens}}}'

    def _cohere(self, body: dict[str, Any]) -> str:
        _only(body, COHERE_KEYS)
        texts = body.get("texts")
        if (
            not isinstance(texts, list)
            or not 1 <= len(texts) <= COHERE_MAX_TEXTS
            or not all(isinstance(text, str) for text in texts)
        ):
            raise _Invalid(
                f"Malformed input request: #/texts: expected 1 to {COHERE_MAX_TEXTS} strings"
            )
        if body.get("input_type") not in COHERE_INPUT_TYPES:
            raise _Invalid("Malformed input request: #/input_type: not a valid enum value")
        truncate = body.get("truncate", "NONE")
        if truncate not in COHERE_TRUNCATE:
            raise _Invalid("Malformed input request: #/truncate: not a valid enum value")
        if truncate == "NONE" and any(len(text) > COHERE_MAX_CHARS for text in texts):
            raise _Invalid(
                f"Malformed input request: #/texts: a text is longer than {COHERE_MAX_CHARS} "
                "characters"
            )
        types = body.get("embedding_types")
        if types is not None and (not isinstance(types, list) or "float" not in types):
            raise _Invalid("Malformed input request: #/embedding_types: this server gives float")
        rows = ",".join(_float32_list(row) for row in self.vectors(texts, COHERE_DIMENSIONS))
        with self._lock:
            self.calls.append(("cohere", len(texts)))
            self.texts.extend(texts)
        echoed = json.dumps(texts)
        if types is None:  # the v3 default: a plain list, response_type embeddings_floats
            embeddings, kind = f"[{rows}]", "embeddings_floats"
        else:
            embeddings, kind = f'{{"float": [{rows}]}}', "embeddings_by_type"
        return (
            f'{{"id": "loopback", "texts": {echoed}, "embeddings": {embeddings}, '
            f'"response_type": "{kind}"}}'
        )


def _only(body: dict[str, Any], allowed: frozenset[str]) -> None:
    for key in body:
        if key not in allowed:
            raise _Invalid(
                f"Malformed input request: #: extraneous key [{key}] is not permitted, "
                "please reformat your input and try again."
            )
