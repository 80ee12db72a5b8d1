"""`memkit doctor`: is this memkit working? Checks a deployment or the local stack, one line
each, `ok`, `warn`, `fail` or `skip` with the reason; the exit status is 0 unless one failed.

- health: GET /v1/health answers; memkit's version, the server's clock against this one's, and
  on the local stack what serves DynamoDB and whether its stream pumps keep up;
- auth: the credential is accepted for a read, and whom it names (a JWT's claims, read here;
  the API has no route that says who the caller is, so a 401 or 403 is explained instead);
- indexing: an end-to-end probe: a record written in namespace memkit-doctor (the caller's
  own), the time until a search finds it, then deleted (`--no-probe` skips it);
- dead letters: with `--stack-name` and AWS credentials, the messages waiting in each of the
  stack's dead-letter queues (its outputs name them); on the local stack, its own count.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memkit.client import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    MemkitClient,
    MemkitClientError,
    PermissionDeniedError,
)
from memkit.ids import new_ulid
from memkit.models.api import Health
from memkit_dev import connect

DOCTOR_NAMESPACE = "memkit-doctor"
# The local stack's batching window is a second; a deployment's is the template's.
SLOW_INDEXING_SECONDS = 10.0
CLOCK_SKEW_SECONDS = 60.0
TOKEN_EXPIRY_WARNING_SECONDS = 3600.0
OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"

DESCRIPTION = __doc__


@dataclass(frozen=True)
class Result:
    check: str
    status: str
    reason: str

    def line(self) -> str:
        return f"{self.status:<5} {self.check:<13} {self.reason}"


@dataclass
class Findings:
    """What the checks learnt that the next ones use."""

    health: Health | None = None
    # Whether a read with the credential was accepted.
    authorized: bool = False
    outputs: dict[str, str] = field(default_factory=dict)
    stack_error: str | None = None


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = commands.add_parser(
        "doctor",
        help="check a deployment or the local stack: health, auth, indexing lag, dead letters",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    doctor.add_argument(
        "--stack-name",
        help="the CloudFormation stack (AWS credentials needed): its dead-letter queues are "
        "read, and its ApiUrl output is the URL when --url and MEMKIT_URL are not given",
    )
    doctor.add_argument(
        "--no-probe",
        action="store_true",
        help="skip the indexing probe (it writes one record in namespace memkit-doctor, "
        "waits until a search finds it, and deletes it)",
    )
    doctor.add_argument(
        "--probe-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long the probe waits for its record to be searchable (default 60)",
    )
    connect.add_arguments(doctor)
    doctor.set_defaults(run=doctor_command)


def doctor_command(args: argparse.Namespace, aws: Any = None) -> int:
    """Run every check, printing each as it ends. `aws`: a boto3 session (tests pass one)."""
    findings = Findings()
    if args.stack_name:
        findings.outputs, findings.stack_error = stack_outputs(args.stack_name, args.region, aws)
    url = args.url or _env_url() or findings.outputs.get("ApiUrl") or connect.url_of(args)
    problem = connect.sigv4_problem(args, url)
    if problem is not None:  # before any check: each would fail for the same reason
        return connect.fail(f"doctor {problem}")
    results: list[Result] = []

    def run(check: Callable[[], Result]) -> None:
        result = check()
        results.append(result)
        print(result.line(), flush=True)

    with connect.client_of(args, url=url) as client:
        run(lambda: check_health(client, findings))
        run(lambda: check_auth(client, args, findings))
        run(lambda: check_indexing(client, args, findings))
    run(lambda: check_dead_letters(args, findings, aws))
    return 1 if any(r.status == FAIL for r in results) else 0


def _env_url() -> str | None:
    import os

    return os.environ.get("MEMKIT_URL") or None


# -- health ------------------------------------------------------------------------------------


def check_health(client: MemkitClient, findings: Findings) -> Result:
    started = time.monotonic()
    try:
        health = client.health()
    except APIConnectionError as error:
        return Result(
            "health",
            FAIL,
            f"no answer at {client.base_url} ({error}): is it running (`make "
            "serve`), and is --url or MEMKIT_URL right?",
        )
    except APIError as error:
        return Result("health", FAIL, f"GET /v1/health answered {error}")
    except MemkitClientError as error:  # the request could not be made (signed, sent)
        return Result("health", FAIL, f"GET /v1/health: {connect.describe(error)}")
    findings.health = health
    took = (time.monotonic() - started) * 1000
    parts = [f"memkit {health.version or '(version not said)'} at {client.base_url}, {took:.0f} ms"]
    status = OK
    skew = health.now / 1000 - time.time()
    if abs(skew) > CLOCK_SKEW_SECONDS:
        status = WARN
        parts.append(
            f"the server's clock is {skew:+.0f} s from this machine's (messages stamped more "
            "than 300 s ahead are refused; tokens' expiry is judged by the server)"
        )
    local = health.local
    if local is not None:
        pumps = local.get("stream_pumps") or {}
        states = ", ".join(f"{name} {pump.get('state')}" for name, pump in pumps.items())
        parts.append(f"local stack on {local.get('dynamodb')}; stream pumps: {states or 'none'}")
        stalled = [name for name, pump in pumps.items() if pump.get("state") == "stalled"]
        if stalled:
            status = FAIL
            parts.append(f"stalled: {', '.join(stalled)} (records wait and no batch ends)")
    return Result("health", status, "; ".join(parts))


# -- auth --------------------------------------------------------------------------------------


def check_auth(client: MemkitClient, args: argparse.Namespace, findings: Findings) -> Result:
    if findings.health is None:
        return Result("auth", SKIP, "the API did not answer")
    token = connect.token_of(args)
    claims = jwt_claims(token) if token else None
    try:
        client.list_sessions(limit=1)
    except AuthenticationError as error:
        if args.sigv4:
            reason = "the signature was refused: the credentials' principal, their region"
        elif token is None:
            reason = (
                "no credential was sent: set MEMKIT_TOKEN (`make serve` prints one; "
                "`memkit token` mints more) or pass --sigv4 for AuthMode=iam"
            )
        elif claims is not None and _expired(claims):
            reason = f"the token expired {_ago(claims['exp'])}: get a new one"
        else:
            reason = (
                "the credential was refused: a token of another issuer or audience, signed "
                "by another key, or an unknown or revoked API key"
            )
        return Result("auth", FAIL, f"401 {error.detail}: {reason}")
    except PermissionDeniedError as error:
        return Result(
            "auth",
            FAIL,
            f"403: the credential is valid but may not read ({error.detail}): it needs the "
            "memory:read scope",
        )
    except MemkitClientError as error:
        return Result("auth", FAIL, f"a read failed: {connect.describe(error)}")
    findings.authorized = True
    if args.sigv4:
        return Result("auth", OK, f"AWS credentials accepted ({_aws_principal(args.region)})")
    if token is None:
        return Result(
            "auth",
            WARN,
            "no credential was sent and the API answered: it checks none (AuthMode none, every "
            "caller an admin: local use and private networks only)",
        )
    if claims is None:
        kind = "an API key" if token.startswith("mk_") else "an opaque token"
        return Result(
            "auth",
            OK,
            f"{kind} accepted for reads (its tenant, user and scopes are the server's to know: "
            "`memkit keys list` shows a key's)",
        )
    return _jwt_result(claims)


def _jwt_result(claims: dict[str, Any]) -> Result:
    scopes = str(claims.get("scope") or " ".join(claims.get("scp") or []))
    tenants = {k: v for k, v in claims.items() if "tenant" in k.lower()}
    tenant = ", ".join(f"{v} ({k})" for k, v in tenants.items()) or "default (no tenant claim)"
    user = claims.get("sub", "(no sub)")
    parts = [f"a JWT for user {user}, tenant {tenant}, scopes {scopes or '(none)'}"]
    status = OK
    expires = claims.get("exp")
    if isinstance(expires, int | float):
        left = expires - time.time()
        parts.append(f"expires in {left / 3600:.1f} h")
        if left < TOKEN_EXPIRY_WARNING_SECONDS:
            status = WARN
    if "memory:write" not in scopes and "memory:admin" not in scopes:
        status = WARN
        parts.append("no memory:write: it cannot import or write memory")
    parts.append("claims read from the token; the gateway verified it")
    return Result("auth", status, "; ".join(parts))


def jwt_claims(token: str) -> dict[str, Any] | None:
    """A JWT's claims, read without checking its signature (the gateway did), or None when
    the token is not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except ValueError:
        return None
    return claims if isinstance(claims, dict) else None


def _expired(claims: dict[str, Any]) -> bool:
    expires = claims.get("exp")
    return isinstance(expires, int | float) and expires < time.time()


def _ago(epoch: float) -> str:
    return f"{(time.time() - epoch) / 60:.0f} minutes ago"


def _aws_principal(region: str | None) -> str:
    try:
        import boto3

        arn = boto3.client("sts", region_name=region).get_caller_identity()["Arn"]
    except Exception as error:  # any failure: the report names it, nothing depends on it
        return f"principal not known: {type(error).__name__}"
    return str(arn)


# -- indexing ----------------------------------------------------------------------------------


def check_indexing(client: MemkitClient, args: argparse.Namespace, findings: Findings) -> Result:
    if args.no_probe:
        return Result("indexing", SKIP, "--no-probe")
    if not findings.authorized:
        return Result("indexing", SKIP, "no accepted credential to write a probe with")
    marker = new_ulid().lower()
    record_id = f"memkit-doctor-{marker}"
    record = {
        "id": record_id,
        "text": f"memkit doctor probe {marker}",
        "namespace": DOCTOR_NAMESPACE,
    }
    try:
        client.create_memories([record], deduplicate=False)
    except PermissionDeniedError as error:
        return Result("indexing", WARN, f"no probe: the credential may not write ({error.detail})")
    except MemkitClientError as error:
        return Result(
            "indexing", FAIL, f"the probe could not be written: {connect.describe(error)}"
        )
    written = time.monotonic()
    try:
        lag = _until_found(client, marker, record_id, args.probe_timeout)
    except MemkitClientError as error:
        return Result("indexing", FAIL, f"the probe's search failed: {connect.describe(error)}")
    finally:
        # A probe left behind is one small record in the doctor's namespace: not worth
        # failing the check for.
        with contextlib.suppress(MemkitClientError):
            client.delete_memories([record_id])
    if lag is None:
        return Result(
            "indexing",
            FAIL,
            f"a record written {time.monotonic() - written:.0f} s ago is not searchable: the "
            "indexer is behind or failing (see dead letters, and the IndexerFunction's logs)",
        )
    status = WARN if lag > SLOW_INDEXING_SECONDS else OK
    return Result(
        "indexing",
        status,
        f"a record was searchable {lag:.1f} s after it was written (probe in namespace "
        f"{DOCTOR_NAMESPACE}, deleted)",
    )


def _until_found(client: MemkitClient, marker: str, record_id: str, timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        hits = client.search_memories(
            marker,
            namespace={"eq": DOCTOR_NAMESPACE},
            search_mode="keyword",
            limit=5,
            track_access=False,
        )
        if any(hit.id == record_id for hit in hits.memories):
            return time.monotonic() - started
        time.sleep(0.2)
    return None


# -- dead letters ------------------------------------------------------------------------------


def stack_outputs(
    stack_name: str, region: str | None, aws: Any = None
) -> tuple[dict[str, str], str | None]:
    """The stack's outputs by key, or an error in words."""
    try:
        session = aws or _boto3_session(region)
        answer = session.client("cloudformation").describe_stacks(StackName=stack_name)
    except Exception as error:  # botocore's errors: credentials, access, the name
        return {}, f"cannot read stack {stack_name}: {_aws_error(error)}"
    outputs = answer["Stacks"][0].get("Outputs") or []
    return {o["OutputKey"]: o["OutputValue"] for o in outputs}, None


def check_dead_letters(args: argparse.Namespace, findings: Findings, aws: Any = None) -> Result:
    if args.stack_name:
        if findings.stack_error:
            return Result("dead letters", FAIL, findings.stack_error)
        return _queues(findings.outputs, aws or _boto3_session(args.region))
    local = findings.health.local if findings.health is not None else None
    if local is not None and "dead_letters" in local:
        count = int(local["dead_letters"])
        if count:
            return Result(
                "dead letters",
                FAIL,
                f"{count} stream batches the local stack's indexer or curator gave up on "
                "(LocalStack.dead_letters; its log says why)",
            )
        return Result("dead letters", OK, "none on the local stack")
    return Result(
        "dead letters",
        SKIP,
        "give --stack-name (and AWS credentials) to read the stack's dead-letter queues",
    )


def _queues(outputs: dict[str, str], session: Any) -> Result:
    queues = {k: v for k, v in sorted(outputs.items()) if k.endswith("DeadLetterQueueUrl")}
    if not queues:
        return Result("dead letters", WARN, "the stack's outputs name no dead-letter queue")
    sqs = session.client("sqs")
    waiting: list[str] = []
    for key, queue_url in queues.items():
        name = key.removesuffix("Url")
        try:
            attributes = sqs.get_queue_attributes(
                QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
        except Exception as error:  # botocore's errors, reported by name
            return Result("dead letters", FAIL, f"cannot read {name}: {_aws_error(error)}")
        count = int(attributes.get("ApproximateNumberOfMessages", 0))
        if count:
            waiting.append(f"{name} {count}")
    if waiting:
        return Result(
            "dead letters",
            FAIL,
            f"messages waiting: {', '.join(waiting)} (what each means: docs/operations.md, "
            "Watching it)",
        )
    return Result("dead letters", OK, f"{len(queues)} dead-letter queues empty")


def _boto3_session(region: str | None) -> Any:
    import boto3

    return boto3.Session(region_name=region)


def _aws_error(error: Exception) -> str:
    response = getattr(error, "response", None)
    if isinstance(response, dict) and "Error" in response:
        return f"{response['Error'].get('Code')}: {response['Error'].get('Message')}"
    return f"{type(error).__name__}: {error}"
