"""What an OpenAI Agents SDK run shows the model before its first turn, fed into the guard's session.

See :func:`guard.adapters.openai_agents.observe_input`.  No SDK import here.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from guard.errors import InputError
from guard.records import safe_repr
from guard.runtime import Session

_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")
SERVER_STATE = ("previous_response_id", "conversation_id", "auto_previous_response_id")


def _plain_item(item: Any, where: str) -> dict[str, Any]:
    """An input item as a plain dict (SDK/pydantic items are dumped); anything else fails closed."""
    dump = getattr(item, "model_dump", None)
    if callable(dump) and not isinstance(item, Mapping):
        item = dump(exclude_unset=True)
    if not isinstance(item, Mapping):
        raise InputError(f"carbguard: {where} is a {type(item).__name__}, not an input item; refusing the run")
    return dict(item)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return safe_repr(value)


def _parts(content: Any, where: str) -> tuple[list[str], list[Any]]:
    """(text parts, other parts) of a message's content; the other parts reach the model too."""
    if isinstance(content, str):
        return [content], []
    if not isinstance(content, list | tuple):
        raise InputError(f"carbguard: {where} has content of type {type(content).__name__}; refusing the run")
    texts, other = [], []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS and type(part.get("text")) is str:
            texts.append(str(part["text"]))
        elif isinstance(part, Mapping) and part.get("type") == "refusal" and type(part.get("refusal")) is str:
            texts.append(str(part["refusal"]))
        else:
            other.append(part)
    return texts, other


def observe_items(session: Session, items: str | Sequence[Any], label: str) -> int:
    """Feed every item the model will be shown into ``session``, in order; return the number of user turns.

    - user messages: text parts are user turns; image/file/audio parts are untrusted content;
    - system/developer and assistant messages, reasoning summaries: untrusted content (they are not
      the user speaking, and an earlier turn may have copied anything into them);
    - ``function_call``: the call as untrusted content (it is history: never decided, never runnable);
    - ``function_call_output``: content with the source kind the policy gives the tool of the call
      it answers (an unknown tool, or an output whose call is not in the history: untrusted).

    Any other item type (hosted tool calls, item references, compaction, ...) raises InputError
    naming its type and position: the guard would not see what it carries.
    """
    if isinstance(items, str):
        session.observe_user(items)
        return 1
    if not isinstance(items, Sequence):
        raise InputError(f"carbguard: the {label} is a {type(items).__name__}, not a string or a list of items")
    tools, users = {}, 0
    for position, raw in enumerate(items):
        where = f"{label} item {position}"
        item = _plain_item(raw, where)
        kind = item.get("type", "message" if "role" in item else None)
        where = f"{where} (type {safe_repr(kind)[:60]})"
        if kind == "message":
            role = item.get("role")
            texts, other = _parts(item.get("content"), where)
            if role == "user":
                session.observe_user("\n".join(texts))
                users += 1
            elif role in ("assistant", "system", "developer"):
                if texts:
                    session.observe_content("\n".join(texts), "untrusted_source", f"history:{role}")
            else:
                raise InputError(f"carbguard: {where} has role {safe_repr(role)[:60]}; refusing the run")
            for part in other:
                session.observe_content(_json(part), "untrusted_source", f"history:{role}:attachment")
        elif kind == "function_call":
            name, call_id = item.get("name"), item.get("call_id")
            if type(name) is not str or type(call_id) is not str:
                raise InputError(f"carbguard: {where} has no name/call_id strings; refusing the run")
            tools[call_id] = name
            text = _json({"name": name, "arguments": item.get("arguments")})
            session.observe_content(text, "untrusted_source", f"history:call:{name}")
        elif kind == "function_call_output":
            answered = item.get("call_id")
            name = tools.get(answered) if type(answered) is str else None
            output = item.get("output")
            if isinstance(output, str):
                text = output
            else:
                texts, other = _parts(output, where)
                text = "\n".join([*texts, *(_json(part) for part in other)])
            source = session.tool_source(name) if name is not None else "untrusted_source"
            session.observe_content(text, source, f"history:{name or 'unknown_call'}")
        elif kind == "reasoning":
            texts, other = _parts(item.get("summary") or [], where)
            more, rest = _parts(item.get("content") or [], where)
            text = "\n".join([*texts, *more, *(_json(part) for part in [*other, *rest])])
            if text:
                session.observe_content(text, "untrusted_source", "history:reasoning")
        else:
            raise InputError(
                f"carbguard: {where} is not an item the guard understands (what it carries would reach the model "
                "unseen); refusing the run"
            )
    return users


async def memory_items(memory: Any) -> list[Any]:
    """The items of an SDK ``session=`` memory (read before the run: the SDK prepends them to the input)."""
    get_items = getattr(memory, "get_items", None)
    if not callable(get_items):
        raise InputError(f"carbguard: session= is a {type(memory).__name__} without get_items(); refusing the run")
    return list(await get_items())


def on_default_loop(coro: Coroutine[Any, Any, list[Any]]) -> list[Any]:
    """Run ``coro`` on the thread's default loop, the loop ``Runner.run_sync`` uses (SDK sessions bind to it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError("run_sync cannot be called when an event loop is already running; use run")
    policy = asyncio.get_event_loop_policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = policy.get_event_loop()
        except RuntimeError:
            loop = None
    if loop is None or loop.is_closed():
        loop = policy.new_event_loop()
        policy.set_event_loop(loop)
    return loop.run_until_complete(coro)


__all__ = ["SERVER_STATE", "memory_items", "observe_items", "on_default_loop"]
