"""The synchronous client: every call of memkit.client.api, run with httpx.Client."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Self, TypeVar, Unpack

import httpx

from memkit.client.api import DEFAULT_URL, ClientOptions, MemkitAPI, Resend
from memkit.client.calls import Call, Emit, Pages, Pause, Plan, Step
from memkit.client.errors import APIError

T = TypeVar("T")
Item = TypeVar("Item")


class MemkitClient(MemkitAPI):
    """The memkit API (sessions, scratchpads, long-term memory, prompts, agent tools).

        with MemkitClient("http://127.0.0.1:8000", token=token) as memkit:
            memkit.append_messages("chat-1", [{"role": "user", "content": "hi"}])

    `token`: a bearer token (or a function returning one); `auth`: any httpx.Auth, such as
    memkit.client.SigV4() or ClientCredentials(...). `namespace`: used by every call that
    takes one and was not given one. `http_client`: your own httpx.Client (kept open on
    close); `transport`: an httpx transport for the client made here.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        http_client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(base_url, **options)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=self._timeout, transport=transport)
        self._sleep = sleep

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, plan: Plan[T]) -> T:
        reply: Any = None
        failure: APIError | None = None
        while True:
            try:
                step = plan.throw(failure) if failure else plan.send(reply)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            reply, failure = None, None
            try:
                reply = self._perform(step)
            except APIError as error:  # the plan may handle it (edit_scratchpad's 409)
                failure = error

    def _iterate(self, pages: Pages[Item]) -> Iterator[Item]:
        reply: Any = None
        while True:
            try:
                step = pages.send(reply)
            except StopIteration:
                return
            if isinstance(step, Emit):
                reply = None
                yield from step.items
            else:
                reply = self._perform(step)

    def _perform(self, step: Step) -> Any:
        if isinstance(step, Pause):
            self._sleep(step.seconds)
            return None
        return self._send(step)

    def _send(self, call: Call[Any]) -> Any:
        attempt = 1
        while True:
            answer: Any
            try:
                response = self._http.send(self._request(self._http, call), auth=self._auth_flow)
            except httpx.TransportError as error:
                answer = self._after_failure(call, error, attempt)
            else:
                answer = self._answer(call, response, attempt)
            if not isinstance(answer, Resend):
                return answer
            self._sleep(answer.wait)
            attempt += 1
