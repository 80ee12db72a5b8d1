"""BERT's uncased WordPiece tokenizer, from tokenizer.json, in the standard library.

It does what the `tokenizers` library does for this configuration (BertNormalizer with
clean_text, handle_chinese_chars and lowercase, which implies stripping accents;
BertPreTokenizer, both in memkit.text; WordPiece with "##" continuations and [UNK] for words
it cannot spell), so the Lambda layer needs neither `tokenizers` nor the huggingface_hub tree
it brings. A test checks the ids against `tokenizers` on varied text.
"""

from __future__ import annotations

import json
from pathlib import Path

from memkit.text import normalize, pre_tokenize


class WordPiece:
    """Token ids for text, as BERT's uncased tokenizer gives them (no special tokens)."""

    def __init__(self, vocabulary: dict[str, int], unknown: str, prefix: str, max_chars: int):
        self._vocabulary = vocabulary
        self.unknown_id = vocabulary[unknown]
        self._prefix = prefix
        self._max_chars = max_chars

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        model = json.loads(path.read_text(encoding="utf-8"))["model"]
        if model.get("type") != "WordPiece":
            raise ValueError(f"{path} is not a WordPiece tokenizer")
        return cls(
            model["vocab"],
            model["unk_token"],
            model["continuing_subword_prefix"],
            model["max_input_chars_per_word"],
        )

    def _word(self, word: str) -> list[int]:
        if len(word) > self._max_chars:
            return [self.unknown_id]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else self._prefix + word[start:end]
                found = self._vocabulary.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [self.unknown_id]
            ids.append(found)
            start = end
        return ids

    def encode(self, text: str, max_tokens: int | None = None) -> list[int]:
        ids: list[int] = []
        for word in pre_tokenize(normalize(text)):
            ids.extend(self._word(word))
            if max_tokens is not None and len(ids) >= max_tokens:
                return ids[:max_tokens]
        return ids
