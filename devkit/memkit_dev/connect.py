"""How the commands that call the API (`memkit import`, `export`, `search`, `doctor`) find it
and prove who they are: the SDK's own client (memkit.client), configured as `from_env` does
(MEMKIT_URL, MEMKIT_TOKEN) and overridden by `--url`, `--token` or `--sigv4`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any
from urllib.parse import urlsplit

from memkit.client import MemkitClient, SigV4
from memkit.client.api import DEFAULT_URL
from memkit.client.auth import region_of
from memkit.client.errors import APIConnectionError, APIError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--url, --token, --sigv4 [--region], --timeout."""
    group = parser.add_argument_group("connection (default: MEMKIT_URL and MEMKIT_TOKEN)")
    group.add_argument(
        "--url", help=f"the API's base URL (MEMKIT_URL; default {DEFAULT_URL}, `make serve`)"
    )
    group.add_argument(
        "--token",
        help="a bearer token: `memkit token`, a Cognito access token or an API key mk_... "
        "(MEMKIT_TOKEN; prefer the variable: a command line is visible to other users)",
    )
    group.add_argument(
        "--sigv4",
        action="store_true",
        help="sign requests with AWS credentials (AuthMode=iam) instead of a token",
    )
    group.add_argument(
        "--region",
        help="--sigv4: the region (default: from the URL's execute-api host, else AWS_REGION or "
        "AWS_DEFAULT_REGION)",
    )
    group.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per request (default 60)"
    )


def url_of(args: argparse.Namespace) -> str:
    return str(args.url or os.environ.get("MEMKIT_URL") or DEFAULT_URL)


def token_of(args: argparse.Namespace) -> str | None:
    if args.sigv4:
        return None
    token = args.token or os.environ.get("MEMKIT_TOKEN")
    return str(token) if token else None


def sigv4_region(args: argparse.Namespace, url: str) -> str | None:
    """The region --sigv4 signs for: --region, the URL's execute-api host, else AWS's own
    configuration (AWS_REGION, AWS_DEFAULT_REGION, the profile's)."""
    from memkit_dev import aws

    host = urlsplit(url).hostname or ""
    return args.region or region_of(host) or aws.configured_region()


def sigv4_problem(args: argparse.Namespace, url: str) -> str | None:
    """With --sigv4, what keeps the requests from being signed (no credentials, no region),
    found before the first one; None when nothing does (or no --sigv4)."""
    if not args.sigv4:
        return None
    from memkit_dev import aws

    missing_credentials = aws.credentials_problem()
    problems = [] if missing_credentials is None else [missing_credentials]
    if sigv4_region(args, url) is None:
        problems.append(
            f"no AWS region to sign for: {urlsplit(url).hostname} is not an execute-api host "
            "that names one; give --region, or set AWS_REGION or AWS_DEFAULT_REGION"
        )
    return f"--sigv4: {'; and '.join(problems)}" if problems else None


def client_of(args: argparse.Namespace, url: str | None = None, **options: Any) -> MemkitClient:
    """The SDK client the arguments describe (retries and batching are the SDK's)."""
    if args.sigv4:
        options["auth"] = SigV4(region=sigv4_region(args, url or url_of(args)))
    elif (token := token_of(args)) is not None:
        options["token"] = token
    return MemkitClient(url or url_of(args), timeout=args.timeout, **options)


def describe(error: Exception) -> str:
    """An SDK error in one line: the status, the API's code and detail, the fields."""
    if isinstance(error, APIError):
        return str(error)
    if isinstance(error, APIConnectionError):
        return f"no answer from the API ({error})"
    return f"{type(error).__name__}: {error}"


def fail(message: str) -> int:
    """Print a one-line error on stderr; the exit status of a command that could not run."""
    print(f"memkit: {message}", file=sys.stderr)
    return 2
