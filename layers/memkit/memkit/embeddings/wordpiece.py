"""BERT's uncased WordPiece tokenizer, from tokenizer.json, in the standard library.

It does what the `tokenizers` library does for this configuration (BertNormalizer with
clean_text, handle_chinese_chars and lowercase, which implies stripping accents;
BertPreTokenizer; WordPiece with "##" continuations and [UNK] for words it cannot spell), so
the Lambda layer needs neither `tokenizers` nor the huggingface_hub tree it brings. A test
checks the ids against `tokenizers` on varied text.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path

_KEEP_CONTROLS = {"\t", "\n", "\r"}
# Distinct characters a table remembers: hundreds in most text, a few thousand in Chinese;
# the bound keeps a text of every code point from growing a warm environment (4 MB at most).
_TABLE_LIMIT = 10_000


class _CharTable(dict[int, str | None]):
    """A `str.translate` table filled in as characters are met: the per-character rules run
    once per distinct character, and the text itself is walked in C (a 350 KB memory took
    a tenth of a second a pass walked in Python)."""

    def __init__(self, rule: Callable[[str], str | None]) -> None:
        super().__init__()
        self._rule = rule

    def __missing__(self, code: int) -> str | None:
        value = self._rule(chr(code))
        if len(self) < _TABLE_LIMIT:
            self[code] = value
        return value


def _is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _cleaned(char: str) -> str | None:
    """BertNormalizer's clean_text and handle_chinese_chars for one character (None: drop)."""
    code = ord(char)
    if code in (0, 0xFFFD):
        return None
    category = unicodedata.category(char)
    if char in _KEEP_CONTROLS or category == "Zs" or char == " ":
        return " "
    if category in ("Cc", "Cf"):
        return None
    if _is_cjk(code):
        return f" {char} "
    return char


def _unmarked(char: str) -> str | None:
    return None if unicodedata.category(char) == "Mn" else char


def _spaced(char: str) -> str:
    return f" {char} " if _is_punctuation(char) else char


_CLEAN = _CharTable(_cleaned)
_STRIP_MARKS = _CharTable(_unmarked)
_SPACE_PUNCTUATION = _CharTable(_spaced)
_WORDS = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """The text normalised (lowercased, accents stripped), as runs of letters and digits:
    the terms keyword search indexes, and what the local embedder reads of a query."""
    return _WORDS.findall(normalize(text))


def normalize(text: str) -> str:
    """BertNormalizer: drop controls, unify whitespace, space out CJK, lowercase, strip
    accents (NFD, then no combining marks)."""
    lowered = text.translate(_CLEAN).lower()
    return unicodedata.normalize("NFD", lowered).translate(_STRIP_MARKS)


def pre_tokenize(text: str) -> list[str]:
    """BertPreTokenizer: split on whitespace, each punctuation mark a word of its own."""
    return text.translate(_SPACE_PUNCTUATION).split()


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
