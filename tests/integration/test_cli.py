"""`memkit serve`, the console script, as a newcomer runs it."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _listing(folder: Path) -> dict[str, tuple[int, int]] | None:
    """What `folder` holds (name: size, modification time), or None when it does not exist."""
    if not folder.exists():
        return None
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in folder.rglob("*")
    }


def test_memkit_serve_prints_its_url_and_answers_on_it(tmp_path: Path) -> None:
    # Given the checkout, where a newcomer runs it (the template and .tools/ are found there),
    # and a data folder of the test's own: the default, .memkit/ of the folder it runs in,
    # would be the checkout's
    command = shutil.which("memkit", path=str(Path(sys.executable).parent)) or "memkit"
    data = tmp_path / "data"
    checkouts = _listing(ROOT / ".memkit")
    process = subprocess.Popen(
        [command, "serve", "--port", "0", "--concurrency", "1", "--data-dir", str(data)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        deadline, url = time.monotonic() + 60, None
        while url is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            found = re.search(r"local stack on (http://\S+)", line)
            url = found.group(1) if found else None
        assert url, "memkit serve printed no URL"

        with urllib.request.urlopen(f"{url}/v1/health", timeout=30) as response:
            assert response.status == 200
            assert "now" in json.loads(response.read())
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    assert (data / "dev-jwt-key.pem").exists()  # --auth jwt's development key: kept there
    assert _listing(ROOT / ".memkit") == checkouts  # nothing written into the checkout


def test_memkit_keys_creates_lists_and_revokes_a_tenants_keys() -> None:
    """`memkit keys` through the console script, against a DynamoDB endpoint (moto's server
    with the template's table): the key is printed once, listings never show it, another
    tenant can neither list nor revoke it, and the authorizer refuses it once revoked."""
    import boto3

    from memkit.config import ApiKeySettings
    from memkit.handlers.wiring import api_keys_for
    from memkit_dev.local.dynamodb import MotoDynamoDB
    from memkit_dev.local.template import create_table, load_template

    command = shutil.which("memkit", path=str(Path(sys.executable).parent)) or "memkit"
    server = MotoDynamoDB().start()
    try:
        client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=server.endpoint)
        create_table(client, load_template(ROOT / "template.yaml"), "memkit-keys")
        where = ["--table", "memkit-keys", "--dynamodb-endpoint", server.endpoint]

        def keys(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [command, "keys", *args, *where], capture_output=True, text=True, timeout=60
            )

        def authorized(plain: str) -> bool:
            settings = ApiKeySettings(table_name="memkit-keys", dynamodb_endpoint=server.endpoint)
            return api_keys_for(settings).check(f"Bearer {plain}").allowed

        created = keys(
            "create", "--tenant", "acme", "--scopes", "memory:read,memory:write", "--user", "ada"
        )
        assert created.returncode == 0, created.stderr
        plain = created.stdout.strip()
        key_id = plain.split("_")[1]
        assert re.fullmatch(r"mk_[a-z0-9]{8}_[A-Za-z0-9_-]{43}", plain)
        assert f"created key {key_id} of tenant acme: user ada" in created.stderr
        assert authorized(plain)

        listed = keys("list", "--tenant", "acme", "--json")
        assert listed.returncode == 0, listed.stderr
        [shown] = json.loads(listed.stdout)
        assert (shown["key_id"], shown["user_id"], shown["status"]) == (key_id, "ada", "active")
        assert shown["scopes"] == ["memory:read", "memory:write"]
        table = keys("list", "--tenant", "acme")
        assert key_id in table.stdout
        assert "memory:read,memory:write" in table.stdout
        for output in (listed.stdout, table.stdout):
            assert plain.split("_", 2)[2] not in output

        assert json.loads(keys("list", "--tenant", "globex", "--json").stdout) == []
        refused = keys("revoke", key_id, "--tenant", "globex")
        assert refused.returncode == 1
        assert f"tenant 'globex' has no api key '{key_id}'" in refused.stderr
        assert authorized(plain)

        revoked = keys("revoke", key_id, "--tenant", "acme")
        assert revoked.returncode == 0, revoked.stderr
        assert revoked.stdout.startswith(f"revoked key {key_id} of tenant acme")
        assert not authorized(plain)
        [shown] = json.loads(keys("list", "--tenant", "acme", "--json").stdout)
        assert shown["status"] == "revoked"

        bad = keys("create", "--tenant", "acme", "--scopes", "memory:everything")
        assert bad.returncode == 2
        assert "scopes: one or more of memory:read, memory:write, memory:admin" in bad.stderr
    finally:
        server.stop()
