"""Views of domain results as API models, without the HTTP machinery: the REST routes wrap
them in responses (memkit.api.responses) and the MCP tools return them as they are."""

from __future__ import annotations

from dataclasses import asdict

from memkit.models.domain import StoredMessage
from memkit.models.session import MemoryStrategy, MessageView, SessionScratchpad, SessionView
from memkit.service.sessions import SessionDocument


def message_view(message: StoredMessage) -> MessageView:
    # The view is the stored message less its order key and token count (ignored keys).
    return MessageView.model_validate(asdict(message))


def session_view(document: SessionDocument) -> SessionView:
    meta, window, pad = document.meta, document.window, document.pad
    return SessionView(
        session_id=meta.session_id,
        namespace=meta.namespace,
        user_id=meta.user_id,
        messages=[message_view(m) for m in window.messages],
        memories=document.memories,
        # agent-memory-client cannot read a null top-level data value; none is ever stored.
        data=meta.data or {},
        context=meta.context,
        tokens=meta.tokens,
        ttl_seconds=meta.ttl_seconds,
        long_term_memory_strategy=MemoryStrategy.model_validate(meta.strategy or {}),
        profile=meta.profile,
        title=meta.title,
        metadata=meta.metadata or {},
        index_messages=meta.index_messages,
        context_window_max=meta.window_tokens,
        scratchpad=(
            SessionScratchpad(
                profile=pad.profile.name,
                scope=pad.state.scope.value,
                format=pad.profile.pad_format.value,
                content=pad.content,
                version=pad.version,
            )
            if pad is not None
            else None
        ),
        created_at=meta.created_at,
        updated_at=meta.updated_at,
        last_accessed=meta.last_accessed or meta.updated_at,
        expires_at=meta.expires_at,
        message_count=meta.message_count,
        version=meta.version,
        context_percentage_total_used=window.total_used,
        context_percentage_until_summarization=window.until_summarization,
        new_session=document.created or None,
        reconstructed=document.reconstructed or None,
    )
