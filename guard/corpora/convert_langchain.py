"""LangChain / LangGraph message lists (JSON) → ``carbguard-episodes/1`` episode objects.

Accepted message shapes (as LangChain writes them): ``messages_to_dict`` (``{"type": "ai", "data":
{...}}``), ``dumpd`` (``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``)
and ``model_dump`` (``{"type": "ai", "content": ..., "tool_calls": [...]}``).  Mapping:
``HumanMessage`` → user turn; ``AIMessage.tool_calls`` → one proposal each (``name``, ``args``,
``id``); ``ToolMessage`` → the result of ``tool_call_id`` (``status: "error"`` → error); an
``AIMessage`` without tool calls → the final answer; system messages are skipped.  A tool call
without an id, or a tool message answering no earlier call, is an error naming the message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from guard.corpora._writing import EpisodeBuilder, conversations, parse_arguments, text_of
from guard.errors import CorpusError

_CLASS_TYPES = {
    "HumanMessage": "human",
    "HumanMessageChunk": "human",
    "AIMessage": "ai",
    "AIMessageChunk": "ai",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "SystemMessage": "system",
    "ChatMessage": "chat",
}
_TYPES = {"human": "human", "user": "human", "ai": "ai", "assistant": "ai", "tool": "tool", "system": "system"}


def message_fields(message: Any, at: str) -> tuple[str, dict[str, Any]]:
    """``(type, fields)`` of one serialized LangChain message: type is human, ai, tool or system."""
    if not isinstance(message, dict):
        raise CorpusError(f"{at}: a message must be an object, got {type(message).__name__}")
    if message.get("lc") == 1 and isinstance(message.get("kwargs"), dict):
        ident = message.get("id")
        name = ident[-1] if isinstance(ident, list) and ident else None
        kind = _CLASS_TYPES.get(str(name))
        fields: dict[str, Any] = message["kwargs"]
    elif isinstance(message.get("data"), dict) and "type" in message:
        kind, fields = _TYPES.get(str(message["type"])), message["data"]
    else:
        kind, fields = _TYPES.get(str(message.get("type"))), message
    if kind == "chat":
        kind = _TYPES.get(str(fields.get("role")))
    if kind is None:
        raise CorpusError(f"{at}: not a LangChain human, ai, tool or system message")
    return kind, fields


def convert_messages(messages: list[Any], where: str) -> EpisodeBuilder:
    """The records of one conversation."""
    builder = EpisodeBuilder(where)
    for position, message in enumerate(messages):
        at = f"{where}: messages[{position}]"
        kind, fields = message_fields(message, at)
        if kind == "human":
            builder.user(text_of(fields.get("content"), at))
        elif kind == "ai":
            calls = fields.get("tool_calls") or []
            if not isinstance(calls, list):
                raise CorpusError(f"{at}: tool_calls must be a list")
            for j, call in enumerate(calls):
                if not isinstance(call, dict):
                    raise CorpusError(f"{at}: tool_calls[{j}] must be an object")
                args = parse_arguments(call.get("args"), f"{at}: tool_calls[{j}]")
                builder.proposal(call.get("name"), args, call.get("id"), f"{at}: tool_calls[{j}]")
            if not calls:
                builder.final(text_of(fields.get("content"), at))
        elif kind == "tool":
            status = "error" if fields.get("status") == "error" else "ok"
            builder.result(fields.get("tool_call_id"), text_of(fields.get("content"), at), status, at)
    return builder


def convert_langchain(path: str | Path) -> Iterator[dict[str, Any]]:
    """Episode objects of every conversation in ``path`` (ids ``<file stem>:<n>`` unless given)."""
    stem = Path(path).stem
    for number, (where, eid, messages, meta) in enumerate(conversations(path)):
        yield convert_messages(messages, where).episode(eid or f"{stem}:{number}", meta)


__all__ = ["convert_langchain", "convert_messages", "message_fields"]
