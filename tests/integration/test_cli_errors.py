"""What the CLI says when something around it is missing: one line naming the real cause,
an exit code, never a traceback (the console script, as a user runs it)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMAND = shutil.which("memkit", path=str(Path(sys.executable).parent)) or "memkit"


def _bare_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine with no AWS credentials and no region configured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = str(tmp_path / "no-config")
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "no-credentials")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COMMAND, *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


def test_keys_create_against_a_local_endpoint_needs_no_aws_credentials(tmp_path: Path) -> None:
    import boto3

    from memkit_dev.local.dynamodb import MotoDynamoDB
    from memkit_dev.local.template import create_table, load_template

    # Given a local DynamoDB endpoint with the template's table, and no AWS credentials set
    server = MotoDynamoDB().start()
    try:
        client = boto3.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url=server.endpoint,
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
        create_table(client, load_template(ROOT / "template.yaml"), "memkit-keys")

        # When a key is created as the local stack's docs say
        created = _run(
            _bare_env(tmp_path),
            "keys",
            "create",
            "--tenant",
            "acme",
            "--scopes",
            "memory:read",
            "--user",
            "ada",
            "--table",
            "memkit-keys",
            "--dynamodb-endpoint",
            server.endpoint,
        )

        # Then it works (the local stack accepts any credentials), instead of "storage is
        # unavailable"
        assert created.returncode == 0, created.stderr
        assert created.stdout.startswith("mk_")
    finally:
        server.stop()


def test_keys_against_an_endpoint_that_does_not_answer_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    endpoint = f"http://127.0.0.1:{_free_port()}"
    listed = _run(
        _bare_env(tmp_path),
        "keys",
        "list",
        "--tenant",
        "acme",
        "--table",
        "memkit-keys",
        "--dynamodb-endpoint",
        endpoint,
    )

    assert listed.returncode == 1
    line = _one_line(listed.stderr)
    assert "storage is unavailable" not in line
    assert endpoint.split("//")[1] in line or "answer" in line or "reach" in line, line


@pytest.mark.parametrize(
    ("env_extra", "missing"),
    [
        ({}, ("region", "credentials")),
        ({"AWS_DEFAULT_REGION": "eu-west-1"}, ("credentials",)),
        ({"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x"}, ("region",)),
    ],
    ids=["neither", "no credentials", "no region"],
)
def test_doctor_sigv4_names_what_is_missing_in_one_line(
    tmp_path: Path, env_extra: dict[str, str], missing: tuple[str, ...]
) -> None:
    env = {**_bare_env(tmp_path), **env_extra}
    checked = _run(env, "doctor", "--sigv4", "--url", "https://api.example.com", "--no-probe")

    assert checked.returncode == 2
    line = _one_line(checked.stderr).lower()
    for what in missing:
        assert what in line, line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--scopes", "memory:read,memory:everything"], "unknown scope memory:everything"),
        (["--scopes", "read"], "unknown scope read"),
        (["--hours", "0"], "--hours must be positive"),
        (["--hours", "-3"], "--hours must be positive"),
        (["--hours", "nan"], "--hours must be positive"),
    ],
    ids=["unknown scope", "bare word", "zero hours", "negative hours", "nan hours"],
)
def test_memkit_token_refuses_unknown_scopes_and_non_positive_lifetimes(
    tmp_path: Path, args: list[str], said: str
) -> None:
    minted = _run(dict(os.environ), "token", "--data-dir", str(tmp_path), *args)

    assert minted.returncode == 2
    assert minted.stdout == ""
    assert said in _one_line(minted.stderr)


def test_memkit_token_accepts_a_prefixed_scope(tmp_path: Path) -> None:
    from memkit_dev.local.auth import JwtAuthorizer, JwtSettings

    minted = _run(
        dict(os.environ), "token", "--data-dir", str(tmp_path), "--scopes", "memkit/memory:read"
    )

    assert minted.returncode == 0, minted.stderr
    claims = JwtAuthorizer(JwtSettings(data_dir=tmp_path)).claims(f"Bearer {minted.stdout.strip()}")
    assert claims["scope"] == "memkit/memory:read"


def test_memkit_token_says_which_key_folder_it_signed_with(tmp_path: Path) -> None:
    # The first token in an empty folder makes a key pair no running server knows: it says so
    first = _run(dict(os.environ), "token", "--data-dir", str(tmp_path))
    assert first.returncode == 0, first.stderr
    line = _one_line(first.stderr)
    assert str(tmp_path.resolve()) in line
    assert "made a new one" in line
    assert "--data-dir" in line

    # and once the folder holds one, it names the folder it signed with
    again = _run(dict(os.environ), "token", "--data-dir", str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert (
        _one_line(again.stderr) == f"memkit token: signed with the key pair in {tmp_path.resolve()}"
    )


def test_serve_on_a_taken_port_says_so_before_starting_anything(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # No java and no npm on PATH: an engine that had to be installed first would fail
        # on that (after minutes, where npm is there); the taken port is said before.
        env = {**dict(os.environ), "PATH": str(tmp_path / "empty")}
        served = _run(
            env,
            "serve",
            "--port",
            str(port),
            "--engine",
            "dynamodb-local",
            "--tools-dir",
            str(tmp_path / "tools"),
            "--data-dir",
            str(tmp_path / "data"),
        )
    assert served.returncode == 2, served.stderr
    assert _one_line(served.stderr) == (
        f"memkit serve: 127.0.0.1:{port} is already in use (another memkit serve?):"
        " stop it or use --port"
    )
    assert not (tmp_path / "tools").exists()  # nothing was installed
