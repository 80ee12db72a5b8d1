"""`memkit import` and `memkit export` through the local stack, as an operator moving a
namespace would run them (the CLI's own code path: `memkit_dev.cli.main`).

    1. Import a memkit export of 100 sessions of 100 messages (10,000 messages): messages/s,
       and the time from the end of the import until every message is searchable.
    2. The same file again: everything is skipped (its time; nothing written).
    3. Export the namespace back: messages/s, and whether it holds every message.

    python -m bench.transfer [--engine auto|dynamodb-local|moto] [--sessions N] [--messages N]

The engine defaults to DynamoDB Local where Java 17+ is here (as `make serve`), else moto.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import environment
from bench.figures import report
from bench.ingest import SEARCHABLE_TIMEOUT, until_indexed

NAMESPACE = "transfer"


def write_export(path: Path, sessions: int, messages: int) -> None:
    """A memkit export (transfer/format.py) of `sessions` sessions of `messages` each."""
    from memkit_dev.transfer import format as fmt

    start = datetime.now(UTC) - timedelta(days=1)
    with path.open("w", encoding="utf-8") as out:
        out.write(fmt.header("bench", [NAMESPACE], None, start.isoformat()))
        for s in range(sessions):
            session_id, user = f"conv-{s}", f"user-{s % 10}"
            out.write(
                fmt.line(
                    fmt.SESSION,
                    session_id=session_id,
                    namespace=NAMESPACE,
                    user_id=user,
                    title=f"Conversation {s}",
                    data={"n": s},
                )
            )
            turns = [
                {
                    "id": f"c{s}-m{n}",
                    "role": "user" if n % 2 == 0 else "assistant",
                    "content": f"conversation {s} turn {n}: notes on trip plans and tea",
                    "created_at": (start + timedelta(seconds=s * messages + n)).isoformat(),
                }
                for n in range(messages)
            ]
            for first in range(0, messages, fmt.CHUNK):
                out.write(
                    fmt.line(
                        fmt.MESSAGES,
                        session_id=session_id,
                        namespace=NAMESPACE,
                        user_id=user,
                        messages=turns[first : first + fmt.CHUNK],
                    )
                )
        out.write(fmt.end_line({"sessions": sessions, "messages": sessions * messages}))


def memkit(*args: str) -> tuple[int, str, float]:
    """`memkit ARGS` in this process: (exit status, its stderr, seconds)."""
    from memkit_dev import cli

    err = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(list(args))
    return status, err.getvalue(), time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", choices=["auto", "dynamodb-local", "moto"])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--messages", type=int, default=100)
    args = parser.parse_args()
    environment.apply()
    from bench.dynamodb_requests import local_stack

    total = args.sessions * args.messages
    with tempfile.TemporaryDirectory() as folder, local_stack("transfer", args.engine) as stack:
        source = Path(folder) / "export.jsonl"
        write_export(source, args.sessions, args.messages)
        status, err, seconds = memkit("import", str(source), "--url", stack.url)
        if status != 0:
            print(err)
            return 1
        report("transfer.import_messages", total, f"in {args.sessions} sessions")
        report("transfer.import_messages_per_second", total / seconds, "msg/s")
        searchable = until_indexed(stack, total, NAMESPACE)
        if searchable is None:
            report("transfer.import_all_searchable_s", SEARCHABLE_TIMEOUT, "s: NOT all by then")
        else:
            report("transfer.import_all_searchable_s", searchable, "s after the import ended")

        status, err, seconds = memkit("import", str(source), "--url", stack.url)
        skipped = f"{total + args.sessions} skipped as already present" in err
        report("transfer.reimport_s", seconds, "s, nothing written" if skipped else err.strip())

        copy = Path(folder) / "copy.jsonl"
        status, err, seconds = memkit(
            "export", "--namespace", NAMESPACE, "-o", str(copy), "--url", stack.url
        )
        exported = sum(
            len(json.loads(line).get("messages", []))
            for line in copy.read_text(encoding="utf-8").splitlines()
        )
        report("transfer.export_messages_per_second", exported / seconds, "msg/s")
        report("transfer.export_messages", exported, f"of {total}", "all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
