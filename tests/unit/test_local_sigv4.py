"""The local gateway's AWS_IAM check (memkit_dev.local.auth.IamAuthorizer over
memkit_dev.local.sigv4): what API Gateway passes for a principal, and temporary credentials,
whose session token must come signed with the request."""

from __future__ import annotations

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from memkit_dev.local.auth import IamAuthorizer, IamPrincipal
from memkit_dev.local.sigv4 import UNRECOGNIZED, SignatureRejected

URL = "http://127.0.0.1:8000/v1/working-memory/?limit=5"
ROLE = IamPrincipal(
    access_key_id="ASIAEXAMPLEEXAMPLE01",
    secret_access_key="role-secret",
    account_id="111122223333",
    user_arn="arn:aws:sts::111122223333:assumed-role/memkit-acme/agent",
    user_id="AROAEXAMPLEEXAMPLE01:agent",
    session_token="the-session-token",
)


def _arrived(token: str | None, body: bytes = b"") -> Request:
    """The request as the gateway receives it, signed by botocore with ROLE's key."""
    signed = AWSRequest(method="GET", url=URL, data=body)
    credentials = Credentials(ROLE.access_key_id, ROLE.secret_access_key, token)
    SigV4Auth(credentials, "execute-api", "us-east-1").add_auth(signed)
    builder = EnvironBuilder(
        method="GET",
        base_url="http://127.0.0.1:8000",
        path="/v1/working-memory/",
        query_string="limit=5",
        headers=dict(signed.headers.items()),
        data=body,
    )
    return Request(builder.get_environ())


def test_a_role_session_reaches_the_function_as_api_gateway_describes_it() -> None:
    authorizer = IamAuthorizer([ROLE], "us-east-1")

    context = authorizer.request_context(_arrived("the-session-token"), b"")

    assert context == {
        "iam": {
            "accessKey": "ASIAEXAMPLEEXAMPLE01",
            "accountId": "111122223333",
            "callerId": "AROAEXAMPLEEXAMPLE01:agent",
            "cognitoIdentity": None,
            "principalOrgId": None,
            "userArn": "arn:aws:sts::111122223333:assumed-role/memkit-acme/agent",
            "userId": "AROAEXAMPLEEXAMPLE01:agent",
        }
    }


def test_temporary_credentials_without_their_session_token_are_refused() -> None:
    authorizer = IamAuthorizer([ROLE], "us-east-1")

    for token in (None, "another-token"):
        with pytest.raises(SignatureRejected) as rejected:
            authorizer.request_context(_arrived(token), b"")
        assert rejected.value.error_type == UNRECOGNIZED


def test_a_long_term_key_presented_with_a_session_token_is_refused() -> None:
    user = IamPrincipal.user("111122223333", "someone")
    as_role = IamPrincipal(**{**ROLE.__dict__, "session_token": None})
    authorizer = IamAuthorizer([user, as_role], "us-east-1")

    with pytest.raises(SignatureRejected) as rejected:
        authorizer.request_context(_arrived("a-token-nobody-issued"), b"")
    assert rejected.value.error_type == UNRECOGNIZED
