"""A table of ids that are awkward in a URL: those the id rule takes (memkit.ids), each of
which must be addressable by its percent-encoded path, and those it refuses, with the start of
the reason the API gives."""

from __future__ import annotations

TAKEN = [
    'a"b',
    "a#b",
    "a\\b",
    "a`b",
    "€ £ © — … → ✓ 😀",
    "tea☕",
    " spaced out ",
    "a+b;c&d=e",
    "caf\u00e9",  # NFC
    "cafe\u0301",  # NFD: the same word, another id
    "\ufb01le",  # a ligature NFKC would change
    "ada@example.com",
    "...",
    ".hidden",
    "<>[]{}|^'!*()~:@,$",
    "😀" * 256,
]
REFUSED = {
    "a/b": "must not contain '/'",
    "/": "must not contain '/'",
    "a?b": "must not contain '?'",
    "100%": "must not contain '%'",
    "a%2Fb": "must not contain '%'",
    ".": "must not be '.'",
    "..": "must not be '..'",
    "a\nb": "must not contain a control character",
    "a\x00": "must not contain a control character",
    "a\x7f": "must not contain a control character",
}
