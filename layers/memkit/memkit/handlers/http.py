"""What the HTTP API's functions (api, mcp) do after every invocation."""

from __future__ import annotations

import gc


def end_of_cold_start() -> None:
    """Resume cyclic GC (paused by the entry module), the startup heap frozen out of its way."""
    gc.freeze()
    gc.enable()


def after_invocation() -> None:
    """End the cold start's GC pause after the first invocation."""
    if not gc.isenabled():
        end_of_cold_start()
