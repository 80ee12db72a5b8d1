"""A local embedder that needs no network and no torch: a Model2Vec static model.

The model (models/minilm-m2v-256, distilled from all-MiniLM-L6-v2; its README has the
provenance) is a WordPiece vocabulary (tokenized by memkit.embeddings.wordpiece) and a table
of one 256-dimension vector per token. A text's vector is the mean of its tokens' rows,
L2-normalised; unknown tokens are left out, and a text with no known token gets the zero
vector. This is what model2vec's StaticModel.encode computes. Loaded on first use (what that
takes: docs/long-term-memory.md, "Embeddings"), never at import.
"""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memkit.embeddings.protocol import Purpose
from memkit.embeddings.wordpiece import WordPiece

if TYPE_CHECKING:
    import numpy as np

MODEL_DIR = Path(__file__).parent / "models" / "minilm-m2v-256"
MODEL_ID = "local/minilm-m2v-256"
DIMENSIONS = 256
# The model's max_length: tokens past this do not count (as in model2vec).
MAX_TOKENS = 512
_DTYPES = {"F16": "<f2", "F32": "<f4"}


def read_safetensors(path: Path, name: str) -> np.ndarray:
    """One tensor of a .safetensors file: an 8-byte header length, a JSON header naming each
    tensor's dtype, shape and byte range, then the raw little-endian data."""
    import numpy as np

    with path.open("rb") as handle:
        (header_length,) = struct.unpack("<Q", handle.read(8))
        header: dict[str, Any] = json.loads(handle.read(header_length))
        entry = header[name]
        start, end = entry["data_offsets"]
        handle.seek(8 + header_length + start)
        raw = handle.read(end - start)
    array = np.frombuffer(raw, dtype=np.dtype(_DTYPES[entry["dtype"]]))
    return array.reshape(entry["shape"])


@dataclass(frozen=True)
class _Loaded:
    tokenizer: WordPiece
    table: np.ndarray  # float32 [vocabulary, dimensions]


class LocalEmbedder:
    """The shipped static model, thread-safe, loaded once per process on first use."""

    def __init__(self, model_dir: Path = MODEL_DIR) -> None:
        self._model_dir = model_dir
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def _load(self) -> _Loaded:
        with self._lock:
            if self._loaded is None:
                import numpy as np

                tokenizer = WordPiece.from_file(self._model_dir / "tokenizer.json")
                table = read_safetensors(self._model_dir / "model.safetensors", "embeddings")
                self._loaded = _Loaded(tokenizer, np.asarray(table, dtype=np.float32))
            return self._loaded

    def embed(self, texts: Sequence[str], purpose: Purpose = "document") -> list[list[float]]:
        """Unit vectors for `texts`, the same for either purpose (a search embeds what
        memkit.vectors.conversation.meaning_of keeps of its text, for every embedder)."""
        del purpose
        return [row.tolist() for row in self.embed_array(texts)]

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors as one float32 array [len(texts), 256], for the local index."""
        import numpy as np

        model = self._load()
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        unknown = model.tokenizer.unknown_id
        for row, text in enumerate(texts):
            ids = [i for i in model.tokenizer.encode(text, MAX_TOKENS) if i != unknown]
            if ids:
                vectors[row] = model.table[ids].mean(axis=0)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        return vectors
