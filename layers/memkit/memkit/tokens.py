"""Token counting for budgets (`max_tokens`), with no network and no model files.

An estimate, not a tokenizer: each run of letters/digits costs one token per started
4 characters (BPE vocabularies average about 4 characters a token on English), and each
punctuation mark or symbol costs one, as BPE tokenizers mostly split them off. Counting
punctuation separately makes JSON and code count high rather than low, the safe side for a
budget. A real tokenizer can replace `estimate_tokens` behind the same name.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PIECES = re.compile(r"[^\W_]+|[^\w\s]|_", re.UNICODE)


def estimate_tokens(text: str) -> int:
    """Estimated number of tokens in `text` (0 for the empty string)."""
    total = 0
    for match in _PIECES.finditer(text):
        piece = match.group()
        total += (len(piece) + 3) // 4 if piece[0].isalnum() else 1
    return total


def content_tokens(content: Any) -> int:
    """Tokens of scratchpad content: text as is, JSON objects in their compact form."""
    if content is None:
        return 0
    if isinstance(content, str):
        return estimate_tokens(content)
    return estimate_tokens(json.dumps(content, separators=(",", ":"), ensure_ascii=False))
