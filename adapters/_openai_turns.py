"""The OpenAI Agents SDK adapter's view of each model turn: what the model reads, what it proposes.

A guarded copy of an agent (:func:`guard.adapters.openai_agents.guard_agent`) carries
:class:`TurnHooks` as its agent hooks (wrapping the agent's own).  Before every model call the
SDK hands them the model's whole input — after a handoff input filter, ``nest_handoff_history``,
a ``session_input_callback`` or a ``call_model_input_filter`` rewrote it — and after it the
model's output.  So on every entry point (``run``, ``run_sync``, ``run_streamed``, the caller's own
``Runner.run(guard_agent(agent, session), ...)``, a resumed ``RunState``):

- an input item the session was never fed is observed as untrusted content before the model reads
  it (:func:`observe_unseen`), never as a user turn: the guard did not see it arrive from the
  caller.  A ``role: user`` message among them is remembered (``SDK_USER_ITEMS``), so when the
  conversation continues with ``result.to_input_list()`` it stays untrusted;
- the calls of the model's output are proposals the session saw (:func:`witness`).  The guarded
  tools decide only such calls, or the pending calls of a ``RunState`` fed with ``observe_input``
  (:mod:`guard.adapters._openai_seen`): a call whose turn the session never saw is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents import Agent, AgentHookContext, AgentHooks, RunContextWrapper, Tool
from agents.items import ModelResponse, TResponseInputItem

from guard.adapters._openai_history import SDK_USER_ITEMS, item_key, observe_items, plain_item, user_texts
from guard.adapters._openai_seen import call_key, seen_by
from guard.records import RecordKind
from guard.runtime import Session

__all__ = ["TurnHooks", "observe_unseen", "witness"]


def _seen_item(session: Session, item: dict[str, Any], users: set[str]) -> bool:
    if item_key(item) in seen_by(session).items:
        return True
    texts = user_texts(item)
    if texts is not None:  # a human turn the caller gave the session with observe_user
        return "\n".join(texts) in users
    call_id = item.get("call_id")
    # an output of a call this session decided: the tool's output it observed, or the guard's refusal
    return item.get("type") == "function_call_output" and type(call_id) is str and session.decision(call_id) is not None


def observe_unseen(session: Session, items: Iterable[Any], label: str) -> int:
    """Observe, as untrusted content, every item of ``items`` the session has not seen; return how many.

    Seen: fed by :func:`~guard.adapters._openai_history.observe_items` (``observe_input``, a
    guarded run's feed, an earlier model turn), made by the model on a turn the session saw, a
    ``role: user`` message whose text is a user turn of the session, an output of a call it decided.
    The rest is observed in order with ``user_channel=False`` (what the guard does not understand
    whole, as untrusted JSON); its ``role: user`` messages are remembered as SDK-made.
    """
    if not session.graph.records:  # fed nothing: the guarded tools refuse every call (see _openai_tools)
        return 0
    users = {r.text for r in session.graph.records.values() if r.kind is RecordKind.USER}
    fresh = []
    for position, raw in enumerate(items):
        item = plain_item(raw, f"{label} item {position}")
        if not _seen_item(session, item, users):
            texts = user_texts(item)
            if texts is not None:
                SDK_USER_ITEMS.add(texts)
            fresh.append(item)
    observe_items(session, fresh, label, user_channel=False, strict=False)
    return len(fresh)


def witness(session: Session, output: Iterable[Any]) -> None:
    """Record the model's output as seen: its items, and its function calls as proposals the session may decide."""
    seen = seen_by(session)
    for position, raw in enumerate(output):
        item = plain_item(raw, f"model output item {position}")
        seen.items.add(item_key(item))
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
        if item.get("type") == "function_call" and type(call_id) is str and type(name) is str:
            seen.calls[call_id] = name
            if type(arguments) is str:
                seen.proposed.add(call_key(call_id, name, arguments))


class TurnHooks(AgentHooks[Any]):
    """A guarded copy's agent hooks: each model turn's input observed, its output witnessed; ``inner`` still runs."""

    def __init__(self, session: Session, inner: Any) -> None:
        self.session = session
        self.inner = inner

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        """Observe what the model is about to read and the session has not seen (as untrusted content)."""
        observe_unseen(self.session, input_items, "model input")
        if self.inner is not None:
            await self.inner.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        """Witness the model's output (before the SDK runs any of its calls' guardrails)."""
        witness(self.session, response.output)
        if self.inner is not None:
            await self.inner.on_llm_end(context, agent, response)

    async def on_start(self, context: AgentHookContext[Any], agent: Agent[Any]) -> None:
        if self.inner is not None:
            await self.inner.on_start(context, agent)

    async def on_end(self, context: AgentHookContext[Any], agent: Agent[Any], output: Any) -> None:
        if self.inner is not None:
            await self.inner.on_end(context, agent, output)

    async def on_handoff(self, context: RunContextWrapper[Any], agent: Agent[Any], source: Agent[Any]) -> None:
        if self.inner is not None:
            await self.inner.on_handoff(context, agent, source)

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool) -> None:
        if self.inner is not None:
            await self.inner.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object) -> None:
        if self.inner is not None:
            await self.inner.on_tool_end(context, agent, tool, result)
