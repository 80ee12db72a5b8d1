"""Schema patterns: RE2's time grows with the text, Python's `re` doubles with each character.

Content checked against a profile schema whose pattern nests quantifiers (`^(a+)+$`,
`^((a+))+$`, `^(a|a)*$`), on n a's and a "!" (the worst case: nothing matches). memkit's
check (content_problems, RE2) from 1,000 to 300,000 characters; Python's `re`, which memkit
used before, on 18 to 22 characters only (each one more doubles the time). Last, a pattern
RE2 cannot run on its DFA (it falls back to its NFA: the time is text length x pattern size)
on the largest content a scratchpad holds.

    python -m bench.patterns
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from functools import partial

from bench import environment
from bench.figures import median, report

PATTERNS = ["^(a+)+$", "^((a+))+$", "^(a|a)*$"]
RE2_LENGTHS = [1_000, 10_000, 100_000, 300_000]
PYTHON_LENGTHS = [18, 20, 22]
RUNS = 5
# The NFA case: a pattern of about 1,000 instructions on 350,000 random a's and b's.
NFA_PATTERN = "a[ab]{999}c"
NFA_LENGTH = 350_000


def _timed(call: Callable[[], object], runs: int = RUNS) -> float:
    """Median seconds of `runs` calls."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return median(samples)


def main() -> None:
    environment.apply()
    from memkit.scratchpad.schema import content_problems

    for pattern in PATTERNS:
        schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
        for n in RE2_LENGTHS:
            content = {"x": "a" * n + "!"}
            assert content_problems(schema, content), "the pattern cannot match"
            seconds = _timed(partial(content_problems, schema, content))
            report(f"patterns: memkit {pattern} on {n:,} a's + '!'", seconds * 1000, "ms")
        for n in PYTHON_LENGTHS:
            text = "a" * n + "!"
            seconds = _timed(partial(re.search, pattern, text), runs=1)
            report(f"patterns: Python re {pattern} on {n} a's + '!'", seconds * 1000, "ms")

    rng = random.Random(7)
    text = "".join(rng.choice("ab") for _ in range(NFA_LENGTH))
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": NFA_PATTERN}}}
    seconds = _timed(partial(content_problems, schema, {"x": text}), runs=3)
    report(f"patterns: memkit {NFA_PATTERN} on {NFA_LENGTH:,} random a/b", seconds * 1000, "ms")


if __name__ == "__main__":
    main()
