"""What an OpenAI Agents SDK run shows the model before its first turn, fed into the guard's session.

See :func:`guard.adapters.openai_agents.observe_input`.  No SDK import here.

**The user channel.** Only what the human wrote is a user turn: the ``role: user`` messages of the
caller's own input.  Everything else that reaches the model is untrusted content, never a user
turn, whatever its role says: the items an SDK ``session=`` memory replays (a compaction, a
``session_input_callback`` or the application may have written them), the items of a ``RunState``
whose input a handoff rewrote or a memory extended (a handoff input filter may have copied a tool
output into a ``role: user`` message), and ``role: user`` items that the model of an earlier
guarded run read but its caller never passed — a handoff input filter or a
``call_model_input_filter`` wrote them (remembered per process, see :class:`SdkUserItems`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import warnings
from collections import OrderedDict
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from guard.adapters._openai_seen import call_key, seen_by
from guard.errors import InputError
from guard.records import safe_repr
from guard.runtime import Session

T = TypeVar("T")
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")
SERVER_STATE = ("previous_response_id", "conversation_id", "auto_previous_response_id")


def plain_item(item: Any, where: str) -> dict[str, Any]:
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


def _fingerprint(texts: Iterable[str]) -> str:
    return hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).hexdigest()


def item_key(item: Mapping[str, Any]) -> str:
    """What identifies an input item for :class:`~guard.adapters._openai_seen.Seen` (never raises).

    A message by its role and content, a function call by id, tool and argument text, a call's
    output by the id it answers (its text is the tool's, observed by the guarded invoke, or a
    refusal the guard wrote), anything else by its whole content without its ``id``.
    """
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        content = item.get("content")
        shape: Any = [kind, item.get("role"), [content] if isinstance(content, str) else content]
    elif kind == "function_call":
        shape = [kind, item.get("call_id"), item.get("name"), item.get("arguments")]
    elif kind == "function_call_output":
        shape = [kind, item.get("call_id")]
    else:
        shape = [kind, {k: v for k, v in item.items() if k != "id"}]
    return _fingerprint([_json(shape)])


def user_texts(item: Any) -> list[str] | None:
    """The text parts of a ``role: user`` message item, or None for any other item (never raises)."""
    try:
        plain = plain_item(item, "item")
        if plain.get("type", "message") != "message" or plain.get("role") != "user":
            return None
        return _parts(plain.get("content"), "item")[0]
    except InputError:
        return None


class SdkUserItems:
    """Fingerprints of ``role: user`` items the SDK or a filter (not the human) put into a guarded run's model input.

    The guarded copies' turn hooks (:mod:`guard.adapters._openai_turns`) record here every ``role:
    user`` message the model is about to read that the session was not fed (a handoff input filter
    or a ``call_model_input_filter`` wrote it), on every entry point; a later feed that gets such an
    item back (``result.to_input_list()`` through any entry point or ``observe_input``) observes it
    as untrusted content.  Bounded
    (the oldest fingerprints are dropped first); per process, shared by every guard (a human's text
    that happens to match is then untrusted too: stricter, never looser).
    """

    LIMIT = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, None] = OrderedDict()

    def add(self, texts: list[str]) -> None:
        """Remember one SDK-made user item."""
        key = _fingerprint(texts)
        with self._lock:
            self._seen[key] = None
            self._seen.move_to_end(key)
            while len(self._seen) > self.LIMIT:
                self._seen.popitem(last=False)

    def clear(self) -> None:
        """Forget every fingerprint (what a new process starts with)."""
        with self._lock:
            self._seen.clear()

    def __contains__(self, texts: object) -> bool:
        if not isinstance(texts, list):
            return False
        key = _fingerprint(texts)
        with self._lock:
            return key in self._seen


SDK_USER_ITEMS = SdkUserItems()


def observe_items(
    session: Session,
    items: str | Sequence[Any],
    label: str,
    *,
    user_channel: bool = True,
    strict: bool = True,
) -> int:
    """Feed every item the model will be shown into ``session``, in order; return the number of user turns.

    - user messages: text parts are user turns — only with ``user_channel`` (the caller's own
      input) and unless a handoff of an earlier guarded run made the item (:class:`SdkUserItems`);
      otherwise untrusted content (``history:user``); image/file/audio parts are untrusted content;
    - system/developer and assistant messages, reasoning summaries: untrusted content (they are not
      the user speaking, and an earlier turn may have copied anything into them);
    - ``function_call``: the call as untrusted content (it is history: never decided, never runnable);
    - ``function_call_output``: content with the source kind the policy gives the tool of the call
      it answers (an unknown tool, or an output whose call the session never saw: untrusted).

    Any other item type (hosted tool calls, item references, compaction, ...) raises InputError
    naming its type and position: the guard would not see what it carries.  With ``strict=False``
    (items already in the model's input, see :mod:`guard.adapters._openai_turns`) such an item is
    observed whole as untrusted content instead.  Every item fed is remembered in the session's
    :class:`~guard.adapters._openai_seen.Seen`.
    """
    seen = seen_by(session)
    if isinstance(items, str):
        seen.items.add(item_key({"role": "user", "content": items}))
        if not user_channel:
            session.observe_content(items, "untrusted_source", "history:user")
            return 0
        session.observe_user(items)
        return 1
    if not isinstance(items, Sequence):
        raise InputError(f"carbguard: the {label} is a {type(items).__name__}, not a string or a list of items")
    users = 0
    for position, raw in enumerate(items):
        item = plain_item(raw, f"{label} item {position}")
        users += _observe_item(session, item, f"{label} item {position}", user_channel=user_channel, strict=strict)
        seen.items.add(item_key(item))
    return users


def _observe_item(session: Session, item: dict[str, Any], where: str, *, user_channel: bool, strict: bool) -> int:
    """Feed one plain item (see :func:`observe_items`); 1 when it was a user turn."""
    kind = item.get("type", "message" if "role" in item else None)
    where = f"{where} (type {safe_repr(kind)[:60]})"
    try:
        return _observe_known(session, item, kind, where, user_channel)
    except InputError:  # raised before anything of the item was observed
        if strict:
            raise
    origin = kind if type(kind) is str else safe_repr(kind)
    session.observe_content(_json(item), "untrusted_source", f"history:{origin[:60]}")
    return 0


def _observe_known(session: Session, item: dict[str, Any], kind: Any, where: str, user_channel: bool) -> int:
    if kind == "message":
        role = item.get("role")
        texts, other = _parts(item.get("content"), where)
        if role not in ("user", "assistant", "system", "developer"):
            raise InputError(f"carbguard: {where} has role {safe_repr(role)[:60]}; refusing the run")
        user = role == "user" and user_channel and texts not in SDK_USER_ITEMS
        if user:
            session.observe_user("\n".join(texts))
        elif texts:
            session.observe_content("\n".join(texts), "untrusted_source", f"history:{role}")
        for part in other:
            session.observe_content(_json(part), "untrusted_source", f"history:{role}:attachment")
        return int(user)
    if kind == "function_call":
        name, call_id = item.get("name"), item.get("call_id")
        if type(name) is not str or type(call_id) is not str:
            raise InputError(f"carbguard: {where} has no name/call_id strings; refusing the run")
        seen_by(session).calls[call_id] = name
        text = _json({"name": name, "arguments": item.get("arguments")})
        session.observe_content(text, "untrusted_source", f"history:call:{name}")
    elif kind == "function_call_output":
        answered = item.get("call_id")
        name = seen_by(session).calls.get(answered) if type(answered) is str else None
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
    return 0


def _state_field(state: Any, name: str) -> Any:
    if not hasattr(state, name):
        raise InputError(f"carbguard: this RunState has no {name} (an SDK version the guard does not know); refusing")
    return getattr(state, name)


def state_items(state: Any) -> list[Any]:
    """The run items of a ``RunState`` as input items (approval placeholders left out: their call is an item)."""
    items = _state_field(state, "_session_items") or _state_field(state, "_generated_items")
    out = []
    for position, item in enumerate(items):
        kind = getattr(item, "type", None)
        if kind == "tool_approval_item":
            continue
        to_input = getattr(item, "to_input_item", None)
        if not callable(to_input):
            raise InputError(
                f"carbguard: RunState item {position} ({safe_repr(kind)[:60]}) is not a run item; refusing"
            )
        try:
            out.append(to_input())
        except Exception as exc:  # noqa: BLE001 - an item the guard cannot read refuses the resume
            raise InputError(
                f"carbguard: RunState item {position} ({safe_repr(kind)[:60]}) cannot be read: {type(exc).__name__}"
            ) from None
    return out


def _handed_off(state: Any, function_tools: frozenset[str]) -> bool:
    """Whether the run behind ``state`` may have handed off (so a handoff input filter may have rewritten its input).

    Yes when it holds a handoff item, ended on another agent than it started with, or the model
    called anything that is not one of the agents' function tools (a ``transfer_to_...``).
    """
    items = (*_state_field(state, "_session_items"), *_state_field(state, "_generated_items"))
    if any(getattr(i, "type", None) in ("handoff_call_item", "handoff_output_item") for i in items):
        return True
    if getattr(state, "_current_agent", None) is not getattr(state, "_starting_agent", None):
        return True
    if getattr(state, "_nested_history_owned_session_item_refs", None):
        return True
    for response in _state_field(state, "_model_responses"):
        for out in getattr(response, "output", None) or ():
            if getattr(out, "type", None) == "function_call" and getattr(out, "name", None) not in function_tools:
                return True
    return False


def _kind(item: Any) -> Any:
    plain = plain_item(item, "RunState item")
    return plain.get("type", "message" if "role" in plain else None)


def observe_state(session: Session, state: Any, *, memory: bool, function_tools: frozenset[str]) -> int:
    """Feed a ``RunState``'s history into ``session``: its input, then every item the run made; return the user turns.

    The state's input is the caller's input of the interrupted run — what the human wrote — only when
    no handoff may have rewritten it (:func:`_handed_off`; ``function_tools`` are the names of the
    agents' function tools) and no SDK ``session=`` memory was prepended to it (``memory``); otherwise
    its ``role: user`` messages are observed as untrusted content.  The run's items (tool calls and
    outputs, messages, reasoning, handoffs) follow, classified as by :func:`observe_items`; a call
    without an output (waiting for approval, or not run yet) is left out: it is a proposal, decided
    when it is about to run, as in a run that was never interrupted — and the one kind of call a
    guarded copy decides without having seen the model turn that proposed it
    (:class:`~guard.adapters._openai_seen.Seen`).
    """
    if any(_state_field(state, k) for k in ("_conversation_id", "_previous_response_id", "_auto_previous_response_id")):
        raise InputError(
            "carbguard: this RunState continues a conversation stored by the server, which the guard cannot read"
        )
    made = [plain_item(i, "RunState item") for i in state_items(state)]
    rewritten = memory or _handed_off(state, function_tools)
    answered = {i.get("call_id") for i in made if _kind(i) == "function_call_output"}
    pending = [i for i in made if _kind(i) == "function_call" and i.get("call_id") not in answered]
    original = _state_field(state, "_original_input")
    users = observe_items(session, original, "RunState input", user_channel=not rewritten)
    observe_items(session, [i for i in made if not any(i is p for p in pending)], "RunState item", user_channel=False)
    _witness_pending(session, pending)
    return users


def _witness_pending(session: Session, pending: list[dict[str, Any]]) -> None:
    """The state's calls without an output: proposals the session was fed with their whole prefix (decidable)."""
    seen = seen_by(session)
    for position, call in enumerate(pending):
        call_id, name, arguments = call.get("call_id"), call.get("name"), call.get("arguments")
        if type(call_id) is not str or type(name) is not str or type(arguments) is not str:
            raise InputError(f"carbguard: RunState pending call {position} has no call_id/name/arguments strings")
        seen.items.add(item_key(call))
        seen.calls[call_id] = name
        seen.proposed.add(call_key(call_id, name, arguments))


async def memory_items(memory: Any) -> list[Any]:
    """The items of an SDK ``session=`` memory (read before the run: the SDK prepends them to the input)."""
    get_items = getattr(memory, "get_items", None)
    if not callable(get_items):
        raise InputError(f"carbguard: session= is a {type(memory).__name__} without get_items(); refusing the run")
    return list(await get_items())


def on_default_loop(coro: Coroutine[Any, Any, T]) -> T:
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


__all__ = [
    "SDK_USER_ITEMS",
    "SERVER_STATE",
    "SdkUserItems",
    "item_key",
    "memory_items",
    "observe_items",
    "observe_state",
    "on_default_loop",
    "plain_item",
    "state_items",
    "user_texts",
]
