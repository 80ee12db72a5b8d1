"""The SDK and the CLI as a user installs them: the wheels `make wheels` builds (memkit-client
from sdk/pyproject.toml, memkit-cli from devkit/pyproject.toml), each installed in a clean
virtual environment from the local file, their dependencies from the package index.

The wheels are `make wheels`'s, in dist/ (make rebuilds one older than its sources; after
`make test` built them, nothing). The build backend and the dependencies come from the index:
where it cannot be reached, these tests skip and say so; any other failure fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from memkit.client import MemkitClient
from memkit_dev.local.auth import mint
from memkit_dev.local.stack import LocalStack
from tests.conftest import ROOT
from tests.integration.test_doc_examples import examples
from tests.unit.test_packaging import LIBRARY, SDK, client_closure

pytestmark = pytest.mark.integration

DEVKIT = ROOT / "devkit" / "memkit_dev"


def _run(
    command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _pip(python: Path | str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return _run([str(python), "-m", "pip", "--disable-pip-version-check", *args], cwd, timeout=900)


def _or_skip_if_offline(done: subprocess.CompletedProcess[str], what: str, cwd: Path) -> None:
    """Fails on `done`'s error, unless the package index cannot be reached at all: then skips,
    saying so (a build or install needs it for setuptools and the dependencies)."""
    if done.returncode == 0:
        return
    probe = _pip(
        sys.executable, "download", "--no-deps", "--dest", str(cwd), "setuptools>=77", cwd=cwd
    )
    if probe.returncode != 0:
        pytest.skip(f"{what}: the package index cannot be reached: {probe.stderr[-500:]}")
    pytest.fail(f"{what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/, holding the wheels of this checkout's sources (`make wheels`)."""
    done = _run(["make", "--no-print-directory", "wheels"], ROOT, timeout=900)
    _or_skip_if_offline(done, "make wheels", tmp_path_factory.mktemp("probe"))
    return ROOT / "dist"


@pytest.fixture(scope="module")
def client_wheel(wheels: Path) -> Path:
    (wheel,) = wheels.glob("memkit_client-*.whl")
    return wheel


@pytest.fixture(scope="module")
def cli_wheel(wheels: Path) -> Path:
    (wheel,) = wheels.glob("memkit_cli-*.whl")
    return wheel


def _environment(place: Path, *wheels: Path) -> Path:
    """A fresh virtual environment at `place` with `wheels` installed; its python.

    Without pip's bytecode compilation (--no-compile): the interpreter compiles what a test
    imports when it imports it, as it would have read it from pip's; compiling every module
    of boto3, botocore and the rest up front was half the CLI environment's install (46 s,
    24 s without)."""
    venv.create(place, with_pip=True, clear=True)
    python = place / "bin" / "python"
    done = _pip(python, "install", "--quiet", "--no-compile", *map(str, wheels), cwd=place)
    _or_skip_if_offline(done, f"pip install {' '.join(w.name for w in wheels)}", place)
    return python


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH, no virtual environment of the checkout's: only what the wheel installs."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV"} and not key.startswith(("MEMKIT_", "AWS_"))
    }


def _files(wheel: Path) -> set[str]:
    names = zipfile.ZipFile(wheel).namelist()
    return {name for name in names if ".dist-info/" not in name}


def _library_files(*roots: tuple[Path, str]) -> set[str]:
    return {
        f"{prefix}/{path.relative_to(root).as_posix()}"
        for root, prefix in roots
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_the_client_wheel_holds_the_sdk_and_the_library_modules_it_imports(
    client_wheel: Path,
) -> None:
    closure = {"memkit/" + "/".join(module.split(".")[1:]) + ".py" for module in client_closure()}
    sdk = {f"memkit/client/{path.name}" for path in SDK.glob("*.py")}

    files = _files(client_wheel)

    assert files == sdk | closure
    assert not [name for name in files if name.startswith(("memkit/store", "memkit/handlers"))]


def test_the_cli_wheel_holds_the_rest_and_shares_no_file_with_the_client_wheel(
    client_wheel: Path, cli_wheel: Path
) -> None:
    client, cli = _files(client_wheel), _files(cli_wheel)
    library = _library_files((LIBRARY, "memkit"), (DEVKIT, "memkit_dev"))

    assert not client & cli
    assert (client | cli) - {f"memkit/client/{path.name}" for path in SDK.glob("*.py")} == library


@pytest.fixture(scope="module")
def client_python(client_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _environment(tmp_path_factory.mktemp("client-venv"), client_wheel)


def test_the_installed_client_imports_without_the_lambda_library(
    client_python: Path, tmp_path: Path
) -> None:
    script = (
        "from importlib.util import find_spec\n"
        "import memkit.client\n"
        "print(memkit.client.__file__)\n"
        "print(find_spec('memkit.handlers'), find_spec('memkit.store'))\n"
    )
    done = _run([str(client_python), "-c", script], tmp_path, _clean_env())

    assert done.returncode == 0, done.stderr
    where, absent = done.stdout.splitlines()
    assert Path(where).is_relative_to(client_python.parents[1])
    assert absent == "None None"


def test_the_first_example_of_the_sdk_guide_runs_on_the_installed_wheel(
    client_python: Path, jwt_stack: LocalStack, dev_keys: Path, tmp_path: Path
) -> None:
    # Given the SDK guide's first example and a token as `make serve` prints it
    (first, *_) = [ex for ex in examples(ROOT / "docs" / "sdk.md") if ex.lang == "python"]
    assert "MemkitClient.from_env()" in first.body
    token = mint(dev_keys, "dev", "default", ["memory:read", "memory:write"])
    env = {**_clean_env(), "MEMKIT_URL": jwt_stack.url, "MEMKIT_TOKEN": token}

    # When it runs on the wheel's environment, outside the checkout
    done = _run([str(client_python), "-c", first.body], tmp_path, env)

    # Then it succeeds, and the session holds its message
    assert done.returncode == 0, done.stderr[-3000:]
    with MemkitClient(jwt_stack.url, token=token) as memkit:
        texts = [message.content for message in memkit.iter_messages("sdk-chat")]
    assert texts == ["I drink green tea"]


@pytest.fixture(scope="module")
def cli_python(
    client_wheel: Path, cli_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return _environment(tmp_path_factory.mktemp("cli-venv"), client_wheel, cli_wheel)


def test_the_installed_cli_prints_the_api_with_the_library_of_both_wheels(
    cli_python: Path, tmp_path: Path
) -> None:
    # memkit openapi builds the API's app: it imports every route, the models and the service.
    memkit = str(cli_python.parent / "memkit")
    done = _run([memkit, "openapi", "--output", str(tmp_path / "api.json")], tmp_path, _clean_env())

    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads((tmp_path / "api.json").read_text(encoding="utf-8"))
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
    assert document == committed
