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
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a family emoji: joined by U+200D (Cf)
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian, with a non-joiner (Cf)
    "no\u00a0break",  # a no-break space (Zs): a space like any other
    "\u3000wide",  # an ideographic space (Zs)
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
    # C1 controls and the separators that end a line (Unicode's Cc, Zl, Zp)
    "a\x80b": "must not contain a control character",
    "next\u0085line": "must not contain a control character",  # NEL
    "a\x9f": "must not contain a control character",
    "line\u2028separator": "must not contain a control character",
    "paragraph\u2029separator": "must not contain a control character",
}
