"""OpenAI chat-completions message lists (JSON) → ``carbguard-episodes/1`` episode objects.

Mapping: ``role: user`` → user turn; an assistant message's ``tool_calls`` → one proposal each
(``function.name``, ``function.arguments`` parsed from its JSON string, ``id``); ``role: tool`` →
the result of ``tool_call_id``; an assistant message without tool calls → the final answer;
``system`` / ``developer`` messages are skipped.  The legacy ``function_call`` / ``role: function``
form has no call ids and is refused.  A conversation may be a bare message list or a request body
(``{"messages": [...]}``, with optional ``id`` and ``meta``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from guard.corpora._writing import EpisodeBuilder, conversations, parse_arguments, text_of
from guard.errors import CorpusError


def _tool_call(builder: EpisodeBuilder, call: Any, at: str) -> None:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise CorpusError(f"{at}: expected {{'id': ..., 'type': 'function', 'function': {{'name', 'arguments'}}}}")
    function = call["function"]
    builder.proposal(function.get("name"), parse_arguments(function.get("arguments"), at), call.get("id"), at)


def convert_messages(messages: list[Any], where: str) -> EpisodeBuilder:
    """The records of one conversation."""
    builder = EpisodeBuilder(where)
    for position, message in enumerate(messages):
        at = f"{where}: messages[{position}]"
        if not isinstance(message, dict):
            raise CorpusError(f"{at}: a message must be an object, got {type(message).__name__}")
        role = message.get("role")
        if role == "user":
            builder.user(text_of(message.get("content"), at))
        elif role == "assistant":
            if message.get("function_call") is not None:
                raise CorpusError(f"{at}: legacy function_call has no call id; use tool_calls")
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise CorpusError(f"{at}: tool_calls must be a list")
            for j, call in enumerate(calls):
                _tool_call(builder, call, f"{at}: tool_calls[{j}]")
            if not calls:
                builder.final(text_of(message.get("content"), at))
        elif role == "tool":
            builder.result(message.get("tool_call_id"), text_of(message.get("content"), at), "ok", at)
        elif role == "function":
            raise CorpusError(f"{at}: legacy role 'function' has no call id; use tool_calls and role 'tool'")
        elif role not in ("system", "developer"):
            raise CorpusError(f"{at}: unknown role {role!r}")
    return builder


def convert_openai(path: str | Path) -> Iterator[dict[str, Any]]:
    """Episode objects of every conversation in ``path`` (ids ``<file stem>:<n>`` unless given)."""
    stem = Path(path).stem
    for number, (where, eid, messages, meta) in enumerate(conversations(path)):
        yield convert_messages(messages, where).episode(eid or f"{stem}:{number}", meta)


__all__ = ["convert_messages", "convert_openai"]
