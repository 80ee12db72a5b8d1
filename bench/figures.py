"""Printing figures: one line each, the name, the value and the target to read it against."""

from __future__ import annotations

import statistics


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def percentile(samples: list[float], fraction: float) -> float:
    """The sample below which `fraction` of the samples lie (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _shown(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def report(name: str, value: float, unit: str = "", target: str = "") -> None:
    """Print `name value [unit] [(target)]` on a line of its own."""
    line = f"{name} {_shown(value)}" + (f" {unit}" if unit else "")
    print(f"{line} ({target})" if target else line, flush=True)
