"""Guarded tools for executors that call ``tool.invoke(tool_call)`` themselves (langchain-core only).

See :mod:`guard.adapters.langchain`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from guard.adapters._langchain_content import observe_result
from guard.adapters._langchain_core import (
    BaseTool,
    _authorize,
    _Decide,
    _drive_async,
    _drive_sync,
    _Execute,
    _Flow,
    _not_executed,
    _require,
    _settle,
    _tool_output,
    check_agent_tools,
    refusal_text,
)
from guard.decision import Decision, ProbeCall, Reason, Verdict
from guard.errors import InputError
from guard.records import safe_repr
from guard.runtime import Session

# --------------------------------------------------------------------------- langchain-core only


class GuardedTool(BaseTool):
    """A ``BaseTool`` that asks the guard before running the tool it wraps.

    Invoke it with a tool call (``{"name", "args", "id", "type": "tool_call"}``) to get a
    ``ToolMessage``: the tool's, or a refusal with ``status="error"``.  Invoked with bare arguments
    it gets a fresh call id and returns the tool's output, or raises :class:`~guard.errors.GuardError`
    subclass ``InputError`` with the refusal.  A tool call whose ``name`` is not this tool's is
    refused (it is not decided as another tool and run as this one).  The wrapped tool runs only
    with the arguments :meth:`Session.authorize` returns.  There is no human in this loop:
    ``escalate`` is refused.  The executor records user turns itself with ``session.observe_user``.
    """

    inner: BaseTool
    session: Any
    siblings: dict[str, BaseTool]
    max_probe_rounds: int = 2

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is overridden
        raise NotImplementedError("GuardedTool is run through invoke/ainvoke")

    def _call(self, input: Any) -> tuple[dict[str, Any], bool]:
        if isinstance(input, Mapping) and input.get("type") == "tool_call":
            return dict(input), True
        args = dict(input) if isinstance(input, Mapping) else {"input": input}
        return {"name": self.inner.name, "args": args, "id": f"guard-{uuid.uuid4().hex}", "type": "tool_call"}, False

    def _flow(self, call: dict[str, Any], as_call: bool) -> _Flow:
        skipped: list[str] = []
        session: Session = self.session
        name, args, call_id = call.get("name"), call.get("args"), call.get("id") or ""
        if type(name) is not str or name != self.inner.name:
            return _mismatch(self.inner.name, name, call_id), None
        decision = yield _Decide(name, args, call_id)

        def probe_payload(probe: ProbeCall, bound: dict[str, Any]) -> Any | None:
            tool = self.siblings.get(probe.tool)
            if tool is None:
                return None
            return tool, {"name": probe.tool, "args": bound, "id": probe.call_id, "type": "tool_call"}

        decision = yield from _settle(
            session, decision, (name, args, call_id), probe_payload, self.max_probe_rounds, skipped
        )
        shadow = session.guard.mode == "shadow"
        if not decision.allowed and not shadow:
            return decision, None
        bound = _authorize(session, call_id, name, args)
        if bound is None and not shadow:
            return (yield _Decide(name, args, call_id)), None  # ran already: refused and audited
        run_args = args if bound is None else bound
        out = yield _Execute((self.inner, {**call, "args": run_args} if as_call else run_args))
        text, status = _tool_output(out)
        observe_result(session, call_id, text, status, skipped, name)
        return decision, out

    def _finish(self, call: dict[str, Any], as_call: bool, outcome: tuple[Decision, Any]) -> Any:
        decision, out = outcome
        if out is not None or decision.allowed or self.session.guard.mode == "shadow":
            return out
        if as_call:
            return _not_executed(decision, call)
        raise InputError(refusal_text(decision))

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Decide, then run the wrapped tool with the authorized arguments, or refuse."""
        call, as_call = self._call(input)

        def execute(payload: tuple[BaseTool, Any]) -> Any:
            tool, tool_input = payload
            return tool.invoke(tool_input, config, **kwargs)

        return self._finish(call, as_call, _drive_sync(self._flow(call, as_call), self.session, execute))

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Async twin of :meth:`invoke`."""
        call, as_call = self._call(input)

        async def execute(payload: tuple[BaseTool, Any]) -> Any:
            tool, tool_input = payload
            return await tool.ainvoke(tool_input, config, **kwargs)

        return self._finish(call, as_call, await _drive_async(self._flow(call, as_call), self.session, execute))


def _mismatch(own: str, name: Any, call_id: Any) -> Decision:
    """The refusal of a tool call addressed to another tool (nothing is decided or run)."""
    message = f"the tool call names {safe_repr(name)[:80]} but was invoked on {own!r}; refused"
    return Decision(
        verdict=Verdict.ESCALATE,
        reason=Reason.BAD_ARGUMENTS,
        message=message,
        score=None,
        threshold=None,
        tool=own,
        call_id=call_id if type(call_id) is str else safe_repr(call_id)[:200],
    )


def guard_tools(
    tools: Sequence[BaseTool], session: Session, *, max_probe_rounds: int = 2, mode: str | None = None
) -> list[GuardedTool]:
    """Wrap ``tools`` so that each ``invoke(tool_call)`` is decided by ``session`` first.

    Probe tools are looked up by name among ``tools``.  Results of executed calls are observed
    into the session; refusals come back as ``ToolMessage(status="error")``.  ``mode`` must be
    None or the session's guard's mode (``"enforce"`` / ``"shadow"``): a session belongs to its
    guard, so build the guard with ``Guard(..., mode="shadow")`` for shadow runs.
    """
    _require("langchain-core")
    if mode is not None and mode != session.guard.mode:
        raise ValueError(f"guard_tools(mode={mode!r}) needs a session of a Guard built with mode={mode!r}")
    by_name = {t.name: t for t in tools}
    if len(by_name) != len(tools):
        raise ValueError("guard_tools: tool names must be unique")
    check_agent_tools(session.guard.policy, tools)
    return [
        GuardedTool(
            name=t.name,
            description=t.description,
            args_schema=t.args_schema,
            inner=t,
            session=session,
            siblings=by_name,
            max_probe_rounds=max_probe_rounds,
        )
        for t in tools
    ]
