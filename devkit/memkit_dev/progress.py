"""Progress for the long commands (`memkit import`, `export`): a tqdm bar on stderr when stderr
is a terminal, nothing at all when it is piped or redirected (a log stays clean); the summary
line at the end is printed either way."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import IO, Any


def on_terminal(stream: IO[str] | None = None) -> bool:
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """A bar of `total` units (None: a running count) that shows `counts` beside it."""

    def __init__(
        self,
        description: str,
        total: float | None = None,
        unit: str = "it",
        stream: IO[str] | None = None,
        scale: bool = False,
    ) -> None:
        self._bar: Any = None
        stream = stream if stream is not None else sys.stderr
        if on_terminal(stream):
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                desc=description,
                unit=unit,
                unit_scale=scale,
                file=stream,
                dynamic_ncols=True,
                leave=False,
            )

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def advance(self, amount: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(amount)

    def show(self, counts: Mapping[str, int]) -> None:
        if self._bar is not None:
            self._bar.set_postfix({k: v for k, v in counts.items() if v}, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
