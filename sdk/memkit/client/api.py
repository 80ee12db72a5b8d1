"""The API's calls, written once for both clients (memkit.client.calls explains the plans).

Bodies and answers are the API's own models (memkit.models): a body may be the model or a
plain mapping (sent as it is; the API checks it, and a 422 names the field), and every answer
is parsed into the model the API documents. Which calls are resent when their outcome is
unknown (`idempotent`) is said here, call by call, and listed in docs/sdk.md.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Self, TypedDict, TypeVar, Unpack

import httpx
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from memkit.client.auth import BearerToken
from memkit.client.calls import Call, Emit, Pages, Pause, Plan, ask, endpoint, pager, segment
from memkit.client.errors import APIConnectionError, ConflictError, IndexingTimeout, error_for
from memkit.client.retries import Retries
from memkit.client.tools import (
    ToolOutcome,
    ToolsFormat,
    parse_tool_call,
    responses_tools,
)
from memkit.ids import new_ulid
from memkit.models.api import (
    Health,
    ProfileList,
    ProfileView,
    PromptView,
    ScratchpadView,
    ToolFailure,
    ToolSuccess,
    ToolsView,
)
from memkit.models.domain import ProfileSpec
from memkit.models.memory import (
    MAX_CREATE,
    Ack,
    CreatedAck,
    MemoryEdit,
    MemoryHistoryView,
    MemoryHit,
    MemoryRecordIn,
    MemoryRecordView,
    MemoryResults,
    MemoryVersionView,
    SearchRequest,
)
from memkit.models.prompt import HydratedPrompt, PromptRequest
from memkit.models.session import (
    MAX_APPEND_MESSAGES,
    AppendView,
    Message,
    MessagePage,
    MessageView,
    SessionList,
    SessionPatch,
    SessionView,
    SessionWrite,
)
from memkit.scratchpad.tools import ALIASES, MEMORY_ALIASES, MemoryToolName, ToolName

M = TypeVar("M", bound=BaseModel)
Content = str | dict[str, Any] | None
Version = int | str
DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "memkit-client/0.1.0"
# Ids one DELETE /v1/long-term-memory may name (its memory_ids parameter).
MAX_DELETE = 100
# Tools that only read, or whose second run changes nothing: resent when the outcome is unknown.
REPEATABLE_TOOLS = frozenset(
    [name for name, tool in ALIASES.items() if tool is not ToolName.UPDATE]
    + [name for name, tool in MEMORY_ALIASES.items() if tool is MemoryToolName.SEARCH]
)


@dataclass(frozen=True)
class Resend:
    """Send the call again after this many seconds."""

    wait: float


def parse(model: type[M]) -> Callable[[Any], M]:
    return model.model_validate


def nothing(_: Any) -> None:
    return None


def query(**params: Any) -> dict[str, Any]:
    """Query parameters, without the ones not given."""
    return {name: value for name, value in params.items() if value is not None}


def jsonable(body: Any) -> Any:
    """A body as JSON: a model as the fields it was given (by their wire names: `schema`), a
    mapping as it is (datetimes as ISO 8601)."""
    if isinstance(body, BaseModel):
        return body.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return to_jsonable_python(body)


def with_id(item: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """A message or record as JSON, with its id: the model's own, or a new ULID for a mapping
    without one. The id is fixed before the first try, so a resent write is the same write."""
    body = dict(jsonable(item))
    body.setdefault("id", getattr(item, "id", None) or new_ulid())
    return body


def message_bodies(messages: Iterable[Message | Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [with_id(message) for message in messages]


def precondition(version: Version | None) -> dict[str, str]:
    """The If-Match header for a version (3) or an ETag as the API sent it ('"3"')."""
    if version is None:
        return {}
    return {"If-Match": f'"{version}"' if isinstance(version, int) else version}


def batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def tool_answer(data: Any) -> ToolSuccess | ToolFailure:
    if isinstance(data, dict) and "error" in data:
        return ToolFailure.model_validate(data)
    return ToolSuccess.model_validate(data)


class ClientOptions(TypedDict, total=False):
    """What both clients take besides the URL and their own HTTP client."""

    # A bearer token, or a function returning one (called for every request).
    token: str | Callable[[], str] | None
    # Any httpx.Auth instead: SigV4(), ClientCredentials(...), BearerToken(...).
    auth: httpx.Auth | None
    # Used by every call that takes a namespace and was not given one.
    namespace: str | None
    retries: Retries
    timeout: float | httpx.Timeout
    # Headers for every request, also through an http_client of your own (User-Agent is
    # memkit-client's unless given).
    headers: Mapping[str, str]


class MemkitAPI:
    """What both clients share: where the API is, how to authenticate, the default namespace,
    the retry policy; and every call. Use MemkitClient or AsyncMemkitClient."""

    def __init__(self, base_url: str = DEFAULT_URL, **options: Unpack[ClientOptions]) -> None:
        token, auth = options.get("token"), options.get("auth")
        if token is not None and auth is not None:
            raise ValueError("give token or auth, not both")
        self.base_url = base_url.rstrip("/")
        self._auth: httpx.Auth | None = BearerToken(token) if token is not None else auth
        self.namespace = options.get("namespace")
        self.retries = options.get("retries") or Retries()
        self._timeout = options.get("timeout", 30.0)
        self._headers = {"User-Agent": USER_AGENT, **options.get("headers", {})}

    @classmethod
    def from_env(cls, **options: Any) -> Self:
        """A client for MEMKIT_URL (default http://127.0.0.1:8000) with MEMKIT_TOKEN, the
        variable `make serve` prints; `options` as the constructor's."""
        if os.environ.get("MEMKIT_TOKEN"):
            options.setdefault("token", os.environ["MEMKIT_TOKEN"])
        return cls(os.environ.get("MEMKIT_URL", DEFAULT_URL), **options)

    @property
    def _auth_flow(self) -> Any:
        """The auth to send with (the HTTP client's own when none was given)."""
        return self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT

    def _ns(self, namespace: str | None) -> str | None:
        return namespace if namespace is not None else self.namespace

    # What both clients do with a call, around their own send and sleep.

    def _request(self, http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
        return http.build_request(
            call.method,
            self.base_url + call.path,
            params=call.params,
            json=call.body,
            headers={**self._headers, **call.headers},
        )

    def _answer(self, call: Call[Any], response: httpx.Response, attempt: int) -> Any:
        """The call's parsed answer, or Resend(wait); raises the API's error otherwise."""
        if response.is_success:
            return call.parse(response.json() if response.content else None)
        wait = self.retries.after_response(response, attempt, call.idempotent)
        if wait is None:
            raise error_for(response)
        return Resend(wait)

    def _after_failure(self, call: Call[Any], error: httpx.TransportError, attempt: int) -> Resend:
        """Resend(wait) after a connection error, or APIConnectionError when resending is not
        safe or the tries are spent."""
        wait = self.retries.after_error(error, attempt, call.idempotent)
        if wait is None:
            raise APIConnectionError(
                f"{call.method} {call.path}: {type(error).__name__}"
            ) from error
        return Resend(wait)

    # -- health ----------------------------------------------------------------------------

    @endpoint
    def health(self) -> Plan[Health]:
        """GET /v1/health: liveness and the server's time (needs no credentials)."""
        return (yield from ask(Call("GET", "/v1/health", parse(Health))))

    # -- sessions --------------------------------------------------------------------------

    def _session_path(self, session_id: str) -> str:
        return f"/v1/working-memory/{segment(session_id)}"

    @endpoint
    def list_sessions(
        self,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> Plan[SessionList]:
        """One page of session ids, newest first (`iter_sessions` walks them all)."""
        params = query(namespace=self._ns(namespace), user_id=user_id, limit=limit, offset=offset)
        return (yield from ask(Call("GET", "/v1/working-memory/", parse(SessionList), params)))

    @pager
    def iter_sessions(
        self, *, namespace: str | None = None, user_id: str | None = None, page_size: int = 100
    ) -> Pages[str]:
        """Every session id, newest first, a page at a time. Offsets shift when sessions are
        created meanwhile: a session may then be seen twice or missed."""
        offset = 0
        params = query(namespace=self._ns(namespace), user_id=user_id, limit=page_size)
        while True:
            page_params = {**params, "offset": offset}
            page = yield from ask(
                Call("GET", "/v1/working-memory/", parse(SessionList), page_params)
            )
            if not page.sessions:
                return
            yield Emit(page.sessions)
            offset += len(page.sessions)
            if offset >= page.total:
                return

    @endpoint
    def get_session(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        recent_messages_limit: int | None = None,
        model_name: str | None = None,
        context_window_max: int | None = None,
    ) -> Plan[SessionView]:
        """The session document: its newest messages (trimmed to a model's window when asked),
        memories, data, scratchpad and `version`."""
        params = query(
            namespace=self._ns(namespace),
            user_id=user_id,
            recent_messages_limit=recent_messages_limit,
            model_name=model_name,
            context_window_max=context_window_max,
        )
        return (
            yield from ask(Call("GET", self._session_path(session_id), parse(SessionView), params))
        )

    @endpoint
    def put_session(
        self,
        session_id: str,
        document: SessionWrite | Mapping[str, Any],
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        model_name: str | None = None,
        context_window_max: int | None = None,
        if_match: Version | None = None,
    ) -> Plan[SessionView]:
        """Replace the session's document (creates the session). Messages without an id get
        one here, so a resent PUT is the same PUT. With `if_match`, 409 if it moved on. A
        window given (`context_window_max`, or `model_name`'s) trims the answer and becomes
        the session's summary window."""
        body = jsonable(document)
        if isinstance(document, SessionWrite):
            body["messages"] = message_bodies(document.messages)
        elif "messages" in body:
            body["messages"] = message_bodies(body["messages"])
        params = query(
            namespace=self._ns(namespace),
            user_id=user_id,
            model_name=model_name,
            context_window_max=context_window_max,
        )
        path = self._session_path(session_id)
        headers = precondition(if_match)
        call = Call("PUT", path, parse(SessionView), params, body, headers, if_match is None)
        return (yield from ask(call))

    @endpoint
    def patch_session(
        self,
        session_id: str,
        patch: SessionPatch | Mapping[str, Any],
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        if_match: Version | None = None,
    ) -> Plan[SessionView]:
        """Change session fields without touching its messages (`data` is merged; null
        deletes a key). Resent when its outcome is unknown, unless `if_match` is given."""
        params = query(namespace=self._ns(namespace), user_id=user_id)
        return (
            yield from ask(
                Call(
                    "PATCH",
                    self._session_path(session_id),
                    parse(SessionView),
                    params,
                    jsonable(patch),
                    precondition(if_match),
                    idempotent=if_match is None,
                )
            )
        )

    @endpoint
    def delete_session(
        self, session_id: str, *, namespace: str | None = None, user_id: str | None = None
    ) -> Plan[None]:
        """Delete the session and every item of it (404 if there is none)."""
        params = query(namespace=self._ns(namespace), user_id=user_id)
        yield from ask(Call("DELETE", self._session_path(session_id), nothing, params))

    @endpoint
    def append_messages(
        self,
        session_id: str,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        ttl_seconds: int | None = None,
        profile: str | None = None,
        model_name: str | None = None,
        context_window_max: int | None = None,
    ) -> Plan[AppendView]:
        """Append messages (creates the session), 100 a request: the answer adds up every
        request's. Idempotent by message id: a message without one gets a ULID here, before
        the first try, so a resent append stores nothing twice. A window given
        (`context_window_max`, or `model_name`'s) becomes the session's summary window."""
        bodies = message_bodies(messages)
        if not bodies:
            raise ValueError("no messages to append")
        path = f"{self._session_path(session_id)}/messages"
        params = query(
            namespace=self._ns(namespace),
            user_id=user_id,
            model_name=model_name,
            context_window_max=context_window_max,
        )
        views: list[AppendView] = []
        for batch in batches(bodies, MAX_APPEND_MESSAGES):
            body = query(messages=list(batch), ttl_seconds=ttl_seconds, profile=profile)
            views.append((yield from ask(Call("POST", path, parse(AppendView), params, body))))
        last = views[-1]
        return last.model_copy(
            update={
                "created": views[0].created,
                "appended": [i for view in views for i in view.appended],
                "already_stored": [i for view in views for i in view.already_stored],
                "pruned": sum(view.pruned for view in views),
            }
        )

    @endpoint
    def list_messages(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        order: Literal["asc", "desc"] = "asc",
        roles: Sequence[str] | None = None,
    ) -> Plan[MessagePage]:
        """One page of the session's message log (`iter_messages` walks it all)."""
        params = query(
            namespace=self._ns(namespace),
            user_id=user_id,
            limit=limit,
            cursor=cursor,
            order=order,
            roles=",".join(roles) if roles else None,
        )
        path = f"{self._session_path(session_id)}/messages"
        return (yield from ask(Call("GET", path, parse(MessagePage), params)))

    @pager
    def iter_messages(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        order: Literal["asc", "desc"] = "asc",
        roles: Sequence[str] | None = None,
        page_size: int = 1_000,
    ) -> Pages[MessageView]:
        """Every message of the session's log, oldest (or newest) first, a page at a time."""
        params = query(
            namespace=self._ns(namespace),
            user_id=user_id,
            limit=page_size,
            order=order,
            roles=",".join(roles) if roles else None,
        )
        path = f"{self._session_path(session_id)}/messages"
        cursor: str | None = None
        while True:
            page = yield from ask(
                Call("GET", path, parse(MessagePage), query(**params, cursor=cursor))
            )
            if page.messages:
                yield Emit(page.messages)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    # -- scratchpad ------------------------------------------------------------------------

    def _pad(
        self,
        method: str,
        session_id: str | None,
        user_id: str | None,
        namespace: str | None,
        profile: str | None,
        **options: Any,
    ) -> tuple[str, str, dict[str, Any]]:
        """(method, path, query) of the scratchpad a call names: the session's, or with only
        a user, the user's (user-scoped profiles)."""
        params = query(namespace=self._ns(namespace), profile=profile, **options)
        if session_id is not None:
            path = f"{self._session_path(session_id)}/scratchpad"
            return method, path, query(**params, user_id=user_id)
        if user_id is not None:
            return method, f"/v1/users/{segment(user_id)}/scratchpad", params
        raise ValueError("name the scratchpad: session_id, or user_id for a user's")

    @endpoint
    def get_scratchpad(
        self,
        session_id: str | None = None,
        *,
        user_id: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
    ) -> Plan[ScratchpadView]:
        """The scratchpad: its content, `version` (the ETag), profile and format."""
        method, path, params = self._pad("GET", session_id, user_id, namespace, profile)
        return (yield from ask(Call(method, path, parse(ScratchpadView), params)))

    @endpoint
    def render_scratchpad(
        self,
        session_id: str | None = None,
        *,
        user_id: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
    ) -> Plan[str]:
        """The `<working_memory>` block for a system prompt, with instructions for the model."""
        method, path, params = self._pad(
            "GET", session_id, user_id, namespace, profile, render="prompt"
        )
        view = yield from ask(Call(method, path, parse(PromptView), params))
        return str(view.prompt)

    @endpoint
    def update_scratchpad(
        self,
        patch: Content,
        session_id: str | None = None,
        *,
        user_id: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
        if_match: Version | None = None,
    ) -> Plan[ScratchpadView]:
        """Merge into the scratchpad (objects deep-merge, text appends). Never resent when its
        outcome is unknown: a merge twice may append twice."""
        method, path, params = self._pad("PATCH", session_id, user_id, namespace, profile)
        body = {"content": patch}
        headers = precondition(if_match)
        call = Call(method, path, parse(ScratchpadView), params, body, headers, idempotent=False)
        return (yield from ask(call))

    @endpoint
    def replace_scratchpad(
        self,
        content: Content,
        session_id: str | None = None,
        *,
        user_id: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
        if_match: Version | None = None,
    ) -> Plan[ScratchpadView]:
        """Replace the scratchpad's content (resent when unknown, unless `if_match` is given:
        a resent conditional write would answer 409 to its own success)."""
        method, path, params = self._pad("PUT", session_id, user_id, namespace, profile)
        call = Call(
            method,
            path,
            parse(ScratchpadView),
            params,
            {"content": content},
            precondition(if_match),
            idempotent=if_match is None,
        )
        return (yield from ask(call))

    @endpoint
    def clear_scratchpad(
        self,
        session_id: str | None = None,
        *,
        user_id: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
        if_match: Version | None = None,
    ) -> Plan[ScratchpadView]:
        """Clear the scratchpad."""
        method, path, params = self._pad("DELETE", session_id, user_id, namespace, profile)
        headers = precondition(if_match)
        call = Call(method, path, parse(ScratchpadView), params, None, headers, if_match is None)
        return (yield from ask(call))

    @endpoint
    def edit_scratchpad(
        self,
        change: Callable[[Content], Content],
        session_id: str | None = None,
        *,
        user_id: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
        attempts: int = 10,
    ) -> Plan[ScratchpadView]:
        """Read the scratchpad, apply `change` to a copy of its content, and write the result
        back only if no one wrote in between (If-Match). When someone did (409), read it
        again and apply `change` again, up to `attempts` times, with jittered backoff.
        `change` must be a function of the content alone: it may run more than once."""
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        get = self._pad("GET", session_id, user_id, namespace, profile)
        put = self._pad("PUT", session_id, user_id, namespace, profile)
        for attempt in range(1, attempts + 1):
            pad = yield from ask(Call(get[0], get[1], parse(ScratchpadView), get[2]))
            content = change(copy.deepcopy(pad.content))
            write = Call(
                put[0],
                put[1],
                parse(ScratchpadView),
                put[2],
                {"content": content},
                precondition(pad.version),
                idempotent=False,
            )
            try:
                return (yield from ask(write))
            except ConflictError:
                if attempt == attempts:
                    raise
            yield Pause(self.retries.backoff_for(attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    # -- profiles --------------------------------------------------------------------------

    @endpoint
    def get_profile(self, name: str, *, namespace: str | None = None) -> Plan[ProfileView]:
        """A profile (the built-in `default` when none is stored under that name)."""
        params = query(namespace=self._ns(namespace))
        return (
            yield from ask(Call("GET", f"/v1/profiles/{segment(name)}", parse(ProfileView), params))
        )

    @endpoint
    def put_profile(
        self,
        name: str,
        spec: ProfileSpec | Mapping[str, Any],
        *,
        namespace: str | None = None,
        if_match: Version | None = None,
    ) -> Plan[ProfileView]:
        """Create or replace a profile (a namespace-wide setting: needs memory:admin)."""
        params = query(namespace=self._ns(namespace))
        path = f"/v1/profiles/{segment(name)}"
        call = Call(
            "PUT",
            path,
            parse(ProfileView),
            params,
            jsonable(spec),
            precondition(if_match),
            idempotent=if_match is None,
        )
        return (yield from ask(call))

    @endpoint
    def delete_profile(
        self, name: str, *, namespace: str | None = None, if_match: Version | None = None
    ) -> Plan[None]:
        """Delete a profile."""
        params = query(namespace=self._ns(namespace))
        path = f"/v1/profiles/{segment(name)}"
        headers = precondition(if_match)
        delete = Call("DELETE", path, nothing, params, None, headers, idempotent=if_match is None)
        yield from ask(delete)

    @endpoint
    def list_profiles(
        self, *, namespace: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Plan[ProfileList]:
        """One page of the namespace's profiles (`iter_profiles` walks them all)."""
        params = query(namespace=self._ns(namespace), limit=limit, cursor=cursor)
        return (yield from ask(Call("GET", "/v1/profiles", parse(ProfileList), params)))

    @pager
    def iter_profiles(
        self, *, namespace: str | None = None, page_size: int = 100
    ) -> Pages[ProfileView]:
        """Every profile of the namespace, a page at a time."""
        cursor: str | None = None
        while True:
            params = query(namespace=self._ns(namespace), limit=page_size, cursor=cursor)
            page = yield from ask(Call("GET", "/v1/profiles", parse(ProfileList), params))
            if page.profiles:
                yield Emit(page.profiles)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    # -- long-term memory ------------------------------------------------------------------

    @endpoint
    def create_memories(
        self,
        memories: Iterable[MemoryRecordIn | Mapping[str, Any]],
        *,
        deduplicate: bool = True,
    ) -> Plan[CreatedAck]:
        """Create long-term records, 100 a request (the answer adds up every request's).
        Idempotent by record id (a stored id is replaced): a mapping without an id gets a ULID
        here, before the first try. The client's namespace goes to records that name none."""
        bodies = [with_id(memory) for memory in memories]
        if self.namespace is not None:
            for body in bodies:
                body.setdefault("namespace", self.namespace)
        created: list[str] = []
        duplicates: list[str] = []
        for batch in batches(bodies, MAX_CREATE):
            body = {"memories": list(batch), "deduplicate": deduplicate}
            ack = yield from ask(
                Call("POST", "/v1/long-term-memory/", parse(CreatedAck), body=body)
            )
            created += ack.created
            duplicates += ack.duplicates
        return CreatedAck(status="ok", created=created, duplicates=duplicates)

    @endpoint
    def get_memory(self, memory_id: str) -> Plan[MemoryRecordView]:
        """A record, with `indexing`: whether its current version is searchable yet."""
        path = f"/v1/long-term-memory/{segment(memory_id)}"
        return (yield from ask(Call("GET", path, parse(MemoryRecordView))))

    @endpoint
    def edit_memory(
        self, memory_id: str, edit: MemoryEdit | Mapping[str, Any]
    ) -> Plan[MemoryRecordView]:
        """Change a record's fields (a new text is embedded again)."""
        path = f"/v1/long-term-memory/{segment(memory_id)}"
        return (yield from ask(Call("PATCH", path, parse(MemoryRecordView), body=jsonable(edit))))

    @endpoint
    def delete_memories(self, memory_ids: Iterable[str], *, erase: bool = False) -> Plan[Ack]:
        """Delete records by id, 100 a request; their vectors follow. Each keeps its history
        (restore_memory brings it back) unless `erase`: then nothing of it is left."""
        ids = list(memory_ids)
        for batch in batches(ids, MAX_DELETE):
            params: dict[str, Any] = {"memory_ids": list(batch)}
            if erase:
                params["erase"] = "true"
            yield from ask(Call("DELETE", "/v1/long-term-memory", parse(Ack), params))
        return Ack(status="ok")

    @endpoint
    def memory_history(
        self, memory_id: str, *, limit: int = 50, before: int | None = None
    ) -> Plan[MemoryHistoryView]:
        """One page of a record's versions, newest first (`next_before` pages on)."""
        path = f"/v1/long-term-memory/{segment(memory_id)}/history"
        params: dict[str, Any] = {"limit": limit}
        if before is not None:
            params["before"] = before
        return (yield from ask(Call("GET", path, parse(MemoryHistoryView), params)))

    @pager
    def iter_memory_history(self, memory_id: str) -> Pages[MemoryVersionView]:
        """Every version of a record, newest first."""
        path = f"/v1/long-term-memory/{segment(memory_id)}/history"
        params: dict[str, Any] = {"limit": 100}
        while True:
            page = yield from ask(Call("GET", path, parse(MemoryHistoryView), dict(params)))
            if page.versions:
                yield Emit(page.versions)
            if page.next_before is None:
                return
            params["before"] = page.next_before

    @endpoint
    def retire_memory(
        self, memory_id: str, *, valid_until: str | datetime | None = None
    ) -> Plan[MemoryRecordView]:
        """Mark a record as no longer true (since `valid_until`, default now); it is kept."""
        path = f"/v1/long-term-memory/{segment(memory_id)}/retire"
        body = jsonable({} if valid_until is None else {"valid_until": valid_until})
        # A record retired already is answered as it is: resending is safe.
        return (yield from ask(Call("POST", path, parse(MemoryRecordView), body=body)))

    @endpoint
    def restore_memory(self, memory_id: str, version: int) -> Plan[MemoryRecordView]:
        """Make version `version` of a record current again (also after its delete): a new
        version, so it is not resent when its outcome is unknown."""
        path = f"/v1/long-term-memory/{segment(memory_id)}/restore"
        call = Call(
            "POST", path, parse(MemoryRecordView), body={"version": version}, idempotent=False
        )
        return (yield from ask(call))

    @endpoint
    def wait_until_indexed(
        self, memory_ids: Iterable[str], *, timeout: float = 30.0, interval: float = 0.25
    ) -> Plan[list[MemoryRecordView]]:
        """Wait until no record is `pending` (indexing is asynchronous: about a second), and
        return them. Raises IndexingTimeout after `timeout` seconds of waiting."""
        ids = list(memory_ids)
        done: dict[str, MemoryRecordView] = {}
        waited = 0.0
        while True:
            for memory_id in [i for i in ids if i not in done]:
                path = f"/v1/long-term-memory/{segment(memory_id)}"
                record = yield from ask(Call("GET", path, parse(MemoryRecordView)))
                if record.indexing != "pending":
                    done[memory_id] = record
            if len(done) == len(set(ids)):
                return [done[i] for i in ids]
            if waited >= timeout:
                pending = sorted(set(ids) - done.keys())
                raise IndexingTimeout(f"still pending after {timeout} s: {', '.join(pending)}")
            yield Pause(interval)
            waited += interval

    def _search_body(
        self, search: str | SearchRequest | Mapping[str, Any], filters: dict[str, Any]
    ) -> dict[str, Any]:
        body = {"text": search} if isinstance(search, str) else dict(jsonable(search))
        body.update(jsonable(filters))
        if self.namespace is not None:
            body.setdefault("namespace", self.namespace)
        return body

    @endpoint
    def search_memories(
        self, search: str | SearchRequest | Mapping[str, Any] = "", /, **filters: Any
    ) -> Plan[MemoryResults]:
        """One page of a search: `search` is the text (or a whole SearchRequest) and
        `filters` are SearchRequest's fields (`user_id={"eq": "ada"}`, `limit=5`...). An
        empty text lists by the filters alone, newest first."""
        body = self._search_body(search, filters)
        call = Call("POST", "/v1/long-term-memory/search", parse(MemoryResults), body=body)
        return (yield from ask(call))

    @pager
    def iter_search(
        self, search: str | SearchRequest | Mapping[str, Any] = "", /, **filters: Any
    ) -> Pages[MemoryHit]:
        """Every hit of a search, best first, a page (`limit`, default 100) at a time, each
        once. The index answers the first 10,000. Pages are separate searches, not a snapshot:
        a hit whose rank moves between them may be missed (iter_memories lists by time)."""
        return (yield from self._search_pages(search, filters))

    @pager
    def iter_memories(self, /, **filters: Any) -> Pages[MemoryHit]:
        """Every record (and indexed message) matching the filters, newest first: a search
        with no text. Only what is indexed is listed."""
        return (yield from self._search_pages("", filters))

    def _search_pages(
        self, search: str | SearchRequest | Mapping[str, Any], filters: dict[str, Any]
    ) -> Pages[MemoryHit]:
        body = self._search_body(search, filters)
        body.setdefault("limit", 100)
        # Each page is a search of its own: a hit whose rank moved between two pages (ties,
        # records written meanwhile) can come again; it is shown once.
        seen: set[str] = set()
        while True:
            call = Call("POST", "/v1/long-term-memory/search", parse(MemoryResults), body=body)
            page = yield from ask(call)
            fresh = [hit for hit in page.memories if hit.id not in seen]
            seen.update(hit.id for hit in fresh)
            if fresh:
                yield Emit(fresh)
            if page.next_offset is None:
                return
            body = {**body, "offset": page.next_offset}

    @endpoint
    def memory_prompt(
        self, prompt: str | PromptRequest | Mapping[str, Any], /, **options: Any
    ) -> Plan[HydratedPrompt]:
        """Hydrate a prompt for the model's next turn: the session's summary, scratchpad,
        recalled and recent turns and long-term memories, then the query, within a token
        budget. `prompt` is the query (or a whole PromptRequest); `options` are
        PromptRequest's fields (`session={"session_id": ..., "user_id": ...}`...)."""
        body = {"query": prompt} if isinstance(prompt, str) else dict(jsonable(prompt))
        body.update(jsonable(options))
        session = body.get("session")
        if isinstance(session, dict) and self.namespace is not None:
            session.setdefault("namespace", self.namespace)
        return (yield from ask(Call("POST", "/v1/memory/prompt", parse(HydratedPrompt), body=body)))

    # -- agent tools -----------------------------------------------------------------------

    @endpoint
    def tools(
        self,
        format: ToolsFormat = "openai",
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
    ) -> Plan[list[dict[str, Any]]]:
        """Tool definitions to give the model: `openai` (Chat Completions),
        `openai-responses` (the Responses API), `anthropic` or `bedrock` (Converse). The
        scratchpad's update tool is typed by the profile's schema."""
        wire = "openai" if format == "openai-responses" else format
        params = query(
            format=wire,
            session_id=session_id,
            user_id=user_id,
            namespace=self._ns(namespace),
            profile=profile,
        )
        view = yield from ask(Call("GET", "/v1/tools", parse(ToolsView), params))
        return responses_tools(view.tools) if format == "openai-responses" else view.tools

    @endpoint
    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
    ) -> Plan[ToolSuccess | ToolFailure]:
        """Run one tool by name: `{"result": ...}`, or `{"error": ...}` when the model can act
        on the failure. A call that names only its session acts for the session's user."""
        call = self._tool_call(name, arguments, session_id, user_id, namespace, profile)
        return (yield from ask(call))

    @endpoint
    def run_tool_call(
        self,
        call: Any,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
    ) -> Plan[ToolOutcome]:
        """Run a tool call as a model SDK returned it (OpenAI Chat Completions or Responses,
        Anthropic, Bedrock Converse: memkit.client.tools). `outcome.to_message()` is the
        result in the shape that API takes back."""
        parsed = parse_tool_call(call)
        answer = yield from ask(
            self._tool_call(parsed.name, parsed.arguments, session_id, user_id, namespace, profile)
        )
        return ToolOutcome(parsed, answer)

    def _tool_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None,
        session_id: str | None,
        user_id: str | None,
        namespace: str | None,
        profile: str | None,
    ) -> Call[ToolSuccess | ToolFailure]:
        body = query(
            name=name,
            arguments=dict(arguments) if isinstance(arguments, Mapping) else arguments,
            session_id=session_id,
            user_id=user_id,
            namespace=self._ns(namespace),
            profile=profile,
        )
        # Reads (and clearing) may be resent; a write or an add_memory only when it did not run.
        repeatable = name in REPEATABLE_TOOLS
        return Call("POST", "/v1/tools/call", tool_answer, body=body, idempotent=repeatable)
