"""What a LangChain message gives the model, as text the guard observes (no LangChain import here)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from guard.records import safe_repr


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


MARKER_KEYS = ("lc_source",)


def marker(message: Any) -> str | None:
    """The framework marker of a message a middleware wrote (e.g. ``lc_source: summarization``), or None."""
    for where in (getattr(message, "additional_kwargs", None), getattr(message, "response_metadata", None)):
        if isinstance(where, Mapping):
            for key in MARKER_KEYS:
                if where.get(key) is not None:
                    return f"{key}={str(where[key])[:80]}"
    return None


__all__ = ["MARKER_KEYS", "attachments", "content_text", "marker", "render_block"]
