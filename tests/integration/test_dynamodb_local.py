"""The local stack on DynamoDB Local, AWS's own engine (memkit_dev.local.dynamodb_local): data
kept across a restart, the index rebuilt from the table on start, `--dynamodb-endpoint` with
the work queues kept on their own endpoint, and `memkit serve` stopping cleanly on SIGTERM.

Runs when Java 17+ is here and DynamoDB Local can be installed (from the npm registry, into
.tools/ once); skipped otherwise, saying why."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memkit_dev.local.dynamodb_local import DynamoDBLocal, Unavailable, prepare
from memkit_dev.local.stack import LocalStack, LocalStackConfig
from tests.conftest import ROOT
from tests.integration.conftest import until

pytestmark = pytest.mark.integration

TOOLS = ROOT / ".tools"
# Generous: a loaded 2-core machine indexes a record within a second or two.
SETTLE_SECONDS = 60.0


@pytest.fixture(scope="module")
def dynamodb_local_home() -> Path:
    try:
        return prepare(TOOLS)
    except Unavailable as exc:
        pytest.skip(f"DynamoDB Local cannot run here: {exc}")


def _config(**changes: Any) -> LocalStackConfig:
    base: dict[str, Any] = {
        "port": 0,
        "concurrency": 1,
        "template": ROOT / "template.yaml",
        "tools_dir": TOOLS,
        "cleanup_interval_seconds": 0,
    }
    return LocalStackConfig(**{**base, **changes})


def _until(check: Any, what: str) -> Any:
    return until(check, what, SETTLE_SECONDS)


def _indexed(url: str, record_id: str) -> bool:
    body = httpx.get(f"{url}/v1/long-term-memory/{record_id}", timeout=30).json()
    return body.get("indexing") == "indexed"


def test_a_restart_keeps_the_data_and_rebuilds_the_index(
    dynamodb_local_home: Path, tmp_path: Path
) -> None:
    # Given a stack on DynamoDB Local that stored a session, a scratchpad and a memory
    config = _config(engine="dynamodb-local", data_dir=tmp_path / "data")
    memory = {"id": "tea", "text": "Ada drinks green tea every morning", "user_id": "ada"}
    with LocalStack(config) as first:
        url = first.url
        assert first.engine.startswith("DynamoDB Local")
        assert httpx.post(f"{url}/v1/long-term-memory/", json={"memories": [memory]}).is_success
        messages = {"messages": [{"id": "m1", "role": "user", "content": "Book the train"}]}
        assert httpx.post(f"{url}/v1/working-memory/chat-1/messages", json=messages).is_success
        pad = {"content": "likes tea"}
        assert httpx.patch(f"{url}/v1/working-memory/chat-1/scratchpad", json=pad).is_success
        _until(lambda: _indexed(url, "tea"), "the memory was indexed")

    # When the stack starts again on the same data
    with LocalStack(config) as second:
        url = second.url

        # Then everything is there, and search finds the memory (the index was rebuilt)
        session = httpx.get(f"{url}/v1/working-memory/chat-1").json()
        assert [m["id"] for m in session["messages"]] == ["m1"]
        scratchpad = httpx.get(f"{url}/v1/working-memory/chat-1/scratchpad").json()
        assert scratchpad["content"] == "likes tea"
        found = httpx.post(
            f"{url}/v1/long-term-memory/search", json={"text": "green tea", "limit": 5}
        ).json()
        assert "tea" in [m["id"] for m in found["memories"]]


@pytest.fixture
def dynamodb_local(dynamodb_local_home: Path) -> Iterator[DynamoDBLocal]:
    server = DynamoDBLocal(dynamodb_local_home, data_dir=None).start()
    yield server
    server.stop()


def test_an_endpoint_serves_the_table_and_the_queues_stay_local(
    dynamodb_local: DynamoDBLocal,
) -> None:
    # Given the stack pointed at a DynamoDB endpoint it did not start
    with LocalStack(_config(dynamodb_endpoint=dynamodb_local.endpoint)) as stack:
        # Then the table is there, and the work queues are not (moto's SQS serves them)
        assert stack.dynamodb_endpoint == dynamodb_local.endpoint
        assert stack.sqs_endpoint != dynamodb_local.endpoint
        assert stack.queue_urls

        # And a memory written through the API is indexed through that endpoint's stream
        memory = {"id": "oslo", "text": "Ada flies to Oslo on Friday", "user_id": "ada"}
        assert httpx.post(
            f"{stack.url}/v1/long-term-memory/", json={"memories": [memory]}
        ).is_success
        _until(lambda: _indexed(stack.url, "oslo"), "the memory was indexed")


def _serve(cwd: Path, *options: str) -> tuple[subprocess.Popen[str], str]:
    """`memkit serve` with `options` (no cleanup timer, this checkout's template) started in
    `cwd`, and its URL once it listens."""
    command = [sys.executable, "-m", "memkit_dev.cli", "serve", "--port", "0", *options]
    command += ["--cleanup-interval", "0", "--template", str(ROOT / "template.yaml")]
    serve = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert serve.stdout is not None
    banner = serve.stdout.readline()
    url = re.search(r"http://\S+", banner)
    assert url is not None, banner
    return serve, url.group(0)


def test_serve_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    # Given `memkit serve` running (moto: this checks the process, not the engine)
    serve, url = _serve(tmp_path, "--engine", "moto")
    assert httpx.get(f"{url}/v1/health", timeout=30).is_success

    # When it gets SIGTERM
    serve.send_signal(signal.SIGTERM)
    out, err = serve.communicate(timeout=120)

    # Then it stops by itself, exit 0, without a traceback
    assert serve.returncode == 0, err[-2000:]
    assert "Traceback" not in err
    assert "stopped" in out


def _group_gone(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def test_dynamodb_local_never_outlives_a_killed_stack(dynamodb_local_home: Path) -> None:
    # Given a process that started DynamoDB Local (as `memkit serve` or a benchmark does)
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from memkit_dev.local.dynamodb_local import DynamoDBLocal\n"
        "server = DynamoDBLocal(Path(sys.argv[1]), None).start()\n"
        "print(server._process.pid, server.endpoint, flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(dynamodb_local_home)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    group, endpoint = owner.stdout.readline().split()
    assert httpx.get(endpoint, timeout=30).status_code == 400  # it answers (no operation)

    # When that process is killed, with no chance to stop anything
    owner.kill()
    owner.wait(timeout=30)

    # Then Java goes with it (its watchdog sees the pipe close), and the port is free
    _until(lambda: _group_gone(int(group)), "DynamoDB Local ended with its owner")
    with pytest.raises(httpx.TransportError):
        httpx.get(endpoint, timeout=5)


def test_it_starts_from_the_default_relative_tools_folder(
    dynamodb_local_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the working directory `memkit serve` runs in, and its default --tools-dir .tools
    monkeypatch.chdir(ROOT)
    home = prepare(Path(".tools"))

    # When DynamoDB Local is started from that relative folder
    server = DynamoDBLocal(home, data_dir=None).start()
    try:
        # Then it answers (Java runs in the install folder: a relative jar path missed it)
        assert httpx.post(server.endpoint, timeout=10).status_code < 500
    finally:
        server.stop()


def _java_of(data_dir: Path) -> int:
    """The pid of the DynamoDB Local Java process keeping its data in `data_dir`."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            comm = (proc / "comm").read_text().strip()
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if comm == "java" and str(data_dir.resolve()).encode() in command:
            return int(proc.name)
    raise AssertionError(f"no DynamoDB Local Java process for {data_dir}")


def test_serve_stops_with_the_reason_when_dynamodb_local_dies(
    dynamodb_local_home: Path, tmp_path: Path
) -> None:
    # Given `memkit serve` on DynamoDB Local
    data = tmp_path / "data"
    serve, _ = _serve(
        tmp_path, "--engine", "dynamodb-local", "--data-dir", str(data), "--tools-dir", str(TOOLS)
    )

    # When its Java process dies
    os.kill(_java_of(data), signal.SIGKILL)

    # Then the stack stops by itself, exit 1, saying why in one line and no traceback
    _, err = serve.communicate(timeout=120)
    assert serve.returncode == 1, err[-2000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"memkit serve: DynamoDB Local exited (status {128 + signal.SIGKILL}); stopped:"
        f" start it again (the data in {data} is kept)"
    )


def test_with_dynamodb_local_gone_every_route_answers_503_to_retry(
    dynamodb_local_home: Path, tmp_path: Path
) -> None:
    # Given a stack on DynamoDB Local holding a memory, its vector table on the same engine
    # (behind the stand-in that adds vector indexes)
    config = _config(engine="dynamodb-local", data_dir=tmp_path / "data", vector_store="dynamodb")
    memory = {"id": "tea", "text": "Ada drinks green tea every morning", "user_id": "ada"}
    with LocalStack(config) as stack:
        url = stack.url
        assert httpx.get(f"{url}/v1/health", timeout=30).status_code == 200
        assert stack.failure() is None
        assert httpx.post(f"{url}/v1/long-term-memory/", json={"memories": [memory]}).is_success
        _until(lambda: _indexed(url, "tea"), "the memory was indexed")

        # When its Java process dies (a crash: nothing stopped it)
        os.kill(_java_of(tmp_path / "data"), signal.SIGKILL)

        # Then the stack knows why
        failure = _until(stack.failure, "the stack saw DynamoDB Local exit")
        assert failure == f"DynamoDB Local exited (status {128 + signal.SIGKILL})"

        # and search, prompt and a session read are the function's own 503 with Retry-After
        # (not the gateway's bare answer once the function timed out), and so is the health
        # check once its last answer (remembered a few seconds) is old
        def unhealthy() -> httpx.Response | None:
            health = httpx.get(f"{url}/v1/health", timeout=60)
            return health if health.status_code != 200 else None

        search = {"text": "green tea", "limit": 5}
        prompt = {"query": "what does Ada drink?", "long_term_search": {"text": "tea"}}
        answers = [
            httpx.post(f"{url}/v1/long-term-memory/search", json=search, timeout=120),
            httpx.post(f"{url}/v1/memory/prompt", json=prompt, timeout=120),
            httpx.get(f"{url}/v1/working-memory/chat-1", timeout=120),
            _until(unhealthy, "the health check saw DynamoDB Local gone"),
        ]
        for answer in answers:
            assert answer.status_code == 503, answer.text
            assert answer.json()["code"] == "unavailable"
            assert int(answer.headers["retry-after"]) > 0
