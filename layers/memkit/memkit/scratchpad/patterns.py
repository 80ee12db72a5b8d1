"""Schema patterns evaluated in time linear in the text (RE2), never by a backtracking engine.

JSON Schema's patterns are ECMA-262 regular expressions. Python's `re` backtracks, so a pattern
such as `^(a|a)*$` takes exponential time on a short string that does not match. RE2 never
backtracks; it refuses the syntax it cannot run in linear time (lookaround, backreferences),
and memkit refuses a schema holding such a pattern when it is stored. ECMA's `\\uXXXX` (a
surrogate pair too) and `\\u{X...}` are read as RE2's `\\x{...}`; the rest is RE2's syntax
(docs/scratchpad.md lists where it differs from ECMA-262).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from re2 import _Regexp

# Per compiled pattern (program and DFA cache): RE2's default is 8 MiB, and up to 128 are cached.
MAX_MEMORY = 1 << 20
LINEAR_TIME = "memkit evaluates patterns in linear time (RE2 syntax)"
# The part of RE2's error (after "kind: ") that starts with one of these -> what is not supported.
# RE2 versions word the kind differently (a lookbehind is an "invalid named capture group" or
# an "invalid perl operator"), but name the fragment the same way.
_UNSUPPORTED = {
    "(?=": "lookahead (?=...)",
    "(?!": "negative lookahead (?!...)",
    "(?<=": "lookbehind (?<=...)",
    "(?<!": "negative lookbehind (?<!...)",
    "(?>": "atomic groups (?>...)",
    "\\k": "backreferences (\\k<name>)",
}
_BACKREFERENCE = re.compile(r"\\[1-9]")
# ECMA-262's \uXXXX escapes (a UTF-16 surrogate pair first) and \u{X...}; any other escaped
# character is matched too, so that `\\u0041` (an escaped backslash, then "u0041") stays as it is.
_HEX = "[0-9A-Fa-f]"
_ECMA_ESCAPE = re.compile(
    rf"\\u([Dd][89ABab]{_HEX}{{2}})\\u([Dd][C-Fc-f]{_HEX}{{2}})"
    rf"|\\u({_HEX}{{4}})|\\u\{{({_HEX}+)\}}|\\.",
    re.DOTALL,
)


class UnsupportedPattern(ValueError):
    """A pattern memkit cannot evaluate in linear time; the message says why."""


def _code_point(escape: re.Match[str]) -> str:
    high, low, unit, braced = escape.groups()
    if high:
        point = 0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00)
        return f"\\x{{{point:X}}}"
    if unit or braced:
        return f"\\x{{{unit or braced}}}"
    return escape[0]


def re2_syntax(pattern: str) -> str:
    """The pattern with ECMA-262's Unicode escapes written as RE2's."""
    return _ECMA_ESCAPE.sub(_code_point, pattern)


def _reason(message: str) -> str:
    fragment = message.partition(": ")[2]
    for start, what in _UNSUPPORTED.items():
        if fragment.startswith(start):
            return f"not supported: {what}; {LINEAR_TIME}"
    if _BACKREFERENCE.match(fragment):
        return f"not supported: backreferences (\\1...\\9); {LINEAR_TIME}"
    return f"not a valid pattern: {message}; {LINEAR_TIME}"


@lru_cache(maxsize=128)
def compiled(pattern: str) -> _Regexp:
    """The pattern compiled by RE2; UnsupportedPattern when RE2 cannot evaluate it."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print the pattern to stderr (the function's log)
    options.never_capture = True  # only whether it matches counts: no groups to track
    options.max_mem = MAX_MEMORY
    try:
        return re2.compile(re2_syntax(pattern), options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else b""
        text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        raise UnsupportedPattern(_reason(text)) from None
    except UnicodeEncodeError:
        raise UnsupportedPattern(f"not a valid pattern: not UTF-8; {LINEAR_TIME}") from None


def problem(pattern: str) -> str | None:
    """Why memkit cannot evaluate `pattern`, or None when it can."""
    try:
        compiled(pattern)
    except UnsupportedPattern as exc:
        return str(exc)
    return None


def search(pattern: str, text: str) -> bool:
    """True when `pattern` matches somewhere in `text`, as JSON Schema's `pattern` asks."""
    return compiled(pattern).search(text.encode("utf-8", "surrogatepass")) is not None
