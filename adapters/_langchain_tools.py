"""Guarded tools for executors that call ``tool.invoke(tool_call)`` themselves (langchain-core only).

See :mod:`guard.adapters.langchain`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from guard.adapters._langchain_core import (
    BaseTool,
    check_agent_tools,
    not_executed,
    refusal_text,
    require,
    tool_output,
)
from guard.adapters.flow import Call, Outcome, Ran, Refused, Tools, aguarded, guarded
from guard.decision import Decision, Reason, Verdict
from guard.errors import InputError, PolicyError
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
    ``escalate`` is refused.  The executor records user turns itself with ``session.observe_user``,
    and only the human's own text (docs/security.md#the-user-channel): never a summary, a tool's
    output or a message its own code inserted.
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

    def _main(self, call: dict[str, Any]) -> Call | Refused:
        """The call this tool is asked to run, or the refusal of a call addressed to another tool."""
        name, args, call_id = call.get("name"), call.get("args"), call.get("id") or ""
        if type(name) is not str or name != self.inner.name:
            return Refused(_mismatch(self.inner.name, name, call_id))
        return Call(name, args, call_id)

    def _tools(self, call: dict[str, Any], as_call: bool, main: Call) -> Tools[tuple[BaseTool, Any], Any]:
        """The flow's view: ``main`` runs as this tool's input, a probe as a tool call to its sibling."""

        def payload(target: Call, bound: dict[str, Any]) -> tuple[BaseTool, Any] | None:
            if target == main:
                return self.inner, {**call, "args": bound} if as_call else bound
            tool = self.siblings.get(target.tool)
            if tool is None:
                return None
            return tool, {"name": target.tool, "args": bound, "id": target.call_id, "type": "tool_call"}

        return Tools(payload, tool_output, max_probe_rounds=self.max_probe_rounds)

    def _finish(self, call: dict[str, Any], as_call: bool, outcome: Outcome[Any]) -> Any:
        if isinstance(outcome, Ran):
            return outcome.output
        if as_call:
            return not_executed(outcome.decision, call)
        raise InputError(refusal_text(outcome.decision))

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Decide, then run the wrapped tool with the authorized arguments, or refuse."""
        call, as_call = self._call(input)
        main = self._main(call)

        def execute(payload: tuple[BaseTool, Any]) -> Any:
            tool, tool_input = payload
            return tool.invoke(tool_input, config, **kwargs)

        if isinstance(main, Refused):
            return self._finish(call, as_call, main)
        return self._finish(call, as_call, guarded(self.session, main, self._tools(call, as_call, main), execute))

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Async twin of :meth:`invoke`."""
        call, as_call = self._call(input)
        main = self._main(call)

        async def execute(payload: tuple[BaseTool, Any]) -> Any:
            tool, tool_input = payload
            return await tool.ainvoke(tool_input, config, **kwargs)

        if isinstance(main, Refused):
            return self._finish(call, as_call, main)
        outcome = await aguarded(self.session, main, self._tools(call, as_call, main), execute)
        return self._finish(call, as_call, outcome)


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
    require("langchain-core")
    if mode is not None and mode != session.guard.mode:
        raise PolicyError(f"guard_tools(mode={mode!r}) needs a session of a Guard built with mode={mode!r}")
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
