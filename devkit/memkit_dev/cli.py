"""The `memkit` command: `memkit serve` runs the local stack; `memkit token` mints a
development token for it; `memkit openapi` prints the API; `memkit reindex` rebuilds the
vector index from the table; `memkit keys` manages API keys; `memkit export` and `memkit
import` move memory between stacks (and in from the Agent Memory Server or Mem0); `memkit
search` searches it; `memkit doctor` checks a deployment or the local stack (docs/cli.md)."""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from memkit_dev import doctor, keys, search, transfer


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _serve(args: argparse.Namespace) -> int:
    from memkit_dev.local.auth import key_cache_seconds
    from memkit_dev.local.gateway import Cors
    from memkit_dev.local.stack import AddressUnavailable, LocalStack, LocalStackConfig
    from memkit_dev.local.template import find_template, load_template

    template = load_template(args.template or find_template())
    try:  # before anything starts: the value the template's CorsAllowedOrigins would take
        Cors.from_template(template, args.cors_origins)
    except ValueError as exc:
        print(f"memkit serve: --cors-origins {exc}", file=sys.stderr)
        return 2
    try:  # and the template's ApiKeyCacheSeconds
        key_cache_seconds(template, args.api_key_cache)
    except ValueError as exc:
        print(f"memkit serve: --api-key-cache {exc}", file=sys.stderr)
        return 2
    try:
        iam_principals = _iam_principals(args)
    except (OSError, ValueError) as exc:
        print(f"memkit serve: --iam-credentials {exc}", file=sys.stderr)
        return 2
    config = LocalStackConfig(
        host=args.host,
        port=args.port,
        dynamodb_endpoint=args.dynamodb_endpoint,
        engine=args.engine,
        data_dir=None if args.ephemeral else args.data_dir,
        tools_dir=args.tools_dir,
        progress=True,
        table_name=args.table,
        region=args.region,
        concurrency=args.concurrency,
        template=args.template,
        log_level=args.log_level,
        metrics=args.metrics,
        cleanup_interval_seconds=args.cleanup_interval,
        auth=args.auth,
        jwt=_jwt_settings(args),
        api_key_cache_seconds=args.api_key_cache,
        iam_principals=iam_principals,
        iam_tenant_pattern=args.iam_tenant_pattern,
        tenant_claim=args.tenant_claim,
        user_claim=args.user_claim,
        cors_allowed_origins=args.cors_origins,
        vector_store=args.vector_store,
    )
    # A SIGTERM during the start (an install, an index rebuild) unwinds it like Ctrl-C:
    # start() stops what it had started (DynamoDB Local runs in a process of its own).
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        stack = LocalStack(config).start()
    except KeyboardInterrupt:
        print("memkit local stack stopped while starting", flush=True)
        return 0
    except AddressUnavailable as exc:
        print(f"memkit serve: {exc}", file=sys.stderr)
        return 2
    bearer = ' -H "authorization: Bearer $MEMKIT_TOKEN"' if stack.authorizer else ""
    if stack.config.auth == "iam":  # curl 7.75+ signs SigV4 itself
        bearer = (
            f' --aws-sigv4 "aws:amz:{args.region}:execute-api"'
            ' --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"'
        )
    print(
        f"memkit local stack on {stack.url}\n"
        f"  DynamoDB: {stack.engine} at {stack.dynamodb_endpoint}, table {args.table}\n"
        f"{_vector_banner(stack)}"
        f"  API docs: {stack.url}/v1/docs\n"
        f"  MCP: {stack.url}/mcp (docs/mcp.md)\n"
        f"{_auth_banner(stack)}"
        "Try:\n"
        f"  curl -s -X PATCH {stack.url}/v1/working-memory/demo/scratchpad{bearer} "
        "-H 'content-type: application/json' -d '{\"content\": \"likes tea\"}'\n"
        f"  curl -s {stack.url}/v1/working-memory/demo/scratchpad?render=prompt{bearer}\n"
        "Ctrl-C (or SIGTERM) stops it.",
        flush=True,
    )
    stopped = threading.Event()
    # SIGTERM (a service manager, `kill`) and SIGINT (Ctrl-C) alike: stop the pumps, the
    # functions' environments and DynamoDB Local, then exit 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    failure = None
    try:
        # A dead engine stops the stack with its reason (a service manager can restart it),
        # instead of a stack that answers 503 to everything.
        while failure is None and not stopped.wait(timeout=1.0):
            failure = stack.failure()
    finally:
        stack.stop()
    if failure is not None:
        kept = f" (the data in {args.data_dir} is kept)" if not args.ephemeral else ""
        print(f"memkit serve: {failure}; stopped: start it again{kept}", file=sys.stderr)
        return 1
    print("memkit local stack stopped", flush=True)
    return 0


def _openapi(args: argparse.Namespace) -> int:
    from memkit.api.app import openapi_json
    from memkit.handlers.api import app

    document = openapi_json(app) + "\n"
    if args.output:
        args.output.write_text(document, encoding="utf-8")
    else:
        sys.stdout.write(document)
    return 0


def _reindex(args: argparse.Namespace) -> int:
    from memkit_dev.reindex import reindex_command

    return reindex_command(args)


def _reindex_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`memkit reindex`: options override the MEMKIT_* variables of the same settings."""
    reindex = commands.add_parser(
        "reindex", help="rebuild the vector index from the table (new index, then alias switch)"
    )
    reindex.add_argument(
        "--local",
        nargs="?",
        const="",
        metavar="URL",
        help="the running local stack (`make serve`; default MEMKIT_URL, else "
        "http://127.0.0.1:8000): its table, DynamoDB and vector index, read from its health",
    )
    reindex.add_argument("--table", help="table name (MEMKIT_TABLE_NAME)")
    reindex.add_argument("--region", help="the table's region (MEMKIT_REGION, AWS_REGION)")
    reindex.add_argument(
        "--dynamodb-endpoint", metavar="URL", help="a DynamoDB-compatible endpoint (default AWS)"
    )
    reindex.add_argument(
        "--opensearch-endpoint", metavar="URL", help="the vector index (MEMKIT_OPENSEARCH_ENDPOINT)"
    )
    reindex.add_argument(
        "--opensearch-flavour",
        choices=["domain", "serverless"],
        help="an OpenSearch domain or a Serverless collection (MEMKIT_OPENSEARCH_FLAVOUR)",
    )
    reindex.add_argument(
        "--opensearch-auth",
        choices=["sigv4", "none"],
        help="how requests to the index are signed (none: the local stack's)",
    )
    reindex.add_argument("--index", help="the index name searches use (becomes an alias)")
    reindex.add_argument(
        "--vector-table",
        help="VectorStore dynamodb: the vector table, rebuilt as its next generation "
        "(MEMKIT_VECTOR_TABLE)",
    )
    reindex.add_argument(
        "--embedder",
        choices=["local", "titan", "cohere"],
        help="the embedding provider of the new index (MEMKIT_EMBEDDER)",
    )
    reindex.add_argument("--embedding-model", help="its model id (MEMKIT_EMBEDDING_MODEL)")
    reindex.add_argument(
        "--embedding-dimensions", type=int, help="its vectors' size (MEMKIT_EMBEDDING_DIMENSIONS)"
    )
    reindex.add_argument("--segments", type=int, help="parallel Scan segments (default 4)")
    reindex.add_argument("--page-size", type=int, help="items a Scan page reads (default 500)")
    reindex.add_argument("--dry-run", action="store_true", help="count what would be indexed")
    reindex.set_defaults(run=_reindex)


def _jwt_settings(args: argparse.Namespace) -> Any:
    if args.auth != "jwt":
        return None
    from memkit_dev.local.auth import JwtSettings

    # The development key pair stays in the data folder even for an ephemeral run: it is
    # not data, and `memkit token` signs with it.
    return JwtSettings(
        jwks=args.jwks,
        issuer=args.issuer,
        audience=args.audience,
        data_dir=args.data_dir,
        scope_prefix=args.scope_prefix,
    )


def _iam_principals(args: argparse.Namespace) -> tuple[Any, ...]:
    """`--auth iam`: the principals of --iam-credentials, or the development IAM user (its
    key kept in the data folder even for an ephemeral run, as the JWT key pair is)."""
    if args.auth != "iam":
        return ()
    from memkit_dev.local.auth import dev_principal, load_principals

    if args.iam_credentials is not None:
        return tuple(load_principals(args.iam_credentials))
    return (dev_principal(args.data_dir),)


def _vector_banner(stack: Any) -> str:
    """The start banner's line about the vector index."""
    if stack.vectors is not None:
        return (
            f"  Vector index: DynamoDB table {stack.config.vector_table} "
            f"(VectorStore dynamodb) at {stack.vectors.url}\n"
        )
    where = stack.opensearch.url if stack.opensearch else "in process"
    return f"  Vector index: {where} (memkit reindex --local rebuilds it)\n"


def _auth_banner(stack: Any) -> str:
    """What the start banner says of identity: the warning, or a credential to call with."""
    from memkit_dev.local.auth import IamAuthorizer

    if stack.authorizer is None:
        return "  Auth: none (every caller is an admin of tenant default; local use only)\n"
    if isinstance(stack.authorizer, IamAuthorizer):
        first = stack.authorizer.principals[0]
        return (
            f"  Auth: iam (SigV4 for service execute-api, region {stack.config.region}); "
            f"the access key of {first.user_arn} (tenant {first.account_id}):\n"
            f"  export AWS_ACCESS_KEY_ID={first.access_key_id} "
            f"AWS_SECRET_ACCESS_KEY={first.secret_access_key}; unset AWS_SESSION_TOKEN\n"
        )
    if stack.dev_key is not None:
        return (
            "  Auth: apikey (the API-key authorizer function); a key for user dev, made now "
            "(more with `memkit keys create --dynamodb-endpoint ...`):\n"
            f"  export MEMKIT_TOKEN={stack.dev_key}\n"
        )
    token = stack.authorizer.dev_token("dev", "default", ["memory:read", "memory:write"])
    if token is None:
        return "  Auth: jwt, tokens of the key set given (--jwks)\n"
    return (
        "  Auth: jwt with the development key pair; a token for user dev (24 h; more with "
        "`memkit token`):\n"
        f"  export MEMKIT_TOKEN={token}\n"
    )


def _token(args: argparse.Namespace) -> int:
    """`memkit token`: a development token for `memkit serve --auth jwt` (its key pair)."""
    from memkit.identity import SCOPES
    from memkit_dev.local.auth import DEV_KEY_FILE, mint

    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
    if args.admin:
        scopes.append("memory:admin")
    # A scope is memkit's own name, bare or after a prefix (`memkit serve --scope-prefix`).
    unknown = [s for s in scopes if not any(s.endswith(known) for known in SCOPES)]
    if unknown or not scopes:
        print(
            f"memkit token: unknown scope {', '.join(unknown) or '(none given)'}; "
            f"the scopes are {', '.join(SCOPES)} (after --scope-prefix if serve uses one)",
            file=sys.stderr,
        )
        return 2
    seconds = args.hours * 3600
    if not math.isfinite(seconds) or seconds < 1:
        print("memkit token: --hours must be positive (at least one second)", file=sys.stderr)
        return 2
    folder = args.data_dir.resolve()
    if not (folder / DEV_KEY_FILE).is_file():
        # A new key pair that no running `memkit serve` knows: its tokens would get a bare 401.
        print(
            f"memkit token: no key pair in {folder}: made a new one; `memkit serve` accepts "
            "these tokens only when started with the same --data-dir",
            file=sys.stderr,
        )
    else:
        print(f"memkit token: signed with the key pair in {folder}", file=sys.stderr)
    print(mint(args.data_dir, args.sub, args.tenant, scopes, seconds=int(seconds)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memkit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the local stack (no AWS account needed)")
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)"
    )
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000; 0: any)")
    serve.add_argument(
        "--dynamodb-endpoint",
        metavar="URL",
        help="a DynamoDB-compatible endpoint to use instead of starting one (the work queues "
        "stay on moto's SQS)",
    )
    serve.add_argument(
        "--engine",
        choices=["auto", "dynamodb-local", "moto"],
        default="auto",
        help="what serves DynamoDB: DynamoDB Local (needs Java 17+; installed on first use), "
        "moto (in memory, small data only), or auto: DynamoDB Local when it can run, else moto",
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".memkit"),
        help="where DynamoDB Local keeps the data across restarts, and the development keys "
        "(default .memkit of the current directory)",
    )
    serve.add_argument(
        "--ephemeral", action="store_true", help="keep the data in memory: a throwaway run"
    )
    serve.add_argument(
        "--tools-dir",
        type=Path,
        default=Path(".tools"),
        help="where DynamoDB Local is installed on first use (default .tools of the current "
        "directory)",
    )
    serve.add_argument("--table", default="memkit-local", help="table name (created if absent)")
    serve.add_argument(
        "--vector-store",
        choices=["opensearch", "dynamodb"],
        default="opensearch",
        help="the vector index: a loopback OpenSearch (rebuilt from the table on start), or "
        "dynamodb: VectorStore dynamodb's table with its vector index (kept with the data)",
    )
    serve.add_argument(
        "--region", default="us-east-1", help="the region the functions see (default us-east-1)"
    )
    serve.add_argument(
        "--concurrency", type=int, default=4, help="API function execution environments"
    )
    serve.add_argument("--template", type=Path, help="template.yaml (default: found upwards)")
    serve.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING"],
        help="the functions' log level (POWERTOOLS_LOG_LEVEL; default WARNING)",
    )
    serve.add_argument("--metrics", action="store_true", help="print EMF metrics to stdout")
    serve.add_argument(
        "--cleanup-interval",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="run the scheduled cleanup (expiry...) this often; 0 turns it off (default 60)",
    )
    serve.add_argument(
        "--auth",
        choices=["none", "jwt", "iam", "apikey"],
        default="jwt",
        help="jwt (default): bearer tokens verified as API Gateway's JWT authorizer does; "
        "iam: SigV4 for service execute-api, verified as API Gateway's AWS_IAM does, with "
        "a development access key (or --iam-credentials); "
        "apikey: memkit's keys, checked by the template's authorizer function; none: no "
        "identity (every caller an admin; local use only)",
    )
    serve.add_argument(
        "--api-key-cache",
        type=int,
        metavar="SECONDS",
        help="apikey: how long the gateway keeps a key's answer, so how long a revoked key "
        "still works (the template's ApiKeyCacheSeconds, which the functions are told too; "
        "0: no cache, a revoked key is refused at once; default: the template's, 300)",
    )
    serve.add_argument(
        "--iam-credentials",
        type=Path,
        metavar="FILE",
        help='iam: the principals the gateway knows, as JSON {"principals": [{"access_key_id", '
        '"secret_access_key", "account_id", "user_arn", "user_id"}, ...]} (default: a '
        "development IAM user, its key kept in the data folder's dev-iam-credentials.json)",
    )
    serve.add_argument(
        "--iam-tenant-pattern",
        metavar="REGEX",
        help="iam: a regular expression with a (?P<tenant>...) group matched against the "
        "principal's ARN (the template's IamTenantPattern; default: the account is the tenant)",
    )
    serve.add_argument(
        "--jwks", metavar="FILE|URL", help="jwt: the key set (default: a development key pair)"
    )
    serve.add_argument("--issuer", default="memkit-local", help="jwt: the required iss")
    serve.add_argument(
        "--audience",
        default="memkit",
        help="jwt: the audiences accepted, comma-separated (the aud claim, or client_id for a "
        "Cognito access token)",
    )
    serve.add_argument(
        "--scope-prefix",
        default="",
        metavar="PREFIX",
        help="jwt: what the issuer puts before memkit's scopes (the template's JwtScopePrefix, "
        "e.g. memkit/ for Cognito); only the scopes exactly so named count (default: none, "
        "the bare memory:read, as the development tokens carry them)",
    )
    serve.add_argument("--tenant-claim", default="custom:tenant", help="jwt: the tenant's claim")
    serve.add_argument("--user-claim", default="sub", help="jwt: the user's claim")
    serve.add_argument(
        "--cors-origins",
        default="",
        metavar="ORIGINS",
        help="web pages that may call the API from a browser: their origins, comma-separated "
        "(http://localhost:5173,https://app.example.com), or * for any; the gateway then "
        "answers preflights itself, as the template's CorsAllowedOrigins does on AWS "
        "(default: none, no CORS)",
    )
    serve.set_defaults(run=_serve)
    token = commands.add_parser(
        "token", help="mint a development token for `memkit serve --auth jwt`"
    )
    token.add_argument("--sub", default="dev", help="the user (default dev)")
    token.add_argument("--tenant", default="default", help="the tenant (default default)")
    token.add_argument(
        "--scopes", default="memory:read,memory:write", help="comma-separated scopes"
    )
    token.add_argument("--admin", action="store_true", help="add memory:admin")
    token.add_argument(
        "--hours", type=float, default=24.0, help="how long it is valid (default 24)"
    )
    token.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".memkit"),
        help="where the key pair is kept: memkit serve's (default .memkit of the current "
        "directory)",
    )
    token.set_defaults(run=_token)
    openapi = commands.add_parser("openapi", help="print the OpenAPI document of the HTTP API")
    openapi.add_argument("--output", type=Path, help="write it to this file")
    openapi.set_defaults(run=_openapi)
    _reindex_parser(commands)
    keys.add_parser(commands)
    transfer.add_parsers(commands)
    search.add_parser(commands)
    doctor.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
