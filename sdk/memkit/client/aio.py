"""The asynchronous client: every call of memkit.client.api, run with httpx.AsyncClient."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Self, TypeVar, Unpack

import httpx

from memkit.client.api import DEFAULT_URL, ClientOptions, MemkitAPI, Resend
from memkit.client.calls import Call, Emit, Pages, Pause, Plan, Step
from memkit.client.errors import APIError

T = TypeVar("T")
Item = TypeVar("Item")


class AsyncMemkitClient(MemkitAPI):
    """The memkit API for asyncio: the calls of MemkitClient, awaited; listings are async
    iterators.

        async with AsyncMemkitClient("http://127.0.0.1:8000", token=token) as memkit:
            async for message in memkit.iter_messages("chat-1"):
                ...
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(base_url, **options)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=self._timeout, transport=transport)
        self._sleep = sleep

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, plan: Plan[T]) -> T:
        reply: Any = None
        failure: APIError | None = None
        while True:
            try:
                step = plan.throw(failure) if failure else plan.send(reply)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            reply, failure = None, None
            try:
                reply = await self._perform(step)
            except APIError as error:  # the plan may handle it (edit_scratchpad's 409)
                failure = error

    async def _iterate(self, pages: Pages[Item]) -> AsyncIterator[Item]:
        reply: Any = None
        while True:
            try:
                step = pages.send(reply)
            except StopIteration:
                return
            if isinstance(step, Emit):
                reply = None
                for item in step.items:
                    yield item
            else:
                reply = await self._perform(step)

    async def _perform(self, step: Step) -> Any:
        if isinstance(step, Pause):
            await self._sleep(step.seconds)
            return None
        return await self._send(step)

    async def _send(self, call: Call[Any]) -> Any:
        attempt = 1
        while True:
            answer: Any
            try:
                request = self._request(self._http, call)
                response = await self._http.send(request, auth=self._auth_flow)
            except httpx.TransportError as error:
                answer = self._after_failure(call, error, attempt)
            else:
                answer = self._answer(call, response, attempt)
            if not isinstance(answer, Resend):
                return answer
            await self._sleep(answer.wait)
            attempt += 1
