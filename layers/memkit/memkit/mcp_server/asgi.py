"""One API Gateway HTTP API (payload format 2.0) event through an ASGI application, and its
answer as the Lambda response: what an ASGI adapter (Mangum) does, for one request at a time.

The application is whatever the caller builds for this event: memkit builds the MCP
transport per invocation (a session manager runs once; a global one fails on the next warm
invocation). The whole answer is collected before it is returned, as API Gateway's Lambda
integration needs, so the caller may still change its status and headers.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


class UnreadableBody(ValueError):
    """The event says its body is base64 and it is not."""


@dataclass
class Answer:
    """An ASGI application's response, collected whole."""

    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def to_lambda(self) -> dict[str, Any]:
        """The payload 2.0 Lambda response API Gateway turns into this answer."""
        try:
            text, encoded = self.body.decode("utf-8"), False
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(self.body).decode("ascii"), True
        return {
            "statusCode": self.status,
            "headers": self.headers,
            "body": text,
            "isBase64Encoded": encoded,
        }


def _context(event: dict[str, Any]) -> dict[str, Any]:
    context = event.get("requestContext")
    return context if isinstance(context, dict) else {}


def host_of(event: dict[str, Any]) -> str:
    """The host API Gateway served the request on (it answers only for its own domains)."""
    domain = _context(event).get("domainName")
    if isinstance(domain, str) and domain:
        return domain
    headers = event.get("headers") or {}
    return str(headers.get("host") or "localhost")


def base_url(event: dict[str, Any]) -> str:
    """https://<host> on AWS; http for the local stack on loopback."""
    host = host_of(event)
    try:
        name = urlsplit(f"//{host}").hostname or host
    except ValueError:  # not a host (the gateway never sends one); no loopback either
        name = host
    return f"{'http' if name in LOOPBACK else 'https'}://{host}"


def method_of(event: dict[str, Any]) -> str:
    http = _context(event).get("http")
    method = http.get("method") if isinstance(http, dict) else None
    return str(method or "GET").upper()


def body_of(event: dict[str, Any]) -> bytes:
    """The request body as bytes (UnreadableBody when its base64 is broken)."""
    body = event.get("body") or ""
    if not event.get("isBase64Encoded"):
        return str(body).encode("utf-8", errors="surrogatepass")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UnreadableBody("the body is not valid base64") from exc


def _latin1(text: str) -> bytes:
    # HTTP header bytes are Latin-1; a value that is not (the event is JSON, so any character
    # can arrive) goes as UTF-8 rather than failing the request.
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace")


def http_scope(event: dict[str, Any]) -> Scope:
    """The ASGI HTTP scope of a payload 2.0 event."""
    context = _context(event)
    found = context.get("http")
    http: dict[str, Any] = found if isinstance(found, dict) else {}
    path = str(event.get("rawPath") or http.get("path") or "/")
    headers = [
        (str(name).lower().encode("latin-1", errors="replace"), _latin1(str(value)))
        for name, value in (event.get("headers") or {}).items()
    ]
    cookies = event.get("cookies") or []
    if cookies:
        headers.append((b"cookie", _latin1("; ".join(str(c) for c in cookies))))
    scheme = base_url(event).split(":", 1)[0]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method_of(event),
        "scheme": scheme,
        "path": path,
        "raw_path": _latin1(path),
        "root_path": "",
        "query_string": _latin1(str(event.get("rawQueryString") or "")),
        "headers": headers,
        "client": (str(http.get("sourceIp") or "0.0.0.0"), 0),  # noqa: S104 (an address, not a bind)
        "server": (host_of(event), 443 if scheme == "https" else 80),
    }


async def _serve(app: App, scope: Scope, body: bytes) -> Answer:
    answer = Answer()
    parts: list[bytes] = []
    finished = asyncio.Event()
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The client stays connected until the answer is complete, as on a real socket (an
        # application that watches for a disconnect must not see one early).
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = int(message["status"])
            for name, value in message.get("headers") or []:
                key = bytes(name).decode("latin-1").lower()
                text = bytes(value).decode("latin-1")
                answer.headers[key] = (
                    f"{answer.headers[key]},{text}" if key in answer.headers else text
                )
        elif message["type"] == "http.response.body":
            parts.append(bytes(message.get("body") or b""))
            if not message.get("more_body"):
                finished.set()

    try:
        await app(scope, receive, send)
    finally:
        finished.set()
    answer.body = b"".join(parts)
    return answer


def run(app: App, event: dict[str, Any]) -> Answer:
    """`app`'s answer to `event`, on an event loop of this invocation's own."""
    return asyncio.run(_serve(app, http_scope(event), body_of(event)))
