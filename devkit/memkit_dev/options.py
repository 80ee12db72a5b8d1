"""Settings for a `memkit` command: the MEMKIT_* variables, each overridden by its option."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

S = TypeVar("S")


def settings_from(
    load: Callable[[dict[str, str]], S], options: dict[str, Any], command: str
) -> S | None:
    """Settings `load`ed from the environment, with each option given (not None) in place of
    its MEMKIT_<NAME> variable; None, with the bad settings named on stderr, when they do not
    validate (the settings' own names: each is an option's)."""
    from pydantic import ValidationError

    from memkit.config import ENV_PREFIX

    given = {f"{ENV_PREFIX}{k.upper()}": str(v) for k, v in options.items() if v is not None}
    try:
        return load({**os.environ, **given})
    except ValidationError as exc:
        names = sorted({str(error["loc"][0]) for error in exc.errors() if error["loc"]})
        sys.stderr.write(f"{command}: invalid or missing settings: {', '.join(names)}\n")
        return None
