"""`memkit export` and `memkit import`: moving a user's or a namespace's memory between stacks,
and in from the Agent Memory Server or Mem0 (docs/cli.md)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TextIO

from memkit.client import MemkitClientError
from memkit_dev import connect
from memkit_dev.progress import Progress
from memkit_dev.transfer.export import UNADDRESSABLE, Exporter
from memkit_dev.transfer.importer import SUMMARY_KINDS, Importer
from memkit_dev.transfer.shapes import FORMATS, Defaults, Reader, Unreadable, decoded

IMPORT_HELP = """Import memory from a file (or - for stdin): memkit's export (JSONL), the Agent
Memory Server's working memory (GET /v1/working-memory/{id}) and long-term memory records, or
Mem0's get_all output ({"results": [...]}); the shape is recognised, or given with --format.
Ids are kept, and what is stored already is skipped: importing a file twice writes nothing the
second time. Lines the API refuses are reported (with their line number) and skipped; the exit
status is 0 when everything went in, 1 when something did not, 2 when the import could not run.
A progress bar is drawn on stderr when it is a terminal; the summary is printed on stderr."""

EXPORT_HELP = """Export a user's or a namespace's profiles, sessions (every message),
scratchpads and long-term records as memkit JSONL, on stdout or to --output, streaming. Reads
are not counted as uses of the records (last_accessed is left as it was). An admin token exports
every user of a namespace; another token exports its own user's."""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser(
        "export", help="export memory as memkit JSONL", description=EXPORT_HELP
    )
    export.add_argument("--user", help="only this user's memory (default: the namespace's)")
    export.add_argument(
        "--namespace",
        action="append",
        help="a namespace to export (repeat for more; default: default)",
    )
    export.add_argument("--output", "-o", type=Path, help="write here instead of stdout")
    connect.add_arguments(export)
    export.set_defaults(run=export_command)

    load = commands.add_parser(
        "import",
        help="import memkit JSONL, Agent Memory Server or Mem0 exports",
        description=IMPORT_HELP,
    )
    load.add_argument("file", help="the file to import, or - for stdin")
    load.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="the shape expected: auto (each object's own, the default), or only memkit, ams "
        "or mem0 (any other shape is a problem reported)",
    )
    load.add_argument(
        "--namespace",
        default="default",
        help="AMS and Mem0 items that name no namespace go here (default: default)",
    )
    load.add_argument("--user", help="AMS and Mem0 items that name no user belong to this user")
    load.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="AMS and Mem0: also import a record whose text its user already has under "
        "another id (memkit exports always keep them)",
    )
    connect.add_arguments(load)
    load.set_defaults(run=import_command)


def export_command(args: argparse.Namespace) -> int:
    namespaces = args.namespace or ["default"]
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        out: TextIO
        if args.output is not None:
            out = stack.enter_context(args.output.open("w", encoding="utf-8"))
        else:
            out = sys.stdout
        client = stack.enter_context(connect.client_of(args))
        progress = stack.enter_context(Progress("export", unit=" items"))
        exporter = Exporter(client, out, progress)
        try:
            counts = exporter.run(namespaces, args.user)
        except MemkitClientError as error:
            progress.close()
            return connect.fail(f"export stopped: {connect.describe(error)}")
        except BrokenPipeError:  # `memkit export | head`: the reader has what it wanted
            with contextlib.suppress(OSError):
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (no flush error at exit)
            return 0
    elapsed = time.monotonic() - started
    print(f"exported {summary(counts)} in {elapsed:.1f} s", file=sys.stderr)
    if counts[UNADDRESSABLE]:
        print(
            f"left out {counts[UNADDRESSABLE]} sessions or scratchpads whose ids were stored "
            "before the id rule: no path can name them (docs/api.md#ids)",
            file=sys.stderr,
        )
    return 0


def import_command(args: argparse.Namespace) -> int:
    defaults = Defaults(namespace=args.namespace, user_id=args.user)
    reader = Reader(args.format, defaults)
    started = time.monotonic()
    try:
        source, size = _open(args.file)
    except OSError as error:
        return connect.fail(f"cannot read {args.file}: {error.strerror or error}")
    with (
        source,
        connect.client_of(args) as client,
        Progress("import", total=size, unit="B", scale=True) as progress,
    ):
        importer = Importer(client, deduplicate=not args.keep_duplicates, on_progress=progress.show)
        try:
            counts = importer.run(reader.read(decoded(_counted(source, progress))))
        except Unreadable as error:
            progress.close()
            return connect.fail(str(error))
    elapsed = time.monotonic() - started
    if reader.header is not None and not reader.ended and not counts["aborted"]:
        print("warning: the file has no end line: it may have been cut short", file=sys.stderr)
    rate = counts["messages"] / elapsed if elapsed > 0 else 0.0
    print(
        f"imported {summary(counts)}; {counts['skipped']} skipped as already present, "
        f"{counts['failed']} failed ({elapsed:.1f} s, {rate:.0f} messages/s)",
        file=sys.stderr,
    )
    if counts["aborted"]:
        return 2
    return 1 if counts["failed"] or importer.problems else 0


def summary(counts: Counter[str]) -> str:
    return ", ".join(f"{counts[kind]} {kind}" for kind in SUMMARY_KINDS)


def _open(path: str) -> tuple[IO[bytes], int | None]:
    if path == "-":
        return sys.stdin.buffer, None
    file = open(path, "rb")  # noqa: SIM115 (closed by the caller's with)
    return file, os.fstat(file.fileno()).st_size


def _counted(source: IO[bytes], progress: Progress) -> Iterator[bytes]:
    for raw in source:
        progress.advance(len(raw))
        yield raw
