"""`memkit serve --auth iam`: the local gateway verifies SigV4 for service execute-api as API
Gateway's AWS_IAM does, refuses what AWS refuses with AWS's 403s, and passes the principal as
`requestContext.authorizer.iam`, so memkit's iam identity (the account is the tenant, a
backend holding every scope) decides what each caller sees."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from memkit.client import MemkitClient, NotFoundError, SigV4
from memkit_dev.local.auth import DEV_ACCOUNT_ID, IamPrincipal, dev_principal, load_principals
from memkit_dev.local.stack import LocalStack

pytestmark = pytest.mark.integration
# A table of its own: a stack that finds another module's items in moto rebuilds its index.
IAM_STACK_OPTIONS = {"index_messages": False, "table_name": "memkit-iam"}
REGION = "us-east-1"
MISMATCH = "The request signature we calculated does not match the signature you provided"


def _memkit(stack: LocalStack, principal: IamPrincipal) -> MemkitClient:
    """The SDK with its SigV4 auth, signing with `principal`'s access key."""
    session = boto3.Session(
        aws_access_key_id=principal.access_key_id,
        aws_secret_access_key=principal.secret_access_key,
        region_name=REGION,
    )
    return MemkitClient(stack.url, auth=SigV4(session, region=REGION))


def _signed(
    stack: LocalStack,
    principal: IamPrincipal,
    method: str,
    path: str,
    body: Any = None,
    *,
    service: str = "execute-api",
    region: str = REGION,
    secret: str | None = None,
) -> httpx.Response:
    """A request signed by botocore's own SigV4 signer, as any AWS client signs one."""
    data = json.dumps(body).encode() if body is not None else b""
    request = AWSRequest(
        method=method,
        url=f"{stack.url}{path}",
        data=data,
        headers={"Content-Type": "application/json"} if data else {},
    )
    credentials = Credentials(principal.access_key_id, secret or principal.secret_access_key)
    SigV4Auth(credentials, service, region).add_auth(request)
    return httpx.request(
        method, request.url, content=data, headers=dict(request.headers.items()), timeout=60
    )


def test_the_sdks_sigv4_calls_as_its_account_and_another_account_sees_nothing(
    iam_stack: LocalStack, iam_principals: tuple[IamPrincipal, IamPrincipal]
) -> None:
    first, second = iam_principals
    message = {"role": "user", "content": "I drink green tea"}

    # Given a backend of the first account writes a session for its user ada
    with _memkit(iam_stack, first) as mine, _memkit(iam_stack, second) as theirs:
        mine.append_messages("iam-chat", [message], user_id="ada")

        # When it reads it back, and a backend of the second account looks for it
        session = mine.get_session("iam-chat")
        listed = theirs.list_sessions()
        with pytest.raises(NotFoundError):
            theirs.get_session("iam-chat")

    # Then the first sees its user's session and the second account (another tenant) nothing
    assert (session.user_id, session.messages[0].content) == ("ada", "I drink green tea")
    assert listed.sessions == []


def test_a_request_plain_botocore_signs_for_execute_api_is_answered(
    iam_stack: LocalStack, iam_principals: tuple[IamPrincipal, IamPrincipal]
) -> None:
    first, _ = iam_principals
    body = {"content": "likes tea"}

    written = _signed(iam_stack, first, "PUT", "/v1/working-memory/pad/scratchpad", body)
    read = _signed(iam_stack, first, "GET", "/v1/working-memory/pad/scratchpad?render=prompt")

    assert written.status_code == 200, written.text
    assert read.status_code == 200
    assert "likes tea" in read.text


def test_what_api_gateway_refuses_is_a_403_with_its_message(
    iam_stack: LocalStack,
    iam_principals: tuple[IamPrincipal, IamPrincipal],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, _ = iam_principals
    path = "/v1/working-memory/"
    stranger = IamPrincipal.user("333333333333", "unknown")

    unsigned = httpx.get(f"{iam_stack.url}{path}", timeout=60)
    bearer = httpx.get(f"{iam_stack.url}{path}", headers={"Authorization": "Bearer x"})
    wrong_secret = _signed(iam_stack, first, "GET", path, secret="not-the-secret-key")
    wrong_service = _signed(iam_stack, first, "GET", path, service="bedrock-agentcore")
    wrong_region = _signed(iam_stack, first, "GET", path, region="eu-west-1")
    unknown_key = _signed(iam_stack, stranger, "GET", path)
    tampered = _signed(iam_stack, first, "GET", path)  # then sent to another path
    moved = httpx.get(f"{iam_stack.url}/v1/profiles", headers=dict(tampered.request.headers))
    # A client whose clock is 10 minutes behind signs with its own time
    behind = datetime.now(UTC) - timedelta(minutes=10)
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: behind)
    expired = _signed(iam_stack, first, "GET", path)

    assert (unsigned.status_code, unsigned.json()) == (403, {"message": "Forbidden"})
    assert bearer.status_code == 403
    assert bearer.headers["x-amzn-ErrorType"] == "IncompleteSignatureException"
    for refused in (wrong_secret, moved):
        assert refused.status_code == 403
        assert refused.json()["message"].startswith(MISMATCH)
        assert refused.headers["x-amzn-ErrorType"] == "InvalidSignatureException"
    assert (wrong_service.status_code, wrong_service.json()["message"]) == (
        403,
        "Credential should be scoped to correct service: 'execute-api'. ",
    )
    assert wrong_region.status_code == 403
    assert "scoped to a valid region" in wrong_region.json()["message"]
    assert (unknown_key.status_code, unknown_key.headers["x-amzn-ErrorType"]) == (
        403,
        "UnrecognizedClientException",
    )
    assert expired.status_code == 403
    assert expired.json()["message"].startswith("Signature expired: ")
    assert tampered.status_code == 200


def test_public_routes_need_no_signature_and_mcp_is_verified_by_the_gateway(
    iam_stack: LocalStack,
) -> None:
    health = httpx.get(f"{iam_stack.url}/v1/health", timeout=60)
    mcp = httpx.post(f"{iam_stack.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})

    assert health.status_code == 200
    assert (mcp.status_code, mcp.json()) == (403, {"message": "Forbidden"})


def test_the_development_principal_is_made_once_and_kept_private(tmp_path: Path) -> None:
    made = dev_principal(tmp_path)
    again = dev_principal(tmp_path)
    stored = tmp_path / "dev-iam-credentials.json"

    assert again == made
    assert made.user_arn == f"arn:aws:iam::{DEV_ACCOUNT_ID}:user/memkit-dev"
    assert made.access_key_id.startswith("AKIA")
    assert len(made.access_key_id) == 20
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert load_principals(stored) == [made]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curls_own_sigv4_as_the_start_banner_shows_it_is_answered(
    iam_stack: LocalStack, iam_principals: tuple[IamPrincipal, IamPrincipal]
) -> None:
    first, _ = iam_principals
    signing = ["--aws-sigv4", f"aws:amz:{REGION}:execute-api"]
    user = ["--user", f"{first.access_key_id}:{first.secret_access_key}"]
    url = f"{iam_stack.url}/v1/working-memory/curl-pad/scratchpad"
    body = ["-X", "PATCH", "-H", "content-type: application/json", "-d", '{"content": "tea"}']

    patched = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", *signing, *user, *body, url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    read = subprocess.run(
        ["curl", "-s", *signing, *user, f"{url}?render=prompt"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert patched.stdout == "200"
    assert "tea" in read.stdout
