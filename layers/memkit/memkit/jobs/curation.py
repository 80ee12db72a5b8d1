"""Background curation of sessions: running summaries, extraction into long-term memory, and
titles. Never inside a client's request: the curator reads session writes off the table's
stream and queues jobs; the memory worker runs them with the configured MemoryModel.

- summarize: when the messages in a session's view pass `threshold` of the window, the
  older ones are folded into the session's `context` (the running summary), keeping the
  newest `keep` share of the window in view. The window is the session's own when its
  client gave one (a write's context_window_max or model_name, as on AMS), else the
  server's. The messages stay in the log; only the view moves (`view_from`). The write is
  conditional on the session's version, and a job that finds the view already small does
  nothing, so retries and duplicates are harmless.
- extract: debounced. Each write queues a job delayed by the quiet period, stamped with the
  session's `updated_at`; a job that finds a newer write does nothing (that write's own job
  follows). Messages not yet read for memories are given to the model by the session's
  `long_term_memory_strategy`; each fact it finds is curated against the user's current
  memories closest to it (MemoryModel.curate: added; superseding the memories it
  contradicts or refines, which are kept, retired; or skipped because one says it already,
  which gains the fact's sources; the local model only skips word-for-word repeats), stored
  as a long-term record (`extracted_from` the messages, deduplicated by content hash), and
  the messages are marked read only once what the model found in them is stored (an unusable answer
  fails the job, an answer cut short is asked again with half the turns). A job reads at
  most EXTRACT_LIMIT unread messages; a longer backlog continues with the next write's job.
  A system (or developer) message instructs the assistant: it is never given to the model as
  evidence about the user, only marked read with the rest.
- title: a session with two or more messages and no title gets one from its first turns.
- describe: a long-term record created without topics or entities gets them from the model.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, get_args

from memkit.errors import NotFound, ValidationFailed, VersionConflict
from memkit.ids import new_ulid
from memkit.llm.chunks import in_chunks
from memkit.llm.protocol import (
    Candidate,
    Extracted,
    MemoryModel,
    Strategy,
    Turn,
    fact_key,
)
from memkit.models.domain import Owner, SessionMeta, StoredMessage, StoredRecord, is_instruction
from memkit.models.memory import (
    CreateMemories,
    MemoryEdit,
    MemoryHit,
    MemoryRecordIn,
    SearchRequest,
)
from memkit.models.users import JobKind as DeletionJobKind
from memkit.observability import logger, metrics
from memkit.store.changes import ItemChange, SessionValue, Value
from memkit.store.curation import CurationTable
from memkit.store.sessions import SessionTable

if TYPE_CHECKING:
    from memkit.service.long_term import LongTermService

JobKind = Literal["summarize", "extract", "title", "describe", "delete_user", "delete_memory"]
JOB_KINDS: tuple[JobKind, ...] = get_args(JobKind)
# The jobs whose messages may be follow-up sweeps (memkit.jobs.deletion).
# The deletions, whose follow-up sweeps a message can carry: the kinds of their job items.
FOLLOW_UP_KINDS: tuple[JobKind, ...] = get_args(DeletionJobKind)
STRATEGIES: tuple[Strategy, ...] = ("discrete", "summary", "preferences", "custom")
# The longest an SQS message can be delayed: a job due later queues itself again.
MAX_DELAY_SECONDS = 900
# Turns given to the model in one extraction call, and read per job.
EXTRACT_CHUNK = 40
EXTRACT_LIMIT = 400
TITLE_TURNS = 6
# The current memories an extracted fact is compared with (as Mem0's update step does).
CANDIDATES = 3
SAVE_ATTEMPTS = 5
# Words a summary may take: about 0.75 words a token, of the share of the window it holds.
WORDS_PER_TOKEN = 0.75
# The smallest window a session's summaries work against (the server setting's floor too),
# so a tiny window a client gives cannot make every write a model call.
MIN_WINDOW_TOKENS = 500


@dataclass(frozen=True)
class Policy:
    """When and how much to curate (CurationSettings)."""

    window_tokens: int = 16_000
    threshold: float = 0.7
    keep: float = 0.4
    summary_share: float = 0.15
    quiet_seconds: int = 60
    # Queue extraction at all (not with a model that cannot extract: no idle invocations),
    # and descriptions of new records (each one re-indexes its record).
    extract: bool = True
    describe: bool = True
    # Namespaces whose sessions are extracted whatever `extract` says: a wing's, whose
    # extraction needs no model's facts (an AgentCore memory's strategies write summaries).
    extracted_anyway: Callable[[str], bool] = lambda namespace: False

    def window_for(self, session_window: int | None) -> int:
        """The window a session is summarised against: its own, else the server's."""
        if session_window is None:
            return self.window_tokens
        return max(MIN_WINDOW_TOKENS, session_window)


@dataclass(frozen=True)
class Job:
    """A unit of curation for one session. `stamp` is the session's updated_at when the job
    was queued (extraction waits for quiet: a newer write means a newer job)."""

    kind: JobKind
    tenant: str
    namespace: str
    session_id: str
    stamp: str
    delay_seconds: int = 0
    record_id: str | None = None  # describe: the record
    # delete_user (memkit.jobs.users): the user and the job that reports on it;
    # delete_memory (memkit.agentcore.deletion): the job (`namespace` is the memory).
    user_id: str | None = None
    job_id: str | None = None
    # A deletion's follow-up sweep (delete_user, delete_memory): not before this time (epoch
    # seconds), its place in its deletion's chain of follow-ups (1: the first); `job_id`
    # names its own job item.
    not_before: int | None = None
    follow_up: int = 0
    # Messages of this job sent before this one (a job queues itself again to wait or go on).
    hops: int = 0

    def to_json(self) -> str:
        return json.dumps(
            {
                "job": self.kind,
                "tenant": self.tenant,
                "namespace": self.namespace,
                "session_id": self.session_id,
                "stamp": self.stamp,
                "record_id": self.record_id,
                "user_id": self.user_id,
                "job_id": self.job_id,
                "not_before": self.not_before,
                "follow_up": self.follow_up,
                "hops": self.hops,
            }
        )

    @classmethod
    def from_json(cls, body: str) -> Job:
        """The job a message carries; ValueError for anything else (a field missing or of
        another type, a follow-up that names no job): the queue retries it, then moves it to
        its dead-letter queue. The error names the field, never its value."""
        raw = json.loads(body)
        if not isinstance(raw, dict):
            raise ValueError("a job is a JSON object")
        kind = raw.get("job")
        if kind not in JOB_KINDS:
            raise ValueError("unknown job")
        job = cls(
            kind,
            _text(raw, "tenant"),
            _text(raw, "namespace"),
            _text(raw, "session_id"),
            _text(raw, "stamp"),
            record_id=_optional_text(raw, "record_id"),
            user_id=_optional_text(raw, "user_id"),
            job_id=_optional_text(raw, "job_id"),
            not_before=_count(raw, "not_before"),
            follow_up=_count(raw, "follow_up") or 0,
            hops=_count(raw, "hops") or 0,
        )
        if job.follow_up and kind not in FOLLOW_UP_KINDS:
            raise ValueError("follow_up: only a deletion has follow-ups")
        if kind in FOLLOW_UP_KINDS and (job.not_before is None) != (job.follow_up == 0):
            raise ValueError("not_before: a follow-up sweep has a due time, and only one has")
        if job.follow_up and not job.job_id:
            raise ValueError("job_id: a follow-up sweep names the job item its deletion wrote")
        return job


def _text(raw: dict[str, Any], name: str) -> str:
    """A string field of a job's message."""
    value = raw.get(name)
    if not isinstance(value, str):
        raise ValueError(f"{name}: a job's message gives it as a string")
    return value


def _optional_text(raw: dict[str, Any], name: str) -> str | None:
    """A string field of a job's message that may be absent (or null)."""
    return None if raw.get(name) is None else _text(raw, name)


def _count(raw: dict[str, Any], name: str) -> int | None:
    """A whole number >= 0 of a job's message, or None when absent (or null); a bool, a
    float or a string is refused."""
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}: a job's message gives it as a whole number >= 0")
    return value


@dataclass(frozen=True)
class Queueing:
    """What the stream curator needs: the table (to size a session's view), the work queue's
    sender, the policy."""

    curation: CurationTable
    sessions: SessionTable
    send: Callable[[Job], None]
    policy: Policy


def _turns(messages: Sequence[StoredMessage]) -> list[Turn]:
    return [Turn(m.id, m.role, m.content, m.created_at) for m in messages]


# -- the curator: what a session write calls for -------------------------------------------------


def jobs_for(
    old: Value | None,
    new: Value,
    policy: Policy,
    view_tokens: Callable[[], int],
) -> list[Job]:
    """The jobs a write calls for, from what the item was and is now.

    A session: only writes that added messages, or changed the session's window, call for
    any, so the worker's own writes (a summary, a title) queue nothing. A long-term record:
    a new one without topics or entities is described (the worker's edit is not new, so it
    queues nothing)."""
    if isinstance(new, StoredRecord):
        return _describe_jobs(old, new) if policy.describe else []
    if not isinstance(new, SessionValue):
        return []
    earlier = old if isinstance(old, SessionValue) else None
    added = new.message_count - (earlier.message_count if earlier else 0) > 0
    resized = earlier is not None and earlier.window_tokens != new.window_tokens
    if not added and not resized:
        return []

    def job(kind: JobKind, delay: int = 0) -> Job:
        return Job(kind, new.tenant, new.namespace, new.session_id, new.updated_at, delay)

    extract = policy.extract or policy.extracted_anyway(new.namespace)
    jobs = [job("extract", policy.quiet_seconds)] if extract and added else []
    if added and not new.title and new.message_count >= 2:
        jobs.append(job("title"))
    if view_tokens() >= policy.threshold * policy.window_for(new.window_tokens):
        jobs.append(job("summarize"))
    return jobs


def _describe_jobs(old: Value | None, new: StoredRecord) -> list[Job]:
    if old is not None or new.topics or new.entities:
        return []
    if new.discrete_memory_extracted == "t":  # extraction gave it what the model found
        return []
    return [
        Job(
            "describe",
            new.ref.tenant,
            new.namespace,
            new.session_id or "",
            new.updated_at or "",
            record_id=new.ref.record_id,
        )
    ]


def queue_jobs(change: ItemChange, queueing: Queueing) -> list[Job]:
    """Queue what a stream record of a session or a record calls for; the jobs queued."""
    new = change.new
    if not isinstance(new, SessionValue | StoredRecord):
        return []
    curation, sessions = queueing.curation, queueing.sessions

    def view_tokens() -> int:
        assert isinstance(new, SessionValue)
        owner = Owner(tenant=new.tenant, namespace=new.namespace)
        meta = sessions.session_meta(owner, new.session_id)
        if meta is None:
            return 0
        return sum(m.tokens for m in curation.view_messages(owner, meta))

    jobs = jobs_for(change.old, new, queueing.policy, view_tokens)
    for job in jobs:
        queueing.send(job)
    return jobs


# -- the worker: running a job ------------------------------------------------------------------


# A wing's extraction of a session (memkit.agentcore.extraction): what came of it in a word,
# or None when the session is not the wing's (the curator's own extraction runs then).
WingExtraction = Callable[[Owner, SessionMeta, CurationTable], str | None]


class Curator:
    """Runs curation jobs over the table, long-term memory and a MemoryModel; `strategies`:
    wings' extractions, asked first whether a session is theirs."""

    def __init__(
        self,
        curation: CurationTable,
        sessions: SessionTable,
        long_term: LongTermService,
        model: MemoryModel,
        policy: Policy = Policy(),
        clock: Callable[[], float] = time.time,
        strategies: Sequence[WingExtraction] = (),
    ) -> None:
        self._curation = curation
        self._sessions = sessions
        self._long_term = long_term
        self._model = model
        self._policy = policy
        self._clock = clock
        self._strategies = tuple(strategies)

    def run(self, job: Job) -> str:
        """Do the job; what came of it, in a word (for logs and metrics, no content)."""
        owner = Owner(tenant=job.tenant, namespace=job.namespace)
        if job.kind == "describe":
            outcome = self._describe(job)
            metrics.add_metric(name=f"Curation_describe_{outcome}", unit="Count", value=1)
            return outcome
        meta = self._sessions.session_meta(owner, job.session_id)
        if meta is None:
            return "session gone"
        if job.kind == "summarize":
            outcome = self._summarize(owner, meta)
        elif job.kind == "title":
            outcome = self._title(owner, meta)
        else:
            outcome = self._extract(owner, meta, job)
        metrics.add_metric(
            name=f"Curation_{job.kind}_{outcome.replace(' ', '_')}", unit="Count", value=1
        )
        return outcome

    def _outcome(self, job: Job) -> str:
        if job.kind == "describe":
            return self._describe(job)
        owner = Owner(tenant=job.tenant, namespace=job.namespace)
        meta = self._sessions.session_meta(owner, job.session_id)
        if meta is None:
            return "session gone"
        if job.kind == "summarize":
            return self._summarize(owner, meta)
        if job.kind == "title":
            return self._title(owner, meta)
        return self._extract(owner, meta, job)

    # -- summaries -------------------------------------------------------------------------

    def _summarize(self, owner: Owner, meta: SessionMeta) -> str:
        policy = self._policy
        for _ in range(SAVE_ATTEMPTS):
            window = policy.window_for(meta.window_tokens)
            view = self._curation.view_messages(owner, meta)
            if sum(m.tokens for m in view) < policy.threshold * window:
                return "within window"
            kept = _newest_within(view, int(policy.keep * window))
            folded = view[: len(view) - len(kept)]
            if not folded:
                return "within window"
            words = max(50, int(policy.summary_share * window * WORDS_PER_TOKEN))
            summary = self._model.summarize(meta.context, _turns(folded), words)
            try:
                self._curation.save_meta(
                    owner, replace(meta, context=summary, view_from=kept[0].order)
                )
                return "summarized"
            except VersionConflict:
                fresh = self._sessions.session_meta(owner, meta.session_id)
                if fresh is None:
                    return "session gone"
                meta = fresh
        raise VersionConflict("the session kept changing; the job is retried")

    # -- titles ----------------------------------------------------------------------------

    def _title(self, owner: Owner, meta: SessionMeta) -> str:
        if not self._model.capabilities.title:
            return "unsupported"
        for _ in range(SAVE_ATTEMPTS):
            if meta.title:
                return "titled already"
            turns = _turns(self._curation.first_messages(owner, meta, TITLE_TURNS))
            if not turns:
                return "no messages"
            title = self._model.title(turns).strip()[:80]
            if not title:
                return "no title"
            try:
                self._curation.save_meta(owner, replace(meta, title=title))
                return "titled"
            except VersionConflict:
                fresh = self._sessions.session_meta(owner, meta.session_id)
                if fresh is None:
                    return "session gone"
                meta = fresh
        raise VersionConflict("the session kept changing; the job is retried")

    # -- topics and entities ---------------------------------------------------------------

    def _describe(self, job: Job) -> str:
        if not self._model.capabilities.describe or job.record_id is None:
            return "unsupported"
        try:
            record = self._long_term.get(job.tenant, job.record_id)
        except NotFound:
            return "record gone"
        if record.topics or record.entities:
            return "described already"
        (description,) = self._model.describe([record.text])
        if not description.topics and not description.entities:
            return "nothing found"
        edit = MemoryEdit(
            topics=list(description.topics) or None, entities=list(description.entities) or None
        )
        try:
            self._long_term.edit(job.tenant, job.record_id, edit)
        except NotFound:
            return "record gone"
        return "described"

    # -- extraction ------------------------------------------------------------------------

    def _extract(self, owner: Owner, meta: SessionMeta, job: Job) -> str:
        if meta.updated_at > job.stamp:
            return "not quiet"  # a newer write queued its own job
        for wing_extraction in self._strategies:  # a wing's session: the wing extracts it
            outcome = wing_extraction(owner, meta, self._curation)
            if outcome is not None:
                return outcome
        if not self._model.capabilities.extract:
            return "unsupported"
        strategy, instructions = _strategy(meta.strategy)
        pending = self._curation.unextracted_messages(owner, meta, EXTRACT_LIMIT)
        # The assistant's instructions say nothing about the user: read, never mined.
        said = [m for m in pending if not is_instruction(m.role)]
        instructing = [m.id for m in pending if is_instruction(m.role)]
        if instructing:
            self._curation.mark_extracted(owner, meta, instructing)
        kept: set[str] = set()

        def ask(chunk: list[StoredMessage]) -> list[Extracted]:
            return self._model.extract(_turns(chunk), strategy, instructions)

        def keep(chunk: list[StoredMessage], memories: list[Extracted]) -> None:
            fresh = []
            for memory in memories:
                key = fact_key(memory.text)
                if key in kept:  # said twice in this job: once is enough
                    continue
                kept.add(key)
                fresh.append(memory)
            self._keep(owner, meta, fresh, chunk, tally)
            # Marked only once what the model found in them is stored.
            self._curation.mark_extracted(owner, meta, [m.id for m in chunk])

        tally: Counter[str] = Counter()
        in_chunks(said, EXTRACT_CHUNK, ask, keep)
        stored = tally["added"] + tally["superseding"]
        logger.info("extracted", extra={"messages": len(pending), "memories": stored, **tally})
        for outcome, count in tally.items():
            metrics.add_metric(name=f"CurationFacts_{outcome}", unit="Count", value=count)
        return "extracted" if pending else "nothing new"

    def _keep(
        self,
        owner: Owner,
        meta: SessionMeta,
        memories: Sequence[Extracted],
        chunk: Sequence[StoredMessage],
        tally: Counter[str],
    ) -> None:
        """Store what the model found, curated: each fact's candidates are the user's
        current memories closest to it (CANDIDATES, from the vector index); the model
        decides whether it is new (added), replaces some of them (superseding them: they are
        kept, retired, their validity closed), or is known (skipped: the memory that says it
        gains the fact's topics, entities and sources)."""
        if not memories:
            return
        candidates = [self._candidates(owner, meta, memory) for memory in memories]
        decisions = self._model.curate(
            memories, [[Candidate(hit.id, hit.text) for hit in hits] for hits in candidates]
        )
        known = {m.id for m in chunk}
        for memory, hits, decision in zip(memories, candidates, decisions, strict=True):
            sources = [s for s in memory.source_ids if s in known] or [m.id for m in chunk]
            by_id = {hit.id: hit for hit in hits}
            targets = [by_id[t] for t in decision.targets if t in by_id]
            if decision.action == "skip" and targets:
                if self._merge(owner, targets[0], memory, sources):
                    tally["skipped"] += 1
                    continue
                targets = []
            replaced = targets if decision.action == "supersede" else []
            stored = self._store(owner, meta, memory, sources, replaced)
            tally["superseding" if replaced and stored else "added" if stored else "known"] += 1

    def _candidates(self, owner: Owner, meta: SessionMeta, memory: Extracted) -> list[MemoryHit]:
        """The user's (else the session's) current memories closest to `memory`."""
        return self._long_term.search(
            owner.tenant,
            SearchRequest(
                text=memory.text,
                search_mode="semantic",
                namespace={"eq": meta.namespace},
                user_id={"eq": meta.user_id} if meta.user_id else None,
                session_id={"eq": meta.session_id} if not meta.user_id else None,
                memory_type={"ne": "message"},
                limit=CANDIDATES,
            ),
            access=False,  # memkit's own look, not a use of the memory
        ).memories

    def _merge(self, owner: Owner, hit: MemoryHit, memory: Extracted, sources: list[str]) -> bool:
        """The fact's topics, entities and sources added to the memory that says it already
        (False: that memory is gone)."""
        try:
            self._long_term.edit(
                owner.tenant,
                hit.id,
                MemoryEdit(
                    topics=sorted({*hit.topics, *memory.topics}),
                    entities=sorted({*hit.entities, *memory.entities}),
                    extracted_from=sorted({*hit.extracted_from, *sources}),
                ),
            )
        except NotFound:
            return False
        return True

    def _store(
        self,
        owner: Owner,
        meta: SessionMeta,
        memory: Extracted,
        sources: list[str],
        replaced: Sequence[MemoryHit],
    ) -> bool:
        """Write the fact as a new record, superseding `replaced` (it takes the slot of the
        first that has one); unless the user has its text already (content hash). A record
        it would supersede that is gone or changed hands meanwhile is not superseded."""
        record = MemoryRecordIn(
            id=new_ulid(),
            text=memory.text,
            memory_type=memory.memory_type,
            topics=list(memory.topics) or None,
            entities=list(memory.entities) or None,
            event_date=memory.event_date,
            session_id=meta.session_id,
            user_id=meta.user_id,
            namespace=meta.namespace,
            extracted_from=sources,
            discrete_memory_extracted="t",
            key=next((hit.key for hit in replaced if hit.key), None),
            supersedes=[hit.id for hit in replaced] or None,
        )
        body = CreateMemories(memories=[record], deduplicate=True)
        try:
            ack = self._long_term.create(owner.tenant, body)
        except (NotFound, ValidationFailed):
            if not replaced:
                raise
            plain = record.model_copy(update={"supersedes": None, "key": None})
            ack = self._long_term.create(owner.tenant, CreateMemories(memories=[plain]))
        return record.id in ack.created


def _newest_within(messages: Sequence[StoredMessage], budget: int) -> list[StoredMessage]:
    """The newest messages whose tokens fit `budget` (at least the newest one)."""
    kept: list[StoredMessage] = []
    used = 0
    for message in reversed(messages):
        if kept and used + message.tokens > budget:
            break
        kept.append(message)
        used += message.tokens
    kept.reverse()
    return kept


def _strategy(config: dict[str, Any] | None) -> tuple[Strategy, str | None]:
    """The session's long_term_memory_strategy: its name, and a custom prompt if any."""
    config = config or {}
    name = config.get("strategy", "discrete")
    strategy: Strategy = name if name in STRATEGIES else "discrete"
    options = config.get("config") or {}
    prompt = options.get("custom_prompt") if isinstance(options, dict) else None
    return strategy, prompt if isinstance(prompt, str) and strategy == "custom" else None
