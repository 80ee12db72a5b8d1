"""The scratchpad service: read, replace, merge, clear, render, and agent tool calls."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memkit.errors import (
    FieldProblem,
    Forbidden,
    MemkitError,
    SchemaViolation,
    TooLarge,
    ValidationFailed,
    VersionConflict,
)
from memkit.models.domain import (
    DEFAULT_PROFILE,
    Content,
    PadFormat,
    PadRef,
    Profile,
)
from memkit.observability import metrics
from memkit.scratchpad import tools
from memkit.scratchpad.merge import merge_content, replacement_content
from memkit.scratchpad.prompt import render_prompt
from memkit.scratchpad.schema import content_problems
from memkit.service.profiles import ProfileService
from memkit.service.retry import back_off, commit_in_time
from memkit.store.protocol import PadState, PadStore, ProfileStore
from memkit.tokens import content_tokens
from memkit.versions import version_matches

# A DynamoDB item holds 400 KB; leave room for keys and attributes.
MAX_CONTENT_BYTES = 350_000


@dataclass(frozen=True)
class ScratchpadResult:
    """What a client sees of a scratchpad (content, governing profile, problems)."""

    state: PadState
    content: Content
    version: int
    updated_at: str | None
    tokens: int
    problems: list[FieldProblem] = field(default_factory=list)

    @property
    def profile(self) -> Profile:
        return self.state.profile


def _check_type(content: Content, pad_format: PadFormat) -> None:
    if pad_format is PadFormat.JSON:
        if not isinstance(content, dict):
            raise ValidationFailed(
                "content must be a JSON object",
                [FieldProblem("content", "must be a JSON object for a json scratchpad")],
            )
    elif not isinstance(content, str):
        raise ValidationFailed(
            "content must be a string",
            [FieldProblem("content", f"must be a string for a {pad_format.value} scratchpad")],
        )


class ScratchpadService:
    """Scratchpad operations over the pads and profiles tables. Writes are optimistic: read,
    change, conditional put."""

    def __init__(
        self,
        pads: PadStore,
        profiles: ProfileStore,
        max_attempts: int = 25,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._pads = pads
        self._profiles = profiles
        self._max_attempts = max_attempts
        self._sleep = sleep

    # -- reads -------------------------------------------------------------------------------

    def get(self, ref: PadRef) -> ScratchpadResult:
        return self.result_of(self._pads.read_pad(ref))

    def result_of(self, state: PadState) -> ScratchpadResult:
        """What a client sees of a scratchpad state read elsewhere (e.g. with its session)."""
        problems: list[FieldProblem] = []
        if state.content is not None:
            problems = self._problems(state.content, state.profile)
        pad = state.pad
        updated_at, tokens = (pad.updated_at, pad.tokens) if pad else (None, 0)
        return ScratchpadResult(state, state.content, state.version, updated_at, tokens, problems)

    def prompt(self, ref: PadRef) -> str:
        state = self._pads.read_pad(ref)
        return render_prompt(state.content, state.profile)

    # -- writes ------------------------------------------------------------------------------

    def replace(self, ref: PadRef, content: Content, if_match: str | None) -> ScratchpadResult:
        return self._write(ref, lambda state: _replaced(state, content), if_match)

    def patch(self, ref: PadRef, content: Content, if_match: str | None) -> ScratchpadResult:
        return self._write(ref, lambda state: _patched(state, content), if_match)

    def check_seed(self, profile: Profile, content: Content) -> None:
        """Refuse initial content the profile would refuse, before anything is written."""
        if content is None:
            return
        if profile.read_only:
            raise Forbidden(f"profile {profile.name!r} is read-only")
        _check_type(content, profile.pad_format)
        self._check(replacement_content(content, profile.pad_format), profile)

    def seed(self, ref: PadRef, content: Content) -> ScratchpadResult | None:
        """Write initial content while the scratchpad is empty (Mastra's initial working
        memory); content already there is kept. None when nothing was written."""
        if content is None or self._pads.read_pad(ref).content is not None:
            return None
        return self._write(
            ref,
            lambda state: state.content if state.content is not None else _replaced(state, content),
            None,
        )

    def clear(self, ref: PadRef, if_match: str | None) -> ScratchpadResult:
        return self._write(ref, lambda _state: None, if_match)

    def _write(
        self, ref: PadRef, change: Callable[[PadState], Content], if_match: str | None
    ) -> ScratchpadResult:
        for attempt in range(self._max_attempts):
            state = self._pads.read_pad(ref)
            if state.profile.read_only:
                raise Forbidden(f"profile {state.profile.name!r} is read-only")
            if not version_matches(if_match, state.version):
                raise VersionConflict(
                    f"the scratchpad is at version {state.version}, not {if_match}"
                )
            content = change(state)
            tokens = self._check(content, state.profile)
            commit_in_time("scratchpad")
            try:
                pad = self._pads.write_pad(state, content, tokens)
            except VersionConflict:
                if if_match is not None:
                    raise
                back_off(attempt, self._sleep, "ScratchpadWriteRetries")
                continue
            metrics.add_metric(name="ScratchpadWrites", unit="Count", value=1)
            return ScratchpadResult(state, pad.content, pad.version, pad.updated_at, pad.tokens)
        raise VersionConflict(
            f"the scratchpad kept changing under {self._max_attempts} attempts; retry later"
        )

    def _check(self, content: Content, profile: Profile) -> int:
        """The content's token count, once it passes the size, token and schema limits."""
        if content is None:
            return 0
        size = len(json.dumps(content, ensure_ascii=False).encode())
        if size > MAX_CONTENT_BYTES:
            raise TooLarge(
                f"content is {size} bytes; the limit is {MAX_CONTENT_BYTES}",
                [FieldProblem("content", "too large")],
            )
        used = content_tokens(content)
        if used > profile.max_tokens:
            raise TooLarge(
                f"content is about {used} tokens; profile {profile.name!r} allows "
                f"{profile.max_tokens}",
                [FieldProblem("content", f"over max_tokens ({used} > {profile.max_tokens})")],
            )
        problems = self._problems(content, profile)
        if problems:
            raise SchemaViolation("content does not match the profile's schema", problems)
        return used

    @staticmethod
    def _problems(content: Content, profile: Profile) -> list[FieldProblem]:
        if profile.pad_format is PadFormat.JSON and not isinstance(content, dict):
            return [FieldProblem("content", "stored content is not an object (format changed)")]
        if profile.pad_format is not PadFormat.JSON and not isinstance(content, str):
            return [FieldProblem("content", "stored content is not text (format changed)")]
        if profile.json_schema is None:
            return []
        return content_problems(profile.json_schema, content)

    # -- agent tools -------------------------------------------------------------------------

    def tool_definitions(self, ref: PadRef, tool_format: tools.ToolFormat) -> list[dict[str, Any]]:
        """Definitions typed by the profile: the session's, else the one named, else default."""
        if ref.session_id is not None:
            profile = self._pads.read_pad(ref).profile
        else:
            name = ref.profile or DEFAULT_PROFILE
            profile = ProfileService(self._profiles).get(
                ref.owner.tenant, ref.owner.namespace, name
            )
        return tools.render_tools(profile, tool_format)

    def call_tool(self, ref: PadRef, name: str, arguments: Any) -> dict[str, Any]:
        """Run a tool call; failures come back as `{"error": ...}` for the model to read."""
        tool = tools.ALIASES.get(name)
        if tool is None:
            known = ", ".join(sorted(t.value for t in tools.ToolName))
            return {"error": f"unknown tool {name!r}; available: {known}"}
        try:
            args = tools.parse_arguments(arguments)
            if tool is tools.ToolName.GET:
                result = self.get(ref)
                return {"result": {"content": result.content, "version": result.version}}
            if tool is tools.ToolName.CLEAR:
                self.clear(ref, None)
                return {"result": "working memory cleared"}

            def change(state: PadState) -> Content:
                content, mode = tools.update_arguments(args, state.profile)
                if mode == "replace":
                    return _replaced(state, content)
                return _patched(state, content)

            written = self._write(ref, change, None)
            return {"result": {"content": written.content, "version": written.version}}
        except tools.ToolArgumentError as exc:
            return {"error": str(exc)}
        except MemkitError as exc:
            if not exc.caller_can_fix:  # throttled or down: a 429 or 503 (service/tools.py)
                raise
            reasons = "; ".join(f"{p.field}: {p.reason}" for p in exc.errors)
            return {"error": f"{exc.detail}" + (f" ({reasons})" if reasons else "")}


def _replaced(state: PadState, content: Content) -> Content:
    if content is None:
        return None
    _check_type(content, state.profile.pad_format)
    return replacement_content(content, state.profile.pad_format)


def _patched(state: PadState, content: Content) -> Content:
    _check_type(content, state.profile.pad_format)
    # deep_merge drops the prototype keys at every depth as it goes.
    return merge_content(
        state.content, content, state.profile.pad_format, state.profile.array_merge
    )
