"""What memkit-cli's wheel leaves out: the library modules memkit-client's wheel holds
(sdk/pyproject.toml's py-modules and their packages' __init__), so that the two wheels never
install the same file and memkit-cli takes them from its memkit-client dependency."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from setuptools.command.build_py import build_py

SDK_PYPROJECT = Path(__file__).resolve().parents[1] / "sdk" / "pyproject.toml"


def client_modules(pyproject: Path = SDK_PYPROJECT) -> set[str]:
    """Every library module memkit-client's wheel holds, packages as `pkg.__init__`."""
    modules: list[str] = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"][
        "py-modules"
    ]
    held = set(modules)
    for module in modules:
        parts = module.split(".")
        held.update(".".join([*parts[:end], "__init__"]) for end in range(1, len(parts)))
    return held


class WithoutClientModules(build_py):
    """setuptools' build_py, without the modules memkit-client holds."""

    def find_package_modules(self, package: str, package_dir: str) -> list[Any]:
        held = client_modules()
        return [
            (pkg, module, path)
            for pkg, module, path in super().find_package_modules(package, package_dir)
            if f"{pkg}.{module}" not in held
        ]
