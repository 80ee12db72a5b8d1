"""Each API call is written once, as a plan, and run by both clients.

A plan is a generator: it yields the requests it needs (`Call`) and the waits it wants
(`Pause`), receives each answer parsed into the API's model, and returns the result. A plan
for a listing also yields `Emit`: items for the caller, fetched a page at a time. The sync
client runs a plan with httpx.Client and time.sleep, the async one with httpx.AsyncClient and
asyncio.sleep; both send each `Call` through the same retries. So batching (several requests
for one call), read-modify-write loops and pagination are written once, with no I/O.

`endpoint` and `pager` bind a plan to a client: on MemkitClient `client.get_session(...)`
returns the session, on AsyncMemkitClient it returns an awaitable, and a pager returns an
iterator or an async iterator.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload
from urllib.parse import quote

from memkit.ids import id_problem

if TYPE_CHECKING:
    from memkit.client.aio import AsyncMemkitClient
    from memkit.client.sync import MemkitClient

T = TypeVar("T")
Item = TypeVar("Item")
P = ParamSpec("P")


def segment(value: str) -> str:
    """One path segment: ids are free text (spaces, any language), so all of it is
    percent-encoded. An id the API refuses (memkit.ids: '/', '?', '%', '.', '..') raises
    ValueError: in a path it would reach another id or route, never this one."""
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(f"{value!r} cannot be named in a path: it {problem}")
    return quote(value, safe="")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and how to read its answer.

    `idempotent`: sending it twice does what sending it once does, so it may be resent when
    its outcome is unknown (memkit.client.retries)."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: Mapping[str, Any] = field(default_factory=dict)
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    idempotent: bool = True


@dataclass(frozen=True)
class Pause:
    """Wait this many seconds (a plan's own backoff)."""

    seconds: float


@dataclass(frozen=True)
class Emit(Generic[Item]):
    """Items for the caller of a pager."""

    items: list[Item]


Step = Call[Any] | Pause
Plan = Generator[Step, Any, T]
Pages = Generator[Step | Emit[Item], Any, None]


def ask(call: Call[T]) -> Generator[Step, Any, T]:
    """Send the call and get its parsed answer, in a plan: `view = yield from ask(call)`."""
    return cast(T, (yield call))


def _bind(plan: Callable[..., Any], run: Callable[..., Any]) -> Callable[..., Any]:
    """`run` wearing the plan's name, docstring and signature (less `self`), for help()."""

    @functools.wraps(plan)
    def bound(*args: Any, **kwargs: Any) -> Any:
        return run(*args, **kwargs)

    signature = inspect.signature(plan)
    parameters = list(signature.parameters.values())[1:]
    bound.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    del bound.__wrapped__  # help() shows the signature above, not the plan's
    return bound


class endpoint(Generic[P, T]):
    """A call of the API: runs to its result on MemkitClient, awaits on AsyncMemkitClient."""

    def __init__(self, plan: Callable[Concatenate[Any, P], Plan[T]]) -> None:
        self._plan = plan
        self.__doc__ = plan.__doc__

    @overload
    def __get__(self, client: None, owner: type[Any]) -> endpoint[P, T]: ...

    @overload
    def __get__(self, client: MemkitClient, owner: type[Any]) -> Callable[P, T]: ...

    @overload
    def __get__(
        self, client: AsyncMemkitClient, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, client: Any, owner: type[Any]) -> Any:
        if client is None:
            return self
        plan = self._plan
        return _bind(plan, lambda *args, **kwargs: client._run(plan(client, *args, **kwargs)))


class pager(Generic[P, Item]):
    """A listing of the API, fetched a page at a time as the caller iterates."""

    def __init__(self, plan: Callable[Concatenate[Any, P], Pages[Item]]) -> None:
        self._plan = plan
        self.__doc__ = plan.__doc__

    @overload
    def __get__(self, client: None, owner: type[Any]) -> pager[P, Item]: ...

    @overload
    def __get__(self, client: MemkitClient, owner: type[Any]) -> Callable[P, Iterator[Item]]: ...

    @overload
    def __get__(
        self, client: AsyncMemkitClient, owner: type[Any]
    ) -> Callable[P, AsyncIterator[Item]]: ...

    def __get__(self, client: Any, owner: type[Any]) -> Any:
        if client is None:
            return self
        plan = self._plan
        return _bind(plan, lambda *args, **kwargs: client._iterate(plan(client, *args, **kwargs)))
