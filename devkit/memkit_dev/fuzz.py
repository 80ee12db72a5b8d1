"""`python -m memkit_dev.fuzz`: schemathesis against the local stack, with valid tokens.

The stack runs in this process (moto, in memory, `--auth jwt` with a development key pair in
a scratch folder); schemathesis (its own venv: `make fuzz` installs it) reads the served
OpenAPI document and sends generated requests to every operation twice over: as an admin of
the default tenant (so routes that name users are reached, not refused), then as a plain user
(read and write scopes: what a user's agent holds), with schemathesis' `ignored_auth` check as
well (every operation that declares a security scheme must refuse a request without a
credential, or with a wrong one). No answer may be a server error or break the documented
response schema. Seeded, so a run is repeatable. Before it, the schema bombs (`schema_bombs`:
schemas and content whose checks once grew quadratically or took seconds to store) must each
get their expected answer, in time.

    python -m memkit_dev.fuzz --schemathesis .tools/schemathesis/bin/st --examples 10 --seed 1
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHECKS = "not_a_server_error,response_schema_conformance"
# The plain user's pass also checks that no operation serves a request without credentials.
USER_CHECKS = f"{CHECKS},ignored_auth"
BOMB_SESSION = "fuzz-schema-bombs"
# What an answer to a bomb may take: far over what a bounded check needs, far under 25 s.
BOMB_SECONDS = 20.0


def _bombs() -> list[tuple[str, str, Any, int]]:
    """(method, path, body, expected status) of each schema bomb, in order."""
    pad = f"/v1/working-memory/{BOMB_SESSION}/scratchpad"
    unique = {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}
    enum = {"type": "array", "items": {"enum": [{"id": n} for n in range(3_000)]}}
    wide = {"type": "object", "allOf": [{"type": "object"} for _ in range(5_000)]}
    many = {"properties": {f"p{n}": {"type": "string"} for n in range(6_000)}}
    objects = [{"id": n} for n in range(5_000)]
    return [
        ("PUT", "/v1/profiles/fuzz-wide", {"schema": wide}, 422),
        ("PUT", "/v1/profiles/fuzz-many", {"schema": many}, 422),
        ("PUT", "/v1/profiles/fuzz-unique", {"schema": unique, "max_tokens": 64_000}, 200),
        ("PUT", f"{pad}?profile=fuzz-unique", {"content": {"a": objects}}, 200),
        ("PATCH", pad, {"content": {"a": [{"id": 7.0}]}}, 422),
        ("GET", pad, None, 200),
        ("GET", f"/v1/working-memory/{BOMB_SESSION}", None, 200),
        (
            "PUT",
            "/v1/profiles/fuzz-enum",
            {"schema": {"type": "object", "properties": {"a": enum}}, "max_tokens": 64_000},
            200,
        ),
        (
            "PUT",
            f"/v1/working-memory/{BOMB_SESSION}-enum/scratchpad?profile=fuzz-enum",
            {"content": {"a": objects[:3_000]}},
            200,
        ),
    ]


def schema_bombs(url: str, token: str) -> list[str]:
    """Send each schema bomb to the API at `url`: what went wrong (an unexpected status, a
    5xx, no answer within BOMB_SECONDS), an empty list when every one was answered."""
    import json
    import urllib.error
    import urllib.request

    failures = []
    for method, path, body, expected in _bombs():
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 (the local stack's own URL)
            url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {token}", "content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=BOMB_SECONDS) as response:  # noqa: S310
                status = response.status
        except urllib.error.HTTPError as refused:
            status = refused.code
        except OSError as exc:  # a timeout or a lost connection
            failures.append(f"{method} {path}: no answer ({type(exc).__name__})")
            continue
        if status != expected:
            failures.append(f"{method} {path}: {status}, expected {expected}")
    return failures


PHASES = "examples,coverage,fuzzing"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schemathesis", type=Path, required=True, help="the `st` executable")
    parser.add_argument("--examples", type=int, default=10, help="cases per operation")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stateful", action="store_true", help="also run the stateful phase")
    parser.add_argument("--template", type=Path, default=Path("template.yaml"))
    args = parser.parse_args(argv)

    from memkit_dev.local.auth import JwtSettings, mint
    from memkit_dev.local.stack import LocalStack, LocalStackConfig

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as scratch:
        keys = Path(scratch)
        config = LocalStackConfig(
            port=0,
            concurrency=2,
            engine="moto",
            template=args.template,
            auth="jwt",
            jwt=JwtSettings(data_dir=keys),
            cleanup_interval_seconds=0,
        )
        admin = mint(keys, "fuzz", "default", ["memory:read", "memory:write", "memory:admin"])
        user = mint(keys, "fuzz-user", "default", ["memory:read", "memory:write"])
        with LocalStack(config) as stack:
            failures = schema_bombs(stack.url, admin)
            for failure in failures:
                print(f"schema bomb: {failure}", flush=True)
            if failures:
                return 1
            phases = PHASES + (",stateful" if args.stateful else "")
            for who, token, checks in (("an admin", admin, CHECKS), ("a user", user, USER_CHECKS)):
                print(
                    f"fuzzing the local stack at {stack.url} as {who} (seed {args.seed})",
                    flush=True,
                )
                command = [
                    str(args.schemathesis),
                    "run",
                    f"{stack.url}/v1/openapi.json",
                    "--header",
                    f"Authorization: Bearer {token}",
                    "--checks",
                    checks,
                    "--phases",
                    phases,
                    "--max-examples",
                    str(args.examples),
                    "--seed",
                    str(args.seed),
                    "--workers",
                    "1",
                ]
                ran = subprocess.run(command, check=False)  # noqa: S603 (our st)
                if ran.returncode != 0:
                    return ran.returncode
            return 0


if __name__ == "__main__":
    sys.exit(main())
