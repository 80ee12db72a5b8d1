"""The id rule (memkit.ids) and how API Gateway reads a path, which the rule follows from: an
id survives a URL path exactly when the rule takes it."""

from __future__ import annotations

import contextlib
import re
from urllib.parse import quote

import httpx
import pytest

from memkit.ids import ID_PATTERN, id_problem
from memkit_dev.local.gateway import Undecodable, request_paths
from tests.awkward_ids import REFUSED, TAKEN

# Live captures of an HTTP API (payload format 2.0, route $default): the path a client sent,
# and the rawPath the function received (None: API Gateway answered 400 itself). From
# hotsock/voker, vokerhttp/testdata/ingress-paths.json (captured in us-west-2, July 2026).
CAPTURES = [
    ("/capture/plain", "/capture/plain"),
    ("/capture/space%20value", "/capture/space value"),
    ("/capture/question%3Fvalue", "/capture/question"),
    ("/capture/percent%25done", None),
    ("/capture/hash%23value", "/capture/hash#value"),
    ("/capture/slash%2Fvalue", "/capture/slash/value"),
    ("/capture/unicode-%CE%BB-%E4%B8%96%E7%95%8C", "/capture/unicode-λ-世界"),
    ("/capture/literal%252Fvalue", "/capture/literal/value"),
    ("/capture/literal%253Fvalue", "/capture/literal?value"),
    ("/capture/literal%2525value", "/capture/literal%value"),
]


@pytest.mark.parametrize(("sent", "received"), CAPTURES)
def test_the_local_gateway_reads_a_path_as_api_gateway_did_live(
    sent: str, received: str | None
) -> None:
    if received is None:
        with pytest.raises(Undecodable):
            request_paths(sent.encode())
    else:
        assert request_paths(sent.encode())[1] == received


def test_the_gateway_routes_on_the_path_decoded_once_and_cut_at_its_question_mark() -> None:
    assert request_paths(b"/a%252Fb/thing?x=1") == ("/a%2Fb/thing", "/a/b/thing")
    assert request_paths(b"/v1/x%3Fy") == ("/v1/x", "/v1/x")
    assert request_paths("/v1/tea☕".encode()) == ("/v1/tea☕", "/v1/tea☕")  # sent unencoded


@pytest.mark.parametrize("value", TAKEN)
def test_an_id_the_rule_takes_reaches_the_function_as_itself(value: str) -> None:
    assert id_problem(value) is None
    assert re.fullmatch(ID_PATTERN, value)

    routed, raw_path = request_paths(f"/v1/ids/{quote(value, safe='')}".encode())

    assert raw_path == routed == f"/v1/ids/{value}"


@pytest.mark.parametrize(("value", "reason"), REFUSED.items())
def test_an_id_the_rule_refuses_says_why_and_would_not_survive_a_path(
    value: str, reason: str
) -> None:
    problem = id_problem(value)

    assert problem is not None
    assert problem.startswith(reason)
    assert "one URL path segment" in problem  # the rule itself, in words
    assert not re.fullmatch(ID_PATTERN, value)
    path = f"/v1/ids/{quote(value, safe='')}"
    if value in (".", ".."):  # clients resolve these segments before anything is sent
        assert httpx.URL(f"http://memkit{path}").path != f"/v1/ids/{value}"
    elif not reason.endswith("control character"):  # those were never ids
        with contextlib.suppress(Undecodable):  # API Gateway's 400
            routed, raw_path = request_paths(path.encode())
            # Routed as one segment and delivered as the id: never both.
            assert [routed.split("/")[3:], raw_path.split("/")[3:]] != [[value], [value]]


def test_the_sdk_encodes_an_id_in_a_path_and_never_sends_one_no_path_could_name() -> None:
    from memkit.client import MemkitClient, NotFoundError

    sent: list[bytes] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.raw_path)
        return httpx.Response(404, json={"detail": "gone", "code": "not_found", "errors": []})

    with MemkitClient("http://memkit", transport=httpx.MockTransport(gateway)) as client:
        with pytest.raises(NotFoundError):
            client.get_memory("tea☕ #1")
        with pytest.raises(ValueError, match="must not contain '\\?'"):
            client.get_memory("tea?")

    assert sent == [b"/v1/long-term-memory/tea%E2%98%95%20%231"]
