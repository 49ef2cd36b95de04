"""The OpenAI Agents SDK adapter's tool binding: guarded copies of an agent's function tools.

Each ``FunctionTool`` gets a copy whose input guardrail is the gate half of the flow (decide, probes
included) and whose ``on_invoke_tool`` runs the tool only with the arguments the session authorized
(``guard.adapters.flow``).  Used by :mod:`guard.adapters.openai_agents`, which re-exports
:func:`guard_tools`.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import FunctionTool, ToolGuardrailFunctionOutput
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolInputGuardrail, ToolInputGuardrailData

from guard.adapters._lifecycle import check_tools
from guard.adapters._openai_seen import seen_by
from guard.adapters._openai_turns import observe_unseen
from guard.adapters._refusal import refusal_text
from guard.adapters.flow import Call, Refused, Tools, agate, aguarded
from guard.decision import Decision
from guard.errors import GuardError, InputError
from guard.runtime import Session

__all__ = ["MAX_PROBE_ROUNDS", "guard_tools"]

log = logging.getLogger("guard.adapters.openai_agents")
MAX_PROBE_ROUNDS = 3


def _parse(raw: str) -> Any:
    """The model's argument text as the guard sees it: JSON, ``{}`` when empty, else the raw text (refused)."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _output_text(out: Any) -> str:
    if isinstance(out, str):
        return out
    dump = getattr(out, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    if isinstance(out, list | tuple):
        return "\n".join(_output_text(o) for o in out)
    return str(out)


def _info(decision: Decision) -> dict[str, Any]:
    return {
        "carbguard": True,
        "verdict": decision.verdict.value,
        "reason": decision.reason.value,
        "score": decision.score,
        "threshold": decision.threshold,
        "call_id": decision.call_id,
    }


_Payload = tuple[FunctionTool, ToolContext[Any], str]  # a tool, its context and its JSON arguments


def _unseen_prefix(session: Session, ctx: ToolContext[Any]) -> InputError | None:
    """Why ``session`` cannot decide the call of ``ctx`` on the prefix the model had (None when it can).

    It can when it was fed the run (``observe_input`` or a guarded run's feed) and saw the model
    turn that proposed the call (:func:`~guard.adapters._openai_turns.witness`) or was fed the
    ``RunState`` the call waits in.  The run's input (``ctx.turn_input``) it has not seen is then
    observed as untrusted content first.
    """
    sid = session.session_id
    if not session.graph.records:
        return InputError(f"session {sid!r} has seen nothing of the run; use observe_input first")
    if not seen_by(session).witnessed(ctx.tool_call_id, ctx.tool_name, ctx.tool_arguments):
        return InputError(
            f"session {sid!r} never saw the model turn that proposed call {ctx.tool_call_id!r} "
            f"({ctx.tool_name}): a RunState from an earlier run holds items this session never observed "
            "(feed it with observe_input(session, state) before running it), or the tools were guarded "
            "without guard_agent (whose hooks see each model turn)"
        )
    try:
        observe_unseen(session, ctx.turn_input, "run input")
    except InputError as exc:
        return exc
    return None


def _report(problem: str) -> None:
    log.warning("%s", problem)


@dataclass
class _Binding:
    """The guarded copies of one agent's tools and the session they answer to."""

    session: Session
    originals: dict[str, FunctionTool] = field(default_factory=dict)

    def _tools(self, ctx: ToolContext[Any]) -> Tools[_Payload, Any]:
        """The flow's view of one tool context: a call runs as its tool's ``on_invoke_tool`` with JSON arguments."""

        def payload(call: Call, args: dict[str, Any]) -> _Payload | None:
            tool = self.originals.get(call.tool) if type(call.tool) is str else None
            if tool is None:
                return None
            text = json.dumps(args)
            if call.call_id == ctx.tool_call_id:
                return tool, ctx, text
            probe_ctx = ToolContext(
                context=ctx.context,
                usage=ctx.usage,
                tool_name=call.tool,
                tool_call_id=call.call_id,
                tool_arguments=text,
                agent=ctx.agent,
                run_config=ctx.run_config,
            )
            return tool, probe_ctx, text

        return Tools(payload, lambda out: (_output_text(out), "ok"), _report, MAX_PROBE_ROUNDS)

    @staticmethod
    async def _run(payload: _Payload) -> Any:
        tool, ctx, args = payload
        return await tool.on_invoke_tool(ctx, args)

    async def guardrail(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        """The gate half of the flow: decide the call (probes included); allow it when the flow would run it."""
        ctx = data.context
        call = Call(ctx.tool_name, _parse(ctx.tool_arguments), ctx.tool_call_id)
        unseen = _unseen_prefix(self.session, ctx)
        # fail closed: a decision without what the model read before this call is a refusal
        blind = None if unseen is None else self.session.refuse(call.tool, call.args, call.call_id, unseen)
        gate = await agate(self.session, call, self._tools(ctx), self._run, decision=blind)
        if isinstance(gate, Refused):
            return ToolGuardrailFunctionOutput.reject_content(
                refusal_text(gate.decision), output_info=_info(gate.decision)
            )
        return ToolGuardrailFunctionOutput.allow(output_info=_info(gate))

    async def invoke(self, tool: FunctionTool, ctx: ToolContext[Any], raw: str) -> Any:
        """Run ``tool`` only with the arguments ``session.authorize`` returns for this call id; observe its output."""
        call, decision = Call(tool.name, _parse(raw), ctx.tool_call_id), self.session.decision(ctx.tool_call_id)
        outcome = await aguarded(self.session, call, self._tools(ctx), self._run, decision=decision, cleared=True)
        if isinstance(outcome, Refused):
            return refusal_text(outcome.decision)
        return outcome.output


def _guarded_copy(tool: FunctionTool, binding: _Binding) -> FunctionTool:
    guarded = copy.copy(tool)

    async def on_invoke_tool(ctx: ToolContext[Any], raw: str) -> Any:
        return await binding.invoke(tool, ctx, raw)

    gate: ToolInputGuardrail[Any] = ToolInputGuardrail(guardrail_function=binding.guardrail, name="carbguard")
    guarded.on_invoke_tool = on_invoke_tool
    guarded.tool_input_guardrails = [gate, *(tool.tool_input_guardrails or [])]
    return guarded


def guard_tools(tools: Sequence[Any], session: Session, *, unguarded: Iterable[str] = ()) -> list[Any]:
    """Guarded copies of ``tools`` bound to ``session`` (one session per run); use them through ``guard_agent``.

    A guarded copy decides only a call proposed on a model turn the session saw, which the turn
    hooks of ``guard_agent``'s copy record (:mod:`guard.adapters._openai_turns`): in an ``Agent``
    built around these tools without them, every call is refused (fail closed).

    Every ``FunctionTool`` is guarded.  Any other tool (hosted web/file search, code interpreter,
    computer, shell, hosted MCP, ...) runs outside this process where the guard cannot stop it:
    it is refused with a ``GuardError`` unless its name is in ``unguarded``, which keeps it as is.
    """
    if not isinstance(session, Session):
        raise InputError(f"guard_tools needs a guard Session (one per run), got {type(session).__name__}")
    allowed, binding, out, refused = set(unguarded), _Binding(session), [], []
    for tool in tools:
        if isinstance(tool, FunctionTool):
            if tool.name in binding.originals:
                raise GuardError(f"two function tools are named {tool.name!r}; the guard cannot tell their calls apart")
            binding.originals[tool.name] = tool
            out.append(_guarded_copy(tool, binding))
        elif getattr(tool, "name", None) in allowed:
            out.append(tool)
        else:
            refused.append(str(getattr(tool, "name", type(tool).__name__)))
    if refused:
        raise GuardError(
            f"carbguard cannot see inside tools {sorted(refused)} (not function tools); name them in "
            "unguarded=... to run them unguarded"
        )
    _check_against_policy(session.guard.policy, binding.originals.values())
    return out


def _check_against_policy(policy: Any, tools: Iterable[Any]) -> list[str]:
    """At start: the agent's function tools against the policy (unknown tools, argument names), each logged."""
    from guard.policy.tools import from_openai_tools

    schemas = [
        {"type": "function", "name": t.name, "description": t.description, "parameters": t.params_json_schema}
        for t in tools
    ]
    return check_tools(policy, from_openai_tools(schemas, "<agent tools>"), _report)
