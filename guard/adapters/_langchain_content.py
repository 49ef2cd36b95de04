"""What a LangChain message gives the model, as text the guard observes (no LangChain import here)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from guard.errors import InputError
from guard.records import safe_repr
from guard.runtime import Session

log = logging.getLogger("guard.adapters.langchain")


def render_block(block: Any) -> str:
    """One content block as the model is given it: a text block as its text, any other as its JSON.

    A block that is not JSON (bytes, an object) is observed as its repr: opaque, never nothing.
    """
    if type(block) is str:
        return block
    if isinstance(block, Mapping) and block.get("type") == "text" and type(block.get("text")) is str:
        return str(block["text"])
    try:
        return json.dumps(block, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return safe_repr(block)


def content_text(message: Any) -> str:
    """Everything of ``message.content`` that reaches the model, as text (``message.text`` keeps only text blocks).

    ``json``, ``search_result``, ``document``, image, file, non-standard and unknown blocks are
    rendered as their canonical JSON, so a private value inside them is observed.  ``ToolMessage.artifact``
    never reaches the model and is not observed.
    """
    content = message.content
    if type(content) is str:
        return content
    if isinstance(content, list | tuple):
        return "\n".join(render_block(block) for block in content)
    return render_block(content)


def attachments(message: Any) -> list[Any]:
    """The blocks of a message that are not text (images, files, documents, JSON, unknown)."""
    content = message.content
    if type(content) is str or not isinstance(content, list | tuple):
        return []
    return [b for b in content if type(b) is not str and not (isinstance(b, Mapping) and b.get("type") == "text")]


def observe_result(
    session: Session, call_id: str, text: str, status: str, skipped: list[str], tool: Any = None
) -> None:
    """Record a result; one the session cannot place (unknown or answered call id) is reported in ``skipped``.

    The model still reads such a stray result, so its text is recorded as content (never as the
    result of a call): with the source kind the policy gives the tool the message names, else
    ``untrusted_source``.
    """
    try:
        session.observe_result(call_id, text, status)
    except InputError as exc:
        skipped.append(str(exc))
        log.warning("carbguard: %s (recorded as content, answering no call)", exc)
        name = tool if type(tool) is str and tool else None
        source = session.tool_source(name) if name else "untrusted_source"
        session.observe_content(text, source, f"stray_result:{name or 'unknown'}")


__all__ = ["attachments", "content_text", "observe_result", "render_block"]
