"""AgentCore extraction: a memory's strategies run on its sessions' new events, in the
background, as memkit's own extraction runs on messages (docs/agentcore.md "Extraction").

An AgentCore memory's sessions live in the namespace named by its id, so the curator's
`extract` job of such a session comes here (the memory worker, after the quiet period).
The job reads the messages not yet read for memories, a chunk at a time, gives the
conversation's turns (USER and ASSISTANT payloads; events created with extractionMode SKIP,
TOOL and OTHER turns and blobs are never mined) to each strategy, writes what it finds as
records in each of the strategy's namespaces (its templates resolved for the session's actor
and session) with the strategy's id, and marks the chunk read only then:

- SEMANTIC: the facts the model finds (memkit's `discrete` extraction); its episodic ones
  too, unless the memory has an EPISODIC strategy, which then takes them.
- USER_PREFERENCE: the model's `preferences` extraction.
- EPISODIC: the episodes (dated events) the model finds.
- SUMMARIZATION: one record per session and namespace, the running summary, replaced as the
  conversation goes on (the model's `summarize`, which the local model can do).
- CUSTOM: as the override it configures (semanticOverride, userPreferenceOverride,
  episodicOverride: extraction with its appendToPrompt as the operator's instructions;
  summaryOverride: the summary). A self-managed strategy is AgentCore's to run: skipped.

A fact's record id is derived from its memory, strategy, namespace and normalised text, so
the same fact found again is the same record. Any other fact is consolidated, as AgentCore's
own pipeline does: the model is shown the namespace's current records closest to it
(MemoryModel.curate) and adds it, supersedes the records it contradicts or refines (kept,
retired, their validity closed, so RetrieveMemoryRecords and ListMemoryRecords no longer
return them), or skips it because one says it already. A strategy the model cannot run
(the local model finds no facts) is skipped; the job reports what it did.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from memkit.agentcore.mapping import (
    Template,
    derived_record_id,
    record_tags,
    scope_conditions,
    scope_hash,
)
from memkit.agentcore.models import MEMORY_ID_PATTERN, AgentMemory, MemoryStrategy, StrategyKind
from memkit.agentcore.table import AgentCoreTable
from memkit.errors import NotFound, ValidationFailed
from memkit.llm.chunks import in_chunks
from memkit.llm.protocol import Candidate, Extracted, MemoryModel, Turn, fact_key
from memkit.models.domain import MEMKIT, Owner, SessionMeta, StoredMessage, StoredRecord
from memkit.observability import logger, metrics
from memkit.service.long_term import LongTermService
from memkit.service.versions import Versions
from memkit.store.curation import CurationTable
from memkit.store.records import RecordTable
from memkit.times import now_iso

# The key of a message's metadata holding its event's fields (memkit.agentcore.service).
EVENT_KEY = "agentcore"
MINED_ROLES = frozenset({"user", "assistant"})
CHUNK = 40
LIMIT = 400
SUMMARY_WORDS = 300
# The current records of a namespace an extracted fact is compared with.
CANDIDATES = 3
_MEMORY_ID = re.compile(MEMORY_ID_PATTERN)
OVERRIDES: dict[str, StrategyKind] = {
    "semanticOverride": StrategyKind.SEMANTIC,
    "userPreferenceOverride": StrategyKind.USER_PREFERENCE,
    "episodicOverride": StrategyKind.EPISODIC,
    "summaryOverride": StrategyKind.SUMMARIZATION,
}


def names_a_memory(namespace: str) -> bool:
    """Whether a session's namespace has the form of an AgentCore memory id (the curator
    queues its extraction whatever the model, since summaries need no facts)."""
    return _MEMORY_ID.fullmatch(namespace) is not None


@dataclass(frozen=True)
class Plan:
    """How one strategy runs: as which kind, with which operator instructions."""

    strategy: MemoryStrategy
    kind: StrategyKind
    instructions: str | None = None


@dataclass(frozen=True)
class Finding:
    """A record a strategy found: a fact (kept if new) or a summary (`replaces` its last)."""

    record: StoredRecord
    replaces: bool


def plan_of(strategy: MemoryStrategy) -> Plan | None:
    """A strategy's plan (None: memkit cannot run it, e.g. a self-managed one)."""
    if strategy.kind is not StrategyKind.CUSTOM:
        return Plan(strategy, strategy.kind)
    configuration = strategy.configuration or {}
    for member, kind in OVERRIDES.items():
        override = configuration.get(member)
        if isinstance(override, dict):
            step = override.get("extraction") or override.get("consolidation") or {}
            prompt = step.get("appendToPrompt") if isinstance(step, dict) else None
            return Plan(strategy, kind, prompt if isinstance(prompt, str) else None)
    return None


def mined(message: StoredMessage) -> bool:
    """Whether a message is a turn extraction reads (not SKIP, not a tool's, not data)."""
    event = (message.metadata or {}).get(EVENT_KEY)
    skipped = isinstance(event, dict) and bool(event.get("skip"))
    return message.role in MINED_ROLES and not skipped


class StrategyExtraction:
    """Runs an AgentCore memory's strategies over a session's unread events."""

    def __init__(
        self,
        memories: AgentCoreTable,
        records: RecordTable,
        long_term: LongTermService,
        model: MemoryModel,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._memories = memories
        self._records = records
        self._long_term = long_term
        self._model = model
        self._versions = Versions(records, clock)
        self._clock = clock

    def __call__(self, owner: Owner, meta: SessionMeta, log: CurationTable) -> str | None:
        """The curator's hook (memkit.jobs.curation.WingExtraction): a memory's session is
        extracted by its strategies; None when the session is no memory's."""
        memory = self.memory_of(owner.tenant, meta.namespace)
        return None if memory is None else self.extract(owner, meta, memory, log)

    def memory_of(self, tenant: str, namespace: str) -> AgentMemory | None:
        """The memory whose sessions live in `namespace` (None: it is no memory's)."""
        if not names_a_memory(namespace):
            return None
        return self._memories.get_agent_memory(tenant, namespace)

    def extract(
        self, owner: Owner, meta: SessionMeta, memory: AgentMemory, log: CurationTable
    ) -> str:
        """Run the memory's strategies on the session's unread messages; in a word, what came
        of it (logs and metrics carry no content)."""
        if memory.deleting:
            return "memory deleted"
        plans = [p for p in map(plan_of, memory.strategies) if p is not None]
        runnable = [p for p in plans if self._can(p)]
        if not runnable or meta.user_id is None:
            return "unsupported"
        pending = log.unextracted_messages(owner, meta, LIMIT)
        written = 0
        deleted = False

        def ask(chunk: list[StoredMessage]) -> list[Finding]:
            turns = [Turn(m.id, m.role, m.content, m.created_at) for m in chunk if mined(m)]
            return self._find(owner, meta, memory, runnable, turns) if turns else []

        def keep(chunk: list[StoredMessage], findings: list[Finding]) -> None:
            nonlocal written, deleted
            # DeleteMemory may have come while the model thought: nothing more is written
            # into a memory being deleted (its deletion would not find it).
            deleted = deleted or self._deleted(owner.tenant, memory.memory_id)
            if deleted:
                return
            written += self._write(owner, findings)
            # Marked only once what the strategies found in them is stored.
            log.mark_extracted(owner, meta, [m.id for m in chunk])

        in_chunks(pending, CHUNK, ask, keep)
        metrics.add_metric(name="AgentCoreRecordsExtracted", unit="Count", value=written)
        logger.info("agentcore extraction", extra={"messages": len(pending), "records": written})
        if deleted:
            return "memory deleted"
        return "extracted" if pending else "nothing new"

    def _deleted(self, tenant: str, memory_id: str) -> bool:
        current = self._memories.get_agent_memory(tenant, memory_id)
        return current is None or current.deleting

    def _can(self, plan: Plan) -> bool:
        capabilities = self._model.capabilities
        if plan.kind is StrategyKind.SUMMARIZATION:
            return capabilities.summarize
        return capabilities.extract

    def _find(
        self,
        owner: Owner,
        meta: SessionMeta,
        memory: AgentMemory,
        plans: list[Plan],
        turns: list[Turn],
    ) -> list[Finding]:
        """What each strategy finds in the turns, as the records to write."""
        findings: list[Finding] = []
        episodic = any(p.kind is StrategyKind.EPISODIC for p in plans)
        discrete: list[Extracted] | None = None  # one call serves SEMANTIC and EPISODIC
        for plan in plans:
            if plan.kind is StrategyKind.SUMMARIZATION:
                findings += self._summaries(owner, meta, memory, plan, turns)
                continue
            if plan.instructions:
                found = self._model.extract(turns, "custom", plan.instructions)
            elif plan.kind is StrategyKind.USER_PREFERENCE:
                found = self._model.extract(turns, "preferences")
            else:
                if discrete is None:
                    discrete = self._model.extract(turns, "discrete")
                found = discrete
            if plan.kind is StrategyKind.EPISODIC:
                found = [f for f in found if f.memory_type == "episodic"]
            elif plan.kind is StrategyKind.SEMANTIC and episodic and found is discrete:
                found = [f for f in found if f.memory_type != "episodic"]
            findings += self._facts(owner, meta, memory, plan, found, turns)
        return findings

    def _write(self, owner: Owner, findings: list[Finding]) -> int:
        """Write what was found: a fact unless its record exists, a summary over its last;
        a fact that supersedes records in one transaction with them (a record it names
        that is gone meanwhile is not superseded)."""
        facts = [f.record.id for f in findings if not f.replaces]
        stored = self._records.get_records(owner.tenant, facts) if facts else {}
        writes = {
            f.record.id: f.record for f in findings if f.replaces or f.record.id not in stored
        }
        plain = [record for record in writes.values() if not record.supersedes]
        if plain:
            self._records.put_records(owner.tenant, plain)
        for record in writes.values():
            if record.supersedes:
                try:
                    self._versions.write(owner.tenant, record, None, MEMKIT)
                except (NotFound, ValidationFailed):
                    alone = replace(record, supersedes=(), key=None)
                    self._records.put_records(owner.tenant, [alone])
        return len(writes)

    def _namespaces(self, meta: SessionMeta, strategy: MemoryStrategy) -> list[str]:
        assert meta.user_id is not None
        return [
            Template(strategy.strategy_id, t).resolve(meta.user_id, meta.session_id)
            for t in strategy.namespaces
        ]

    def _facts(
        self,
        owner: Owner,
        meta: SessionMeta,
        memory: AgentMemory,
        plan: Plan,
        found: Sequence[Extracted],
        turns: Sequence[Turn],
    ) -> list[Finding]:
        """Each fact in each of the strategy's namespaces, unless it is there already."""
        strategy = plan.strategy
        known = {t.id for t in turns}
        kind = "episodic" if plan.kind is StrategyKind.EPISODIC else "semantic"
        candidates: dict[str, tuple[Extracted, str]] = {}
        for fact in found:
            for namespace in self._namespaces(meta, strategy):
                key = (owner.tenant, memory.memory_id, strategy.strategy_id, namespace)
                candidates.setdefault(
                    derived_record_id(*key, fact_key(fact.text)), (fact, namespace)
                )
        # The same fact found before is its record already; the rest are curated against
        # the namespace's current records closest to them (consolidation, as AgentCore's).
        stored = self._records.get_records(owner.tenant, list(candidates))
        new = [(i, fact, space) for i, (fact, space) in candidates.items() if i not in stored]
        close = [self._close(owner, meta, memory, space, fact) for _, fact, space in new]
        decisions = self._model.curate(
            [fact for _, fact, _ in new],
            [[Candidate(r.id, r.text) for r in records] for records in close],
        )
        findings = []
        for (record_id, fact, namespace), records, decision in zip(
            new, close, decisions, strict=True
        ):
            if decision.action == "skip":
                continue
            by_id = {r.id: r for r in records}
            replaced = [by_id[t] for t in decision.targets if t in by_id]
            if decision.action != "supersede":
                replaced = []
            sources = [s for s in fact.source_ids if s in known] or sorted(known)
            record = self._record(
                record_id, meta, memory, strategy, namespace, fact.text, kind, sources, turns
            )
            if replaced:
                slot = next((r.key for r in replaced if r.key), None)
                record = replace(record, supersedes=tuple(r.id for r in replaced), key=slot)
            findings.append(Finding(record, replaces=False))
        return findings

    def _close(
        self, owner: Owner, meta: SessionMeta, memory: AgentMemory, namespace: str, fact: Extracted
    ) -> list[StoredRecord]:
        """The namespace's current records closest to `fact` (CANDIDATES of them)."""
        conditions = scope_conditions(
            memory.memory_id,
            namespace=namespace,
            namespace_path=None,
            strategy_id=None,
            user_id=meta.user_id,
        )
        close, _ = self._long_term.matching(
            owner.tenant, conditions, query=fact.text, depth=CANDIDATES
        )
        return [match.record for match in close]

    def _summaries(
        self,
        owner: Owner,
        meta: SessionMeta,
        memory: AgentMemory,
        plan: Plan,
        turns: Sequence[Turn],
    ) -> list[Finding]:
        """The session's summary in each namespace, with the turns folded in."""
        strategy = plan.strategy
        ids = {
            namespace: derived_record_id(
                owner.tenant, memory.memory_id, strategy.strategy_id, namespace, "summary"
            )
            for namespace in self._namespaces(meta, strategy)
        }
        stored = self._records.get_records(owner.tenant, list(ids.values()))
        findings = []
        for namespace, record_id in ids.items():
            previous = stored.get(record_id)
            text = self._model.summarize(
                previous.text if previous else None, turns, SUMMARY_WORDS
            ).strip()
            if not text:
                continue
            sources = [*(previous.extracted_from if previous else ()), *(t.id for t in turns)]
            record = self._record(
                record_id,
                meta,
                memory,
                strategy,
                namespace,
                text,
                "semantic",
                sources,
                turns,
                previous,
            )
            findings.append(Finding(record, replaces=True))
        return findings

    def _record(
        self,
        record_id: str,
        meta: SessionMeta,
        memory: AgentMemory,
        strategy: MemoryStrategy,
        namespace: str,
        text: str,
        memory_type: str,
        sources: Sequence[str],
        turns: Sequence[Turn],
        previous: StoredRecord | None = None,
    ) -> StoredRecord:
        now = self._clock()
        stamp = now_iso(now)
        return StoredRecord(
            id=record_id,
            namespace=memory.memory_id,
            text=text,
            memory_type=memory_type,
            created_at=previous.created_at if previous else stamp,
            updated_at=stamp,
            last_accessed=previous.last_accessed if previous else stamp,
            persisted_at=stamp,
            memory_hash=scope_hash(text, meta.user_id, namespace),
            written_us=max(int(now * 1_000_000), previous.written_us + 1 if previous else 0),
            topics=record_tags(namespace, strategy.strategy_id, {}, None),
            session_id=meta.session_id,
            user_id=meta.user_id,
            # The time of the source content: the newest turn read.
            event_date=max(t.created_at for t in turns),
            extracted_from=tuple(dict.fromkeys(sources)),
            discrete_memory_extracted="t",
            version=previous.version if previous else 0,
        )
