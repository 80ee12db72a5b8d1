"""`python -m bench`: every benchmark in turn, each in a fresh process, figures on stdout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import environment

ROOT = Path(__file__).resolve().parents[1]
# Cheapest first; each one prints its own figures, one a line.
BENCHMARKS = (
    "patterns",
    "dynamodb_requests",
    "warm_overhead",
    "auth",
    "cold_start",
    "cleanup",
    "sessions",
    "indexing",
    "reindex",
    "retrieval",
    "vector_filters",
    "truth",
    "prompt",
    "ingest",
    "transfer",
    "locomo",
    "agentcore",
    "cost",
)


def main() -> int:
    env = environment.apply()
    failed = []
    for name in BENCHMARKS:
        done = subprocess.run([sys.executable, "-m", f"bench.{name}"], cwd=ROOT, env=env)
        if done.returncode != 0:
            failed.append(name)
    if failed:
        print(f"benchmarks that did not finish: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
