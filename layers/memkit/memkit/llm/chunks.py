"""Messages given to a model a chunk at a time, as extraction reads them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from memkit.llm.protocol import AnswerCutShort

Item = TypeVar("Item")
Answer = TypeVar("Answer")


def in_chunks(
    items: Sequence[Item],
    size: int,
    ask: Callable[[list[Item]], Answer],
    keep: Callable[[list[Item], Answer], None],
) -> None:
    """Ask the model about `items` `size` at a time, oldest first, and keep each answer
    before the next chunk is asked. A chunk whose answer was cut short is asked again in
    halves (fewer turns, a shorter answer); a single item's cut answer is raised."""
    chunks = [list(items[i : i + size]) for i in range(0, len(items), size)]
    while chunks:
        chunk = chunks.pop(0)
        try:
            answer = ask(chunk)
        except AnswerCutShort:
            if len(chunk) == 1:
                raise
            half = len(chunk) // 2
            chunks[:0] = [chunk[:half], chunk[half:]]
            continue
        keep(chunk, answer)
