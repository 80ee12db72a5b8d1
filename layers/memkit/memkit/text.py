"""Text as BERT's uncased tokenizer reads it, before any vocabulary: normalised and split.

BertNormalizer (clean_text, handle_chinese_chars and lowercase, which implies stripping
accents) and BertPreTokenizer, in the standard library, and `words`: the terms keyword
search indexes and what the local embedder reads of a query. The vocabulary's part (the
WordPiece ids) is memkit.embeddings.wordpiece's.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

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
