"""`memkit keys create|list|revoke`: the API keys of a tenant (AuthMode=apikey), written to
the table with the operator's own AWS credentials (memkit.service.api_keys).

`create` prints the key once, alone on stdout (so `KEY=$(memkit keys create ...)` works),
and what it grants on stderr; the table keeps only its hash, so a lost key cannot be shown
again: create another and revoke the lost one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from memkit.models.api_keys import SCOPES, ApiKey
from memkit_dev import aws

if TYPE_CHECKING:
    from memkit.config import ApiKeySettings

COMMAND = "memkit keys"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`memkit keys` and its subcommands; table options as `memkit reindex` takes them."""
    table = argparse.ArgumentParser(add_help=False)
    table.add_argument("--table", help="table name (MEMKIT_TABLE_NAME)")
    table.add_argument(
        "--region",
        help="the table's region (default AWS_REGION, else AWS_DEFAULT_REGION or the profile's)",
    )
    table.add_argument(
        "--dynamodb-endpoint", metavar="URL", help="a DynamoDB-compatible endpoint (default AWS)"
    )
    table.add_argument("--tenant", required=True, help="the tenant the keys belong to")

    keys = commands.add_parser("keys", help="create, list and revoke API keys (AuthMode=apikey)")
    actions = keys.add_subparsers(dest="keys_command", required=True)
    create = actions.add_parser(
        "create", parents=[table], help="create a key and print it (once: only its hash is kept)"
    )
    create.add_argument(
        "--scopes",
        required=True,
        help=f"comma-separated, of {', '.join(SCOPES)}",
    )
    create.add_argument(
        "--user", help="the user the key acts as (required unless the scopes hold memory:admin)"
    )
    create.add_argument("--name", help="a label shown in listings (e.g. where the key is used)")
    create.add_argument("--expires-days", type=int, metavar="N", help="expire after N days")
    create.add_argument("--json", action="store_true", help="print the key and record as JSON")
    listing = actions.add_parser(
        "list", parents=[table], help="the tenant's keys (never the keys themselves)"
    )
    listing.add_argument("--json", action="store_true", help="one JSON array")
    revoke = actions.add_parser("revoke", parents=[table], help="revoke a key by its id")
    revoke.add_argument("key_id", help="the key's id (`memkit keys list`; mk_<key id>_...)")
    for parser in (create, listing, revoke):
        parser.set_defaults(run=keys_command)


def keys_command(args: Any) -> int:
    """Run one `memkit keys` subcommand: 0 done, 1 refused or failed, 2 bad arguments."""
    from memkit.config import ApiKeySettings
    from memkit.errors import MemkitError, NotFound, ValidationFailed
    from memkit.handlers.wiring import api_keys_for
    from memkit_dev.options import settings_from

    options = {
        "table_name": args.table,
        "region": args.region,
        "dynamodb_endpoint": args.dynamodb_endpoint,
    }
    settings = settings_from(ApiKeySettings.from_env, options, COMMAND)
    if settings is None:
        return 2
    settings, problem = _with_aws(settings, args.region)
    if problem is not None:
        return _fail(problem, 1)
    service = api_keys_for(settings)
    try:
        if args.keys_command == "create":
            scopes = [s.strip() for s in args.scopes.replace(" ", ",").split(",") if s.strip()]
            new = service.create(args.tenant, scopes, args.user, args.name, args.expires_days)
            _created(new.plain, new.key, args.json, sys.stdout, sys.stderr)
        elif args.keys_command == "list":
            _listed(service.keys_of(args.tenant), args.json, sys.stdout)
        else:
            key = service.revoke(args.tenant, args.key_id.removeprefix("mk_"))
            sys.stdout.write(
                f"revoked key {key.key_id} of tenant {key.tenant} ({key.revoked_at})\n"
            )
    except ValidationFailed as exc:
        problems = "; ".join(f"{p.field}: {p.reason}" for p in exc.errors)
        return _fail(f"{exc.detail}: {problems}", 2)
    except NotFound as exc:
        return _fail(exc.detail, 1)
    except MemkitError as exc:  # the table refused or is unreachable
        return _fail(aws.call_problem(exc, _table_of(settings)) or exc.detail, 1)
    return 0


def _with_aws(settings: ApiKeySettings, region: str | None) -> tuple[ApiKeySettings, str | None]:
    """`settings` in the region AWS's tools would use when none was given, and what keeps
    them from reaching the table, checked before the first call: the local stack's DynamoDB
    (a loopback endpoint) takes any credentials, so it gets stand-ins when there are none."""
    if aws.is_local(settings.dynamodb_endpoint):
        aws.use_local_credentials()
        return settings, None
    if not (region or os.environ.get("MEMKIT_REGION")):
        found = aws.configured_region()
        if found is None:
            return settings, (
                "no AWS region: give --region (the table's), or set AWS_REGION or "
                "AWS_DEFAULT_REGION"
            )
        settings = settings.model_copy(update={"region": found})
    return settings, aws.credentials_problem()


def _table_of(settings: ApiKeySettings) -> str:
    where = settings.dynamodb_endpoint or f"DynamoDB in {settings.region}"
    return f"table {settings.table_name} at {where}"


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"{COMMAND}: {message}\n")
    return code


def record(key: ApiKey, now: float) -> dict[str, Any]:
    """A key's record as listings show it (never the key)."""
    from memkit.times import now_iso

    return {
        "key_id": key.key_id,
        "name": key.name,
        "tenant": key.tenant,
        "user_id": key.user_id,
        "scopes": list(key.scopes),
        "status": key.status(now),
        "created_at": key.created_at,
        "last_used": key.last_used,
        "expires_at": None if key.expires_at is None else now_iso(key.expires_at),
        "revoked_at": key.revoked_at,
    }


def _created(plain: str, key: ApiKey, as_json: bool, out: TextIO, err: TextIO) -> None:
    import time

    shown = record(key, time.time())
    if as_json:
        out.write(json.dumps({"key": plain, **shown}) + "\n")
        return
    out.write(plain + "\n")
    user = f"user {key.user_id}" if key.user_id else "no user (names users per request)"
    expires = shown["expires_at"] or "never"
    err.write(
        f"created key {key.key_id} of tenant {key.tenant}: {user}, scopes "
        f"{' '.join(key.scopes)}, expires {expires}.\n"
        "This is the only time the key is shown: keep it in a secret store.\n"
    )


COLUMNS = ("key_id", "name", "status", "scopes", "user_id", "created_at", "last_used")


def _listed(keys: list[ApiKey], as_json: bool, out: TextIO) -> None:
    import time

    now = time.time()
    records = [record(key, now) for key in keys]
    if as_json:
        out.write(json.dumps(records) + "\n")
        return
    rows = [[c.upper().replace("_", " ") for c in (*COLUMNS, "expires_at")]]
    for shown in records:
        cells = [*(shown[c] for c in COLUMNS), shown["expires_at"]]
        cells[COLUMNS.index("scopes")] = ",".join(shown["scopes"])
        rows.append(["-" if c in (None, "") else str(c) for c in cells])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")
