"""What an install of the project holds: the library, the dev kit and the SDK (memkit.client),
each from its own source root, as setuptools resolves pyproject.toml.

The SDK's source root (sdk/memkit/client) is outside layers/memkit/, which `sam build` packs
into the Lambda layer (tests/unit/test_layers.py); pyproject.toml maps it into the installed
`memkit` package.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
