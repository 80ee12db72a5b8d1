"""A WSGI app served on loopback in a thread of this process: what the local stack's stand-ins
for AWS endpoints (memkit_dev.local.opensearch, .bedrock, .dynamodb's moto) share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Self

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        """A line per request would drown the local stack's own output."""


class LoopbackServer:
    """Serves `app` (by default itself: a subclass's `__call__`) on `host`:`port` (port 0: any
    free port) in a daemon thread named `name`, once started; a request at a time unless
    `threaded` (then thread-safe as the app is)."""

    def __init__(
        self,
        name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        app: Callable[..., Any] | None = None,
        threaded: bool = True,
        handler: type[WSGIRequestHandler] = _QuietHandler,
    ) -> None:
        self._server: BaseWSGIServer = make_server(
            host, port, app or self, threaded=threaded, request_handler=handler
        )
        # A short poll interval: stop() waits for it (0.5 s by default, per test).
        self._thread = threading.Thread(
            target=lambda: self._server.serve_forever(poll_interval=0.05), name=name, daemon=True
        )

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        raise NotImplementedError

    @property
    def url(self) -> str:
        host, port = self._server.socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
