"""DynamoDB Local, AWS's own engine, for the local stack: installed on first use, started and
stopped with the stack, its data kept in a folder across restarts.

moto walks a whole table on every Query and answers one request at a time, so a local stack
on moto slows down as the table grows; DynamoDB Local (SQLite underneath) keeps Queries flat
and checks what moto lets through (name, expression, item and transaction rules). It needs
Java 17 or newer. The distribution comes from the npm registry (the `amplify-dynamodb-simulator`
package ships it in `emulator/`), unpacked into a git-ignored tools folder once.
"""

from __future__ import annotations

import atexit
import logging
import re
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

log = logging.getLogger("memkit.local")

NPM_PACKAGE = "amplify-dynamodb-simulator@2.9.30"  # DynamoDB Local 1.25.1
JAR = "DynamoDBLocal.jar"
LIBRARIES = "DynamoDBLocal_lib"
MIN_JAVA = 17
START_TIMEOUT_SECONDS = 60.0


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


def install(tools: Path) -> Path:
    """The folder holding DynamoDBLocal.jar and its libraries, unpacked into `tools` from the
    npm registry on first use (a later call finds it there)."""
    home = tools / "dynamodb-local"
    if (home / JAR).is_file() and (home / LIBRARIES).is_dir():
        return home
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not installed, so DynamoDB Local cannot be fetched")
    tools.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tools) as scratch:
        log.warning("installing DynamoDB Local into %s (once, about 60 MB)", home)
        try:
            subprocess.run(  # noqa: S603 (npm on the PATH, a pinned package)
                [npm, "pack", NPM_PACKAGE, "--silent", "--pack-destination", scratch],
                capture_output=True,
                check=True,
                timeout=600,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise Unavailable(f"npm could not fetch {NPM_PACKAGE}") from exc
        packed = next(Path(scratch).glob("*.tgz"), None)
        if packed is None:
            raise Unavailable(f"npm fetched no package for {NPM_PACKAGE}")
        unpacked = Path(scratch) / "unpacked"
        try:
            with tarfile.open(packed) as archive:
                members = [
                    m for m in archive.getmembers() if m.name.startswith("package/emulator/")
                ]
                if hasattr(tarfile, "data_filter"):  # 3.11.4+: no links or paths out
                    archive.extractall(unpacked, members=members, filter="data")
                else:  # the members are the registry's package, checked by npm
                    archive.extractall(unpacked, members=members)  # noqa: S202
            staged = unpacked / "package" / "emulator"
            if not (staged / JAR).is_file():
                raise Unavailable(f"{NPM_PACKAGE} holds no {JAR}")
            if home.exists():
                shutil.rmtree(home)
            staged.rename(home)
        except (OSError, tarfile.TarError) as exc:
            raise Unavailable(f"{NPM_PACKAGE} could not be unpacked") from exc
    return home


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
        self._home = home
        self._data_dir = data_dir
        self._host = host
        self._port = _free_port(host)
        self._process: subprocess.Popen[bytes] | None = None

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
        # this process itself (after the pumps, so nothing reads a closed table).
        # Its own process group (see below), so it is stopped at exit whatever stops us.
        atexit.register(self.stop)
        self._process = subprocess.Popen(  # noqa: S603 (java, the installed jar, our flags)
            command,
            cwd=self._home,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_until_listening(timeout)

    def _wait_until_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise Unavailable(f"DynamoDB Local exited with {self._process.returncode}")
            try:
                with socket.create_connection((self._host, self._port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise Unavailable(f"DynamoDB Local did not listen within {timeout:.0f} s")

    def stop(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
