"""Prompt hydration (API.md "Prompt hydration"): the messages to send a model for the next
turn, assembled from every kind of memory within a token budget.

The prompt, in order:

1. the session's summary (`context`), a system message (AMS's wording);
2. the session's scratchpad block (memkit.scratchpad.prompt), a system message, when the
   scratchpad holds something or the session's profile is not the built-in default;
3. semantic recall: the `recall_k` older messages of this session closest to the query, each
   with `message_range` neighbours, ordered by time, never one of the recent turns shown;
4. the long-term memories related to the query, one system message in AMS's form
   ("## Long term memories related to the user's query" then "- text (ID: id)" lines). By
   default the user's memories outside this session (their records, and their messages in
   other sessions); with no user known, this session's own records; or the caller's
   `long_term_search` filters, with the query as the text;
5. the recent turns, the newest that fit;
6. the query, as the last user message.

`recalled_position` moves part 3: `prepend` (where listed), `append` (after the recent
turns) or `interleave` (among the recent turns, by time). `tool_calls: drop` leaves out tool
results (role tool or function, or a tool_call_id) and assistant messages that call tools.
Messages keep AMS's shape: a user message is sent as user, a system message (role system or
developer) as system, in its place among the turns, and every other role (tool, function...)
as assistant. AMS sends system messages as assistant, which made the assistant's own
instructions read as something it said.

The token budget (default: the model's window less room for the answer, a quarter of the
window and at most 4,096 tokens; the window is the request's, else the one the session's
writes gave, else 8,000 is the budget) is split as follows. The query
is always whole; of the rest, each part may use at most its share, which no other part can
take from it:

    summary      15%   cut short (its start kept) when longer
    scratchpad   15%   cut short, with a note to read the whole scratchpad before replacing it
    recalled     15%   the lowest-ranked recalled messages (with their neighbours) go first
    long-term    20%   the lowest-ranked memories go first
    recent       the rest: at least 35%, plus whatever the parts above leave unused; the
                 oldest turns go first

Tokens are memkit's estimate (memkit.tokens), counted per message as the session windows
count them ("<role>: <content>"). The response reports, per part, the tokens used and allowed.

Concurrency: the session read (one DynamoDB query and one batch read) and the vector searches
(recall, and one or two long-term searches) run at the same time in a small thread pool,
under the request's deadline (memkit.times.DeadlinePool).
Recall does not wait for the session to know which messages are recent: it asks the index for
`recall_k + recent_messages_limit` hits and leaves out the recent ones afterwards. Two reads
must wait: the recalled messages' neighbours (they depend on which hits remain), and the
long-term search when the caller does not name the user (it needs the session's user to
stay within that user's memories).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from memkit.errors import BadRequest, FieldProblem, NotFound, ValidationFailed
from memkit.models.domain import MessageRef, Owner, StoredMessage, is_instruction
from memkit.models.memory import MAX_QUERY, MemoryHit, MemoryResults, SearchRequest
from memkit.models.prompt import (
    HydratedPrompt,
    PartTokens,
    PromptMessage,
    PromptParts,
    PromptRequest,
    Role,
    TextContent,
)
from memkit.models.session import MemoryType, epoch_us
from memkit.observability import metrics
from memkit.scratchpad.prompt import render_prompt
from memkit.scratchpad.tools import ToolName
from memkit.service.sessions import SessionService
from memkit.service.windows import effective_window, message_tokens
from memkit.store.protocol import message_order
from memkit.times import DeadlinePool
from memkit.tokens import estimate_tokens

if TYPE_CHECKING:
    from memkit.service.long_term import LongTermService
    from memkit.store.records import RecordTable

DEFAULT_BUDGET = 8_000
ANSWER_SHARE = 0.25
MAX_ANSWER_ROOM = 4_096
SHARES = {"summary": 0.15, "scratchpad": 0.15, "recalled": 0.15, "long_term": 0.20}
DEFAULT_LONG_TERM_LIMIT = 10
MAX_SEARCH_LIMIT = 100
WORKERS = 8

SUMMARY_HEADER = "## A summary of the conversation so far:\n"
LONG_TERM_HEADER = "## Long term memories related to the user's query"
NO_LONG_TERM = "No relevant long-term memories found."
CUT_MARK = " […]"
PAD_CUT_MARK = (
    f"\n[…cut short here to fit the prompt: call {ToolName.GET.value} to read all of it "
    "before you replace it]"
)
PAD_END = "\n</working_memory>\n"
TOOL_ROLES = frozenset({"tool", "function"})
# A cut backs up to a space when one is this close, so words stay whole.
WORD_BACKOFF = 40


@dataclass
class _Part:
    """One part as assembled: its messages (or memories) and its accounting."""

    allowed: int
    messages: list[PromptMessage] = field(default_factory=list)
    items: int = 0
    dropped: int = 0
    truncated: bool = False

    @property
    def used(self) -> int:
        return sum(_tokens(m) for m in self.messages)

    def tokens(self) -> PartTokens:
        return PartTokens(
            used=self.used,
            allowed=self.allowed,
            items=self.items,
            dropped=self.dropped,
            truncated=self.truncated,
        )


@dataclass(frozen=True)
class _SessionView:
    summary: str | None = None
    scratchpad: str | None = None
    recent: tuple[StoredMessage, ...] = ()
    user_id: str | None = None
    exists: bool = False
    window_tokens: int | None = None


def _tokens(message: PromptMessage) -> int:
    return message_tokens(message.role, message.content.text)


def _message(role: Role, text: str) -> PromptMessage:
    return PromptMessage(role=role, content=TextContent(text=text))


def _role(role: str) -> Role:
    """A stored message's role in the prompt: user and system (or developer) keep theirs,
    every other role (tool, function...) is assistant, as AMS sends them."""
    if role == "user":
        return "user"
    return "system" if is_instruction(role) else "assistant"


def _turn(message: StoredMessage) -> PromptMessage:
    return _message(_role(message.role), message.content)


def _is_tool_call(message: StoredMessage) -> bool:
    return bool(message.role in TOOL_ROLES or message.tool_call_id or message.tool_calls)


def cut_text(text: str, role: str, limit: int, mark: str = CUT_MARK) -> str | None:
    """The longest start of `text` that, with `mark`, fits `limit` tokens as a message of
    `role`; `text` itself when it fits; None when not even a word fits."""
    if message_tokens(role, text) <= limit:
        return text

    def fits(length: int) -> bool:
        return message_tokens(role, text[:length] + mark) <= limit

    # A longer start never costs fewer tokens: bisect for the first length that does not fit.
    length = bisect.bisect_left(range(len(text) + 1), True, key=lambda n: not fits(n)) - 1
    if length <= 0:
        return None
    start = text[:length]
    space = max(start.rfind(" "), start.rfind("\n"))
    if space > 0 and length - space <= WORD_BACKOFF:
        start = start[:space]
    start = start.rstrip()
    return start + mark if start else None


def asked_window(request: PromptRequest) -> int | None:
    """The window the request names (its session's model_name or context_window_max)."""
    session = request.session
    if session is None:
        return None
    try:
        return effective_window(session.model_name, session.context_window_max)
    except ValidationFailed as exc:
        problems = [FieldProblem(f"session.{p.field}", p.reason) for p in exc.errors]
        raise ValidationFailed(exc.detail, problems) from exc


def token_budget(request: PromptRequest, window: int | None) -> int:
    """The caller's budget; else the window (the request's, else the session's) less room
    for the answer; else 8,000."""
    if request.token_budget is not None:
        return request.token_budget
    if window is None:
        return DEFAULT_BUDGET
    return max(1, window - min(MAX_ANSWER_ROOM, int(window * ANSWER_SHARE)))


def _require_source(request: PromptRequest) -> None:
    if request.session is None and not request.long_term_search:
        raise BadRequest(
            "either session or long_term_search must be given",
            [
                FieldProblem("session", "name the session to hydrate the prompt from"),
                FieldProblem(
                    "long_term_search",
                    "or give filters for long-term memories (true: the defaults)",
                ),
            ],
        )


def _needs_session_user(owner: Owner, request: PromptRequest) -> bool:
    """Whether the long-term search must wait for the session read to learn the user."""
    asked = request.long_term_search
    if request.session is None or owner.user_id is not None or asked is False:
        return False
    return not (isinstance(asked, SearchRequest) and asked.user_id is not None)


def _created_us(created_at: str) -> int:
    return epoch_us(datetime.fromisoformat(created_at.replace("Z", "+00:00")))


class PromptService:
    """Hydrates prompts from sessions, long-term memory and the message log."""

    def __init__(
        self,
        sessions: SessionService,
        long_term: LongTermService,
        messages: RecordTable,
        workers: int = WORKERS,
    ) -> None:
        self._sessions = sessions
        self._long_term = long_term
        self._messages = messages
        self._workers = workers

    def hydrate(self, owner: Owner, request: PromptRequest) -> HydratedPrompt:
        """The prompt for `request` (see the module docstring), `owner` being the session's
        scope (tenant, namespace, the caller's user)."""
        _require_source(request)
        window = asked_window(request)  # an unknown model is refused before any read
        text = request.query.strip()[:MAX_QUERY]
        session = request.session
        with DeadlinePool(max_workers=self._workers) as pool:
            session_read: Future[_SessionView] | None = None
            recall: Future[MemoryResults] | None = None
            if session is not None:
                session_read = pool.submit(self._read_session, owner, session.session_id, request)
                if request.recall_k:
                    recall = pool.submit(
                        self._long_term.search,
                        owner.tenant,
                        self._recall_request(owner, request, text),
                    )
            searches: list[Future[MemoryResults]] = []
            needs_session_user = _needs_session_user(owner, request)
            if not needs_session_user:
                searches = self._search(pool, owner, request, text, owner.user_id)
            view = session_read.result() if session_read is not None else _SessionView()
            if needs_session_user:
                searches = self._search(pool, owner, request, text, view.user_id)
            recalled_hits = recall.result().memories if recall and view.exists else []
            long_term_hits = self._merged([f.result() for f in searches])
            # A request that names no window gets the session's (the one its writes gave).
            budget = token_budget(request, window if window is not None else view.window_tokens)
            prompt = self._assemble(
                pool, owner, request, budget, view, recalled_hits, long_term_hits, searches
            )
        metrics.add_metric(name="PromptsHydrated", unit="Count", value=1)
        return prompt

    # -- reads -------------------------------------------------------------------------------

    def _read_session(self, owner: Owner, session_id: str, request: PromptRequest) -> _SessionView:
        """The session's summary, scratchpad block and newest messages; a session that does
        not exist is an empty one (AMS), another user's is a 403 (raised by the read)."""
        try:
            document = self._sessions.get(owner, session_id, request.recent_messages_limit)
        except NotFound:
            return _SessionView(user_id=owner.user_id)
        meta, pad = document.meta, document.pad
        block = None
        if pad is not None and (pad.content not in (None, "", {}) or not pad.profile.builtin):
            block = render_prompt(pad.content, pad.profile)
        recent = tuple(document.window.messages)
        if request.tool_calls == "drop":
            recent = tuple(m for m in recent if not _is_tool_call(m))
        return _SessionView(
            summary=meta.context or None,
            scratchpad=block,
            recent=recent,
            user_id=owner.user_id or meta.user_id,
            exists=True,
            window_tokens=meta.window_tokens,
        )

    def _recall_request(self, owner: Owner, request: PromptRequest, text: str) -> SearchRequest:
        assert request.session is not None
        return SearchRequest(
            text=text,
            namespace={"eq": owner.namespace},
            session_id={"eq": request.session.session_id},
            memory_type={"eq": MemoryType.MESSAGE.value},
            # The recent messages are left out afterwards: ask for enough to still have k.
            limit=min(MAX_SEARCH_LIMIT, request.recall_k + request.recent_messages_limit),
        )

    def _long_term_requests(
        self, owner: Owner, request: PromptRequest, text: str, user_id: str | None
    ) -> list[SearchRequest]:
        """The long-term searches to run (their hits are merged by score)."""
        asked = request.long_term_search
        session = request.session
        if asked is False or (asked is None and session is None):
            return []
        if isinstance(asked, SearchRequest):
            changes: dict[str, object] = {"text": text}
            if session is not None and asked.user_id is None and user_id is not None:
                changes["user_id"] = {"eq": user_id}
            if session is not None and asked.namespace is None:
                changes["namespace"] = {"eq": owner.namespace}
            return [asked.model_copy(update=changes)]
        limit = DEFAULT_LONG_TERM_LIMIT
        if session is None:  # `true` without a session: the caller's user's records, or for
            # a caller acting tenant-wide (an admin naming no user), the tenant's (AMS: all)
            user = {"eq": owner.user_id} if owner.user_id is not None else None
            return [SearchRequest(text=text, user_id=user, limit=limit)]
        namespace = {"eq": owner.namespace}
        not_messages = {"ne": MemoryType.MESSAGE.value}
        if user_id is None:  # no user known: only what this session itself stored
            return [
                SearchRequest(
                    text=text,
                    namespace=namespace,
                    session_id={"eq": session.session_id},
                    memory_type=not_messages,
                    limit=limit,
                )
            ]
        # The user's records, and the user's messages in other sessions (recall has this
        # session's): the index's filters are conjunctions, so two searches.
        return [
            SearchRequest(
                text=text,
                namespace=namespace,
                user_id={"eq": user_id},
                memory_type=not_messages,
                limit=limit,
            ),
            SearchRequest(
                text=text,
                namespace=namespace,
                user_id={"eq": user_id},
                session_id={"ne": session.session_id},
                memory_type={"eq": MemoryType.MESSAGE.value},
                limit=limit,
            ),
        ]

    def _search(
        self,
        pool: ThreadPoolExecutor,
        owner: Owner,
        request: PromptRequest,
        text: str,
        user_id: str | None,
    ) -> list[Future[MemoryResults]]:
        return [
            pool.submit(self._long_term.search, owner.tenant, search)
            for search in self._long_term_requests(owner, request, text, user_id)
        ]

    @staticmethod
    def _merged(results: list[MemoryResults]) -> list[MemoryHit]:
        if len(results) == 1:
            return list(results[0].memories)
        hits = sorted(
            (hit for result in results for hit in result.memories), key=lambda h: -h.score
        )
        return hits[:DEFAULT_LONG_TERM_LIMIT]

    def _recalled_groups(
        self,
        pool: ThreadPoolExecutor,
        owner: Owner,
        request: PromptRequest,
        hits: list[MemoryHit],
        recent_ids: set[str],
    ) -> list[list[StoredMessage]]:
        """The top recall_k hits that are not recent turns, each with its neighbours (oldest
        first), best first. The hits are read again from the table (a tool call shows only
        there) and their neighbours fetched, all at once."""
        session = request.session
        if session is None or not hits:
            return []
        drop_tools = request.tool_calls == "drop"
        chosen = [
            hit
            for hit in hits
            if hit.id not in recent_ids and not (drop_tools and (hit.role or "") in TOOL_ROLES)
        ][: request.recall_k]
        if not chosen:
            return []
        wanted = [
            MessageRef(owner.tenant, owner.namespace, session.session_id, h.id) for h in chosen
        ]
        centres = pool.submit(self._messages.messages_by_ref, wanted)
        around: list[Future[list[StoredMessage]] | None] = [
            pool.submit(
                self._messages.messages_around,
                ref,
                message_order(_created_us(hit.created_at), hit.id),
                request.message_range,
            )
            if request.message_range
            else None
            for ref, hit in zip(wanted, chosen, strict=True)
        ]
        found = centres.result()
        groups: list[list[StoredMessage]] = []
        for key, neighbours in zip(wanted, around, strict=True):
            centre = found.get(key)
            if centre is None or (drop_tools and _is_tool_call(centre)):
                continue
            group = [centre, *(neighbours.result() if neighbours is not None else [])]
            groups.append(
                sorted(
                    (
                        m
                        for m in group
                        if m.id not in recent_ids and not (drop_tools and _is_tool_call(m))
                    ),
                    key=lambda m: m.order,
                )
            )
        return groups

    # -- assembly ----------------------------------------------------------------------------

    def _assemble(
        self,
        pool: ThreadPoolExecutor,
        owner: Owner,
        request: PromptRequest,
        budget: int,
        view: _SessionView,
        recalled_hits: list[MemoryHit],
        long_term_hits: list[MemoryHit],
        searches: list[Future[MemoryResults]],
    ) -> HydratedPrompt:
        query = _message("user", request.query)
        rest = max(0, budget - _tokens(query))
        allowed = {name: int(rest * share) for name, share in SHARES.items()}
        summary = _block(
            SUMMARY_HEADER + view.summary if view.summary else None, allowed["summary"]
        )
        scratchpad = _scratchpad_block(view.scratchpad, allowed["scratchpad"])
        fixed = summary.used + scratchpad.used

        # Recent turns at the least they can have: whatever recall leaves out is older.
        floor = rest - fixed - allowed["recalled"] - allowed["long_term"]
        recent_ids = {m.id for m in _newest(view.recent, floor)}
        groups = self._recalled_groups(pool, owner, request, recalled_hits, recent_ids)
        recalled, recalled_messages = _recalled(groups, allowed["recalled"])
        session_id = request.session.session_id if request.session else None
        shown = recent_ids | {m.id for m in recalled_messages}
        memories = [h for h in long_term_hits if not _shown_message(h, owner, session_id, shown)]
        long_term, kept = _long_term(memories, allowed["long_term"], searched=bool(searches))

        # The recent turns get the rest. A recalled message (or a long-term hit) they now
        # include moves there, which frees tokens for more turns: repeat until nothing moves
        # (the turns only grow, the other parts only shrink).
        while True:
            recent_allowed = rest - fixed - recalled.used - long_term.used
            recent_messages = _newest(view.recent, recent_allowed)
            now_recent = {m.id for m in recent_messages}
            still_recalled = [m for m in recalled_messages if m.id not in now_recent]
            memories = [h for h in kept if not _shown_message(h, owner, session_id, now_recent)]
            if len(still_recalled) == len(recalled_messages) and len(memories) == len(kept):
                break
            recalled_messages = still_recalled
            recalled = _Part(
                allowed=recalled.allowed,
                messages=[_turn(m) for m in recalled_messages],
                items=len(recalled_messages),
                dropped=recalled.dropped,
            )
            if len(memories) < len(kept):
                dropped = long_term.dropped
                # Every memory shown may now be a turn: then no block (not "none found").
                long_term, kept = _long_term(memories, long_term.allowed, searched=bool(memories))
                long_term.dropped = dropped
        recent = _Part(
            allowed=recent_allowed,
            messages=[_turn(m) for m in recent_messages],
            items=len(recent_messages),
            dropped=len(view.recent) - len(recent_messages),
        )

        conversation = recent.messages
        if request.recalled_position == "interleave":
            by_time = sorted([*recalled_messages, *recent_messages], key=lambda m: m.order)
            conversation = [_turn(m) for m in by_time]
        messages = [
            *summary.messages,
            *scratchpad.messages,
            *(recalled.messages if request.recalled_position == "prepend" else []),
            *long_term.messages,
            *conversation,
            *(recalled.messages if request.recalled_position == "append" else []),
            query,
        ]
        query_part = _Part(allowed=_tokens(query), messages=[query], items=1)
        parts = PromptParts(
            summary=summary.tokens(),
            scratchpad=scratchpad.tokens(),
            recalled=recalled.tokens(),
            long_term=long_term.tokens(),
            recent=recent.tokens(),
            query=query_part.tokens(),
        )
        return HydratedPrompt(
            messages=messages,
            parts=parts,
            total_tokens=sum(_tokens(m) for m in messages),
            token_budget=budget,
            long_term_memories=kept or None,
        )


def _block(text: str | None, allowed: int, mark: str = CUT_MARK) -> _Part:
    """A system message cut to `allowed` tokens (none when not even a word fits)."""
    part = _Part(allowed=allowed)
    if not text:
        return part
    shown = cut_text(text, "system", allowed, mark)
    if shown is None:
        part.dropped = 1
        return part
    part.messages = [_message("system", shown)]
    part.items = 1
    part.truncated = shown != text
    return part


def _scratchpad_block(text: str | None, allowed: int) -> _Part:
    """The scratchpad block cut to `allowed` tokens: its content is cut, with a note, and
    the closing tag and the instructions stay whole when they fit."""
    if not text or message_tokens("system", text) <= allowed:
        return _block(text, allowed)
    content, end, instructions = text.rpartition(PAD_END)
    if end:
        tail = end + instructions
        # The tail starts with a newline, so its tokens add to the content's.
        shown = cut_text(content, "system", allowed - estimate_tokens(tail), PAD_CUT_MARK)
        if shown is not None:
            return _Part(
                allowed=allowed,
                messages=[_message("system", shown + tail)],
                items=1,
                truncated=True,
            )
    return _block(text, allowed, PAD_CUT_MARK)


def _newest(messages: Sequence[StoredMessage], allowed: int) -> list[StoredMessage]:
    """The newest messages that fit `allowed` tokens together, oldest first."""
    kept: list[StoredMessage] = []
    used = 0
    for message in reversed(messages):
        cost = _tokens(_turn(message))
        if used + cost > allowed:
            break
        used += cost
        kept.append(message)
    kept.reverse()
    return kept


def _recalled(groups: list[list[StoredMessage]], allowed: int) -> tuple[_Part, list[StoredMessage]]:
    """The best groups that fit `allowed` together (a message in two groups counts once),
    then every message by time."""
    seen: set[str] = set()
    kept: list[StoredMessage] = []
    used = 0
    dropped = 0
    for rank, group in enumerate(groups):
        new = [m for m in group if m.id not in seen]
        cost = sum(_tokens(_turn(m)) for m in new)
        if used + cost > allowed:
            dropped = len({m.id for g in groups[rank:] for m in g} - seen)
            break
        used += cost
        seen.update(m.id for m in new)
        kept.extend(new)
    kept.sort(key=lambda m: m.order)
    part = _Part(
        allowed=allowed, messages=[_turn(m) for m in kept], items=len(kept), dropped=dropped
    )
    return part, kept


def _shown_message(hit: MemoryHit, owner: Owner, session_id: str | None, ids: set[str]) -> bool:
    """Whether a long-term hit is a message of this session already in the prompt."""
    return (
        hit.memory_type is MemoryType.MESSAGE
        and session_id is not None
        and hit.session_id == session_id
        and hit.namespace == owner.namespace
        and hit.id in ids
    )


def _long_term(
    hits: list[MemoryHit], allowed: int, searched: bool
) -> tuple[_Part, list[MemoryHit]]:
    """AMS's long-term system message with the best memories that fit `allowed`. No message
    when no search ran, or when memories were found and not even one fits."""
    part = _Part(allowed=allowed)
    if not searched:
        return part, []
    # Lines are separated by newlines, so the message costs the heading plus each line.
    used = message_tokens("system", LONG_TERM_HEADER)
    lines: list[str] = []
    for rank, hit in enumerate(hits):
        line = f"- {hit.text} (ID: {hit.id})"
        cost = estimate_tokens(line)
        if used + cost > allowed:
            part.dropped = len(hits) - rank
            break
        used += cost
        lines.append(line)
    kept = hits[: len(lines)]
    message = _message("system", f"{LONG_TERM_HEADER}\n" + ("\n".join(lines) or NO_LONG_TERM))
    if (hits and not kept) or _tokens(message) > allowed:
        part.dropped = len(hits)
        return part, []
    part.messages = [message]
    part.items = len(kept)
    return part, kept
