"""The scratchpad block for a system prompt, with instructions for the model."""

from __future__ import annotations

import json

from memkit.models.domain import Content, PadFormat, Profile

UPDATE_TOOL = "update_working_memory"


def _body(content: Content, profile: Profile) -> str:
    if content is None or content == "" or content == {}:
        if profile.template:
            return profile.template
        if profile.json_schema is not None:
            return "{}"
        return ""
    if isinstance(content, str):
        return content
    return json.dumps(content, indent=2, ensure_ascii=False)


def _instructions(content: Content, profile: Profile) -> str:
    empty = content is None or content == "" or content == {}
    lines = [
        "The working_memory block above is your scratchpad: facts, preferences and state you "
        "keep across turns. Read it before you answer.",
    ]
    if profile.read_only:
        lines.append("It is read-only: do not try to change it.")
    elif profile.pad_format is PadFormat.JSON:
        lines.append(
            f"When you learn something worth keeping, call {UPDATE_TOOL} with only the fields "
            'that changed (mode "merge"); set a field to null to remove it. '
            'Use mode "replace" only to rewrite the whole object.'
        )
        if profile.json_schema is not None:
            lines.append(
                "The content must match this JSON Schema:\n"
                + json.dumps(profile.json_schema, indent=2, ensure_ascii=False)
            )
    else:
        lines.append(
            f"When you learn something worth keeping, call {UPDATE_TOOL}: "
            'mode "merge" appends your text, mode "replace" rewrites the whole block.'
        )
        if profile.template:
            # The template stands on its own lines, apart from the sentence that follows it.
            shown = " shown above (it is still empty). " if empty else f":\n{profile.template}\n"
            lines.append(
                "Keep the structure of the template"
                + shown
                + 'Fill it in and send the whole block with mode "replace".'
            )
    lines.append("Do not mention the scratchpad to the user; never store secrets in it.")
    return "\n".join(lines)


def render_prompt(content: Content, profile: Profile) -> str:
    """`<working_memory>` with the content (or the template/schema while empty), then usage."""
    return f"<working_memory>\n{_body(content, profile)}\n</working_memory>\n" + _instructions(
        content, profile
    )
