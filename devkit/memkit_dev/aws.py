"""The AWS credentials and region a `memkit` command calls AWS with, checked before its first
call, and the cause of a failed call in words: by the time botocore's errors reach a command
through the store they read "storage is unavailable", which names none of them."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# DynamoDB Local and moto accept any key: these sign requests to a loopback endpoint (the local
# stack's functions get them; a command gets them when the shell has none).
LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
NO_CREDENTIALS = (
    "no AWS credentials found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
    "~/.aws or an instance role): set them, or sign in (`aws sso login`, `aws configure`)"
)
# Error codes of a credential AWS does not accept (unknown, expired, badly signed).
REFUSED_CREDENTIALS = {
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "InvalidClientTokenId",
    "ExpiredTokenException",
    "ExpiredToken",
    "SignatureDoesNotMatch",
}


def is_local(endpoint: str | None) -> bool:
    """Whether `endpoint` is on this machine (the local stack's DynamoDB)."""
    if not endpoint:
        return False
    return (urlsplit(endpoint).hostname or "") in LOOPBACK_HOSTS


def use_local_credentials() -> None:
    """Credentials for a loopback endpoint when the environment names none (a profile's would
    be refused by nothing there either: these take its place, and no role is looked up)."""
    if not os.environ.get("AWS_ACCESS_KEY_ID"):
        os.environ.update(LOCAL_CREDENTIALS)


def configured_region() -> str | None:
    """The region AWS's own tools would use: AWS_REGION, else AWS_DEFAULT_REGION or the
    profile's (botocore reads only those two)."""
    if os.environ.get("AWS_REGION"):
        return os.environ["AWS_REGION"]
    from botocore.exceptions import BotoCoreError
    from botocore.session import get_session

    try:
        return get_session().get_config_variable("region") or None
    except BotoCoreError:  # a profile that does not exist: no region either
        return None


def credentials_problem() -> str | None:
    """None when the default chain finds credentials, else why not."""
    from botocore.exceptions import BotoCoreError
    from botocore.session import get_session

    try:
        found = get_session().get_credentials()
    except BotoCoreError as error:  # AWS_PROFILE naming no profile, a broken config file
        return f"the AWS credentials cannot be read: {error}"
    return None if found is not None else NO_CREDENTIALS


def call_problem(error: BaseException, where: str) -> str | None:
    """What made a call to AWS at `where` (a table, an endpoint) fail, from the SDK's error
    that `error` (a store's domain error) was raised from; None when it is none of these."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )

    cause = error.__cause__ or error
    if isinstance(cause, NoCredentialsError):
        return NO_CREDENTIALS
    if isinstance(cause, NoRegionError):
        return "no AWS region: give --region, or set AWS_REGION"
    if isinstance(cause, EndpointConnectionError | ConnectTimeoutError):
        return f"no answer from {where}: is it running, and is the endpoint right?"
    if isinstance(cause, ClientError):
        code = str(cause.response.get("Error", {}).get("Code"))
        message = cause.response.get("Error", {}).get("Message") or ""
        if code == "ResourceNotFoundException":
            return f"{where} does not exist (the table's name and region: --table, --region)"
        if code in REFUSED_CREDENTIALS:
            return f"AWS refused the credentials ({code}: {message})"
        if code == "AccessDeniedException":
            return f"the credentials may not do this ({message})"
        return f"{where} answered {code}: {message}".rstrip(": ")
    return None
