"""AWS Signature Version 4 verified as AWS services verify it, for the local stack's stand-ins:
the loopback OpenSearch (services `es` and `aoss`) and the HTTP API gateway with `--auth iam`
(service `execute-api`, as API Gateway's AWS_IAM checks it).

A signed request carries `Authorization: AWS4-HMAC-SHA256 Credential=<access key>/<date>/
<region>/<service>/aws4_request, SignedHeaders=<names>, Signature=<hex>` and `X-Amz-Date`.
The verifier checks the credential scope (service, region, date), the clock (five minutes
either way), the access key and its session token, then rebuilds the canonical request from
what arrived (method, raw path, query, the headers the client signed, the body's hash) with
botocore's own signer and compares the signatures in constant time. A refusal says why with
the error type and message AWS answers (`SignatureRejected`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials
from werkzeug.wrappers import Request

# How far X-Amz-Date may be from the server's clock, either way.
CLOCK_SKEW = timedelta(minutes=5)
ALGORITHM = "AWS4-HMAC-SHA256"
_AUTH = re.compile(
    ALGORITHM + r" Credential=([^,\s]+), ?SignedHeaders=([^,\s]+), ?Signature=([0-9a-f]+)"
)
_STAMP = "%Y%m%dT%H%M%SZ"
# AWS's error types (the x-amzn-ErrorType header of its 403s).
INCOMPLETE = "IncompleteSignatureException"
INVALID = "InvalidSignatureException"
UNRECOGNIZED = "UnrecognizedClientException"
MISSING = "MissingAuthenticationTokenException"
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check "
    "your AWS Secret Access Key and signing method. Consult the service documentation for "
    "details."
)
INVALID_TOKEN = "The security token included in the request is invalid."  # noqa: S105


@dataclass(frozen=True)
class SigningKey:
    """An access key a verifier knows: its secret and, for temporary credentials, the
    session token that must come with it."""

    access_key: str
    secret_key: str
    session_token: str | None = None


class SignatureRejected(Exception):
    """The request's signature does not verify: AWS's error type and message for why."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


class _AsSigned(SigV4Auth):  # type: ignore[misc]  # botocore ships no types
    """botocore's SigV4 signer over exactly the headers the client signed (botocore alone
    would choose its own set, leaving out user-agent among others)."""

    def __init__(self, key: SigningKey, service: str, region: str, names: list[str]) -> None:
        super().__init__(
            Credentials(key.access_key, key.secret_key, key.session_token), service, region
        )
        self._names = names

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        headers = HTTPHeaders()
        for name in self._names:
            headers[name] = request.headers[name]
        return headers


def _stamp(value: str) -> datetime:
    try:
        return datetime.strptime(value, _STAMP).replace(tzinfo=UTC)
    except ValueError as exc:
        raise SignatureRejected(INCOMPLETE, f"X-Amz-Date {value!r} is not {_STAMP}") from exc


def _check_clock(stamp: datetime, amz_date: str, now: datetime) -> None:
    shown = now.strftime(_STAMP)
    if stamp < now - CLOCK_SKEW:
        earliest = (now - CLOCK_SKEW).strftime(_STAMP)
        raise SignatureRejected(
            INVALID,
            f"Signature expired: {amz_date} is now earlier than {earliest} ({shown} - 5 min.)",
        )
    if stamp > now + CLOCK_SKEW:
        latest = (now + CLOCK_SKEW).strftime(_STAMP)
        raise SignatureRejected(
            INVALID,
            f"Signature not yet current: {amz_date} is still later than {latest} "
            f"({shown} + 5 min.)",
        )


def verify(
    request: Request,
    body: bytes,
    *,
    service: str,
    region: str,
    key_for: Callable[[str], SigningKey | None],
    require_payload_hash: bool = False,
    now: datetime | None = None,
) -> SigningKey:
    """The key that signed `request` (whose body is `body`) for `service` in `region`;
    SignatureRejected, with AWS's type and message, when the signature does not verify.
    `require_payload_hash`: the client must send X-Amz-Content-SHA256 (aoss does)."""
    header = request.headers.get("Authorization")
    if not header:
        raise SignatureRejected(MISSING, "Missing Authentication Token")
    match = _AUTH.fullmatch(header.strip())
    if match is None:
        raise SignatureRejected(
            INCOMPLETE,
            f"Authorization header requires '{ALGORITHM} Credential=..., SignedHeaders=..., "
            "Signature=...'",
        )
    credential, signed, signature = match.groups()
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise SignatureRejected(
            INCOMPLETE, "Credential must have 5 slash-separated parts ending in aws4_request"
        )
    access_key, day, scoped_region, scoped_service, _ = parts
    if scoped_service != service:
        raise SignatureRejected(
            INVALID, f"Credential should be scoped to correct service: '{service}'. "
        )
    if scoped_region != region:
        raise SignatureRejected(
            INVALID, f"Credential should be scoped to a valid region, not '{scoped_region}'. "
        )
    amz_date = request.headers.get("X-Amz-Date", "")
    if not amz_date:
        raise SignatureRejected(
            INCOMPLETE, "Authorization header requires existence of a 'X-Amz-Date' header."
        )
    stamp = _stamp(amz_date)
    if day != amz_date[:8]:
        raise SignatureRejected(
            INVALID,
            f"Date in Credential scope does not match YYYYMMDD from X-Amz-Date: "
            f"'{day}' != '{amz_date[:8]}'",
        )
    _check_clock(stamp, amz_date, now or datetime.now(UTC))
    key = key_for(access_key)
    if key is None:
        raise SignatureRejected(UNRECOGNIZED, INVALID_TOKEN)
    names = signed.split(";")
    if "host" not in names:
        raise SignatureRejected(
            INVALID, "'Host' must be a 'SignedHeader' in the AWS Authorization."
        )
    if "x-amz-date" not in names:
        raise SignatureRejected(
            INVALID, "'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization."
        )
    # Temporary credentials need their token, signed; a long-term key takes none.
    token = request.headers.get("X-Amz-Security-Token")
    if token != key.session_token or (token is not None and "x-amz-security-token" not in names):
        raise SignatureRejected(UNRECOGNIZED, INVALID_TOKEN)
    if names != sorted(names) or any(name != name.lower() for name in names):
        raise SignatureRejected(INVALID, MISMATCH)  # not a canonical list: never verifies
    if any(name not in request.headers for name in names):
        raise SignatureRejected(INVALID, MISMATCH)
    content_sha = request.headers.get("X-Amz-Content-SHA256")
    if content_sha is None and require_payload_hash:
        raise SignatureRejected(INVALID, f"{service} needs the X-Amz-Content-SHA256 header")
    if content_sha is not None and content_sha != hashlib.sha256(body).hexdigest():
        raise SignatureRejected(INVALID, "X-Amz-Content-SHA256 does not match the body")
    # The path and query as sent (percent-escapes kept), as the client signed them.
    raw_path = (request.environ.get("REQUEST_URI") or request.path).split("?", 1)[0]
    query = request.environ.get("QUERY_STRING", "")
    target = f"{raw_path}?{query}" if query else raw_path
    aws_request = AWSRequest(
        method=request.method,
        url=f"{request.scheme}://{request.headers['Host']}{target}",
        data=body,
        headers={name: request.headers[name] for name in names},
    )
    aws_request.context["timestamp"] = amz_date
    signer = _AsSigned(key, service, region, names)
    canonical = signer.canonical_request(aws_request)
    expected = signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)
    if not hmac.compare_digest(expected, signature):
        raise SignatureRejected(INVALID, MISMATCH)
    return key
