"""What an install of the project holds: the library, the dev kit and the SDK (memkit.client),
each from its own source root, as setuptools resolves pyproject.toml.

The SDK's source root (sdk/memkit/client) is outside layers/memkit/, which `sam build` packs
into the Lambda layer (tests/unit/test_layers.py); pyproject.toml maps it into the installed
`memkit` package.
"""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
# setuptools flags its own pyproject.toml support as beta (a warning).
pytestmark = pytest.mark.filterwarnings("ignore:Support for .* is still:Warning")


@pytest.fixture(scope="module")
def packages() -> dict[str, Path]:
    """Each package an install holds -> the folder setuptools takes it from."""
    pyprojecttoml = pytest.importorskip("setuptools.config.pyprojecttoml")
    from setuptools.discovery import find_package_path
    from setuptools.dist import Distribution

    dist = pyprojecttoml.apply_configuration(Distribution(), ROOT / "pyproject.toml")
    return {
        name: ROOT / find_package_path(name, dist.package_dir or {}, str(ROOT))
        for name in dist.packages or []
    }


def test_the_library_comes_from_the_layer_and_the_sdk_from_its_own_root(
    packages: dict[str, Path],
) -> None:
    assert packages["memkit"] == ROOT / "layers" / "memkit" / "memkit"
    assert packages["memkit.client"] == ROOT / "sdk" / "memkit" / "client"
    assert packages["memkit_dev"] == ROOT / "devkit" / "memkit_dev"


def test_every_package_an_install_holds_has_its_folder(packages: dict[str, Path]) -> None:
    missing = sorted(name for name, folder in packages.items() if not folder.is_dir())
    assert not missing, f"packages whose folder does not exist: {missing}"


def test_every_sdk_module_is_in_a_package_the_install_holds(packages: dict[str, Path]) -> None:
    folders = set(packages.values())
    sdk = ROOT / "sdk" / "memkit" / "client"
    modules = sorted(sdk.rglob("*.py"))
    assert modules
    assert all(module.parent in folders for module in modules)


# -- the wheels: memkit-client (sdk/pyproject.toml) and memkit-cli (devkit/pyproject.toml) ------

LIBRARY = ROOT / "layers" / "memkit" / "memkit"
SDK = ROOT / "sdk" / "memkit" / "client"


def wheel_files() -> Any:
    """devkit/wheel_files.py, memkit-cli's build step (no package of the install)."""
    spec = importlib.util.spec_from_file_location("wheel_files", ROOT / "devkit" / "wheel_files.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pyproject(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def _module_file(module: str) -> Path | None:
    """The source of a memkit module: memkit.client.* in sdk/, the rest in the layer."""
    parts = module.split(".")[1:]
    base = LIBRARY
    if parts[:1] == ["client"]:
        base, parts = SDK, parts[1:]
    path = base.joinpath(*parts)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def client_closure() -> set[str]:
    """Every library module memkit.client imports, directly or through another, wherever the
    import statement is (a function body, TYPE_CHECKING): packages as `pkg.__init__`."""
    todo = ["memkit.client." + path.stem for path in SDK.glob("*.py")]
    seen: dict[str, Path] = {}
    while todo:
        module = todo.pop()
        path = _module_file(module)
        if module in seen or path is None:
            continue
        seen[module] = path
        parts = module.split(".")
        todo.extend(".".join(parts[:end]) for end in range(1, len(parts)))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            todo.extend(name for name in names if name.split(".")[0] == "memkit")
    return {
        f"{module}.__init__" if path.name == "__init__.py" else module
        for module, path in seen.items()
        if not module.startswith("memkit.client")
    }


def test_the_client_wheel_holds_exactly_the_library_modules_the_sdk_imports() -> None:
    closure = client_closure()

    assert "memkit.models.api" in closure
    assert "memkit.store.sessions" not in closure
    assert wheel_files().client_modules(ROOT / "sdk" / "pyproject.toml") == closure


def _requirements(pyproject: dict[str, Any]) -> list[Requirement]:
    project = pyproject["project"]
    listed = [*project["dependencies"]]
    for extra in project.get("optional-dependencies", {}).values():
        listed.extend(extra)
    return [Requirement(line) for line in listed]


def test_the_wheels_pin_the_ranges_of_the_root_pyproject() -> None:
    root = {
        req.name.lower(): req
        for req in _requirements(_pyproject(ROOT / "pyproject.toml"))
        if req.name != "memkit"
    }
    for folder in ("sdk", "devkit"):
        for req in _requirements(_pyproject(ROOT / folder / "pyproject.toml")):
            if req.name == "memkit-client":
                continue
            assert req.name.lower() in root, f"{folder}: {req.name} is not in pyproject.toml"
            same = root[req.name.lower()]
            assert (req.specifier, req.extras) == (same.specifier, same.extras), (
                f"{folder}: {req} but pyproject.toml says {same}"
            )


def test_the_cli_wheel_has_the_cli_the_runtime_and_the_local_stack_of_the_dev_install() -> None:
    root = _pyproject(ROOT / "pyproject.toml")["project"]
    cli = _pyproject(ROOT / "devkit" / "pyproject.toml")["project"]
    wanted = [*root["dependencies"]]
    for extra in ("local", "cli", "mcp"):
        wanted.extend(line for line in root["optional-dependencies"][extra] if "memkit" not in line)

    assert {Requirement(line).name for line in wanted} <= {
        Requirement(line).name for line in cli["dependencies"]
    }
    assert cli["scripts"] == root["scripts"]


def test_the_wheels_have_the_projects_version_and_the_cli_pins_its_client() -> None:
    import memkit

    version = _pyproject(ROOT / "pyproject.toml")["project"]["version"]
    sdk = _pyproject(ROOT / "sdk" / "pyproject.toml")["project"]
    cli = _pyproject(ROOT / "devkit" / "pyproject.toml")["project"]

    assert memkit.__version__ == version
    assert sdk["version"] == cli["version"] == version
    assert f"memkit-client=={version}" in cli["dependencies"]
