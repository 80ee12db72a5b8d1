"""`python -m memkit_dev.fuzz`: schemathesis against the local stack, with a valid token.

The stack runs in this process (moto, in memory, `--auth jwt` with a development key pair in
a scratch folder); schemathesis (its own venv: `make fuzz` installs it) reads the served
OpenAPI document and sends generated requests to every operation as an admin of the default
tenant (so routes that name users are reached, not refused): no answer may be a server error
or break the documented response schema. Seeded, so a run is repeatable.

    python -m memkit_dev.fuzz --schemathesis .tools/schemathesis/bin/st --examples 10 --seed 1
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKS = "not_a_server_error,response_schema_conformance"
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
        token = mint(keys, "fuzz", "default", ["memory:read", "memory:write", "memory:admin"])
        with LocalStack(config) as stack:
            print(f"fuzzing the local stack at {stack.url} (seed {args.seed})", flush=True)
            phases = PHASES + (",stateful" if args.stateful else "")
            command = [
                str(args.schemathesis),
                "run",
                f"{stack.url}/v1/openapi.json",
                "--header",
                f"Authorization: Bearer {token}",
                "--checks",
                CHECKS,
                "--phases",
                phases,
                "--max-examples",
                str(args.examples),
                "--seed",
                str(args.seed),
                "--workers",
                "1",
            ]
            return subprocess.run(command, check=False).returncode  # noqa: S603 (our st)


if __name__ == "__main__":
    sys.exit(main())
