"""The AgentDojo pipeline element that decides every tool call (see :mod:`guard.adapters.agentdojo`)."""

from __future__ import annotations

import copy
import logging
from ast import literal_eval
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from guard.adapters._agentdojo_compat import EMPTY_ENV, Mode, content_text, refusal_text, require, result_text
from guard.adapters._lifecycle import check_tools, closed_on_error
from guard.adapters._shadow import guard_in_mode
from guard.adapters.flow import Call, Ran, Tools, guarded
from guard.decision import Decision, Verdict
from guard.decision import Mode as GuardMode
from guard.errors import InputError, PolicyError
from guard.policy.tools import from_openai_tools
from guard.runtime import Guard, Session

log = logging.getLogger("guard.adapters.agentdojo")

try:
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.agent_pipeline.errors import AbortAgentError
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutor, is_string_list
    from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
    from agentdojo.types import text_content_block_from_string
except ImportError:  # pragma: no cover - exercised only without the extra; require reports it
    BasePipelineElement = FunctionCall = object  # type: ignore[assignment,misc,unused-ignore]


@dataclass
class GuardedRun:
    """One agent run seen by a :class:`GuardElement`: its session and what happened online."""

    session: Session
    first: Any
    position: int = 0
    used: set[str] = field(default_factory=set)
    pending: list[str] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    first_probe: int | None = None
    aborted: bool = False
    skipped: list[str] = field(default_factory=list)
    messages: list[Any] | None = None

    @property
    def refused(self) -> list[Decision]:
        """The decisions that did not let their call run."""
        return [d for d in self.decisions if not d.allowed]


class GuardElement(BasePipelineElement):  # type: ignore[misc]
    """Decides every tool call before ``ToolsExecutor`` runs it (see the module docstring).

    Every call goes through the one flow (:func:`guard.adapters.flow.guarded`): decide → probes (run
    in the suite's runtime) → :meth:`Session.authorize` → handed to the executor, which runs the turn
    with the authorized canonical arguments (the element rewrites the turn's calls to those copies).

    Args:
        guard: the configured guard.
        mode: ``"abort"`` (stop the agent at the first refusal; ``"enforce"`` is the same),
            ``"deny"`` (refuse and go on) or ``"shadow"`` (decide and audit every call with a copy
            of the guard in shadow mode; never refuse, never probe, change nothing the agent sees).
        session_id: id of the first run's session (later runs get ``#2``, ``#3``, ...).
        executor: runs the allowed calls of a turn that also has refused ones; pass the same
            ``ToolsExecutor`` (output formatter) as the pipeline uses.
        max_probe_rounds: probe → decide-again rounds before a call is refused.
        keep_runs: how many past runs to keep in :attr:`runs`.
    """

    name = "carbguard"

    def __init__(
        self,
        guard: Guard,
        mode: Mode = "abort",
        *,
        session_id: str = "agentdojo",
        executor: ToolsExecutor | None = None,
        max_probe_rounds: int = 2,
        keep_runs: int = 64,
    ) -> None:
        require()
        if mode not in ("abort", "deny", "enforce", "shadow"):
            raise PolicyError(f"mode must be 'abort', 'deny', 'enforce' or 'shadow', got {mode!r}")
        self.guard = guard_in_mode(guard, "shadow" if mode == "shadow" else None)
        if self.guard.mode is GuardMode.SHADOW and mode != "shadow":
            raise PolicyError(f"mode {mode!r} needs an enforcing guard; this guard is in shadow mode")
        self.mode: Mode = "abort" if mode == "enforce" else mode
        self.session_id = session_id
        self.executor = executor or ToolsExecutor()
        self.max_probe_rounds = max_probe_rounds
        self.runs: deque[GuardedRun] = deque(maxlen=keep_runs)
        self._count = 0
        self._checked: set[frozenset[str]] = set()

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Any = EMPTY_ENV,
        messages: Sequence[Any] = (),
        extra_args: dict[str, Any] = {},  # noqa: B006 - AgentDojo's signature; never mutated
    ) -> tuple[str, FunctionsRuntime, Any, Sequence[Any], dict[str, Any]]:
        """Feed new messages, decide the newest turn's calls, and refuse what the guard refuses."""
        if not messages:
            return query, runtime, env, messages, extra_args
        run = self._run_for(messages)
        with closed_on_error(run.session):  # an abort, an error, an interrupt: the run's session_end is written
            return self._turn(run, query, runtime, env, messages, extra_args)

    def close(self) -> None:
        """End every kept run's session (its ``session_end`` entry; idempotent).  Call it when the pipeline is done:
        the element never sees a run's final answer (the tools loop stops before it), only the next run's start."""
        for run in self.runs:
            run.session.close()

    def _turn(
        self,
        run: GuardedRun,
        query: str,
        runtime: FunctionsRuntime,
        env: Any,
        messages: Sequence[Any],
        extra_args: dict[str, Any],
    ) -> tuple[str, FunctionsRuntime, Any, Sequence[Any], dict[str, Any]]:
        """:meth:`query` for ``run``."""
        self._check(runtime)
        last = messages[-1]
        turn = last.get("role") == "assistant" and bool(last.get("tool_calls"))
        end = len(messages) - 1 if turn else len(messages)
        self._observe(run, messages, end, query)
        if not turn or run.position > end:
            return query, runtime, env, messages, extra_args
        calls = self._resolve(run, end, last["tool_calls"])
        run.position = end + 1
        decided = self._decide_turn(run, calls, runtime, env)
        if self.mode == "shadow":
            return query, runtime, env, messages, extra_args
        if all(d.allowed for _, d in decided):
            return query, runtime, env, [*messages[:-1], {**last, "tool_calls": [c for c, _ in decided]}], extra_args
        env, out = self._answer_refusals(query, runtime, env, messages, decided, extra_args)
        if self.mode == "abort":
            refusal = next(d for _, d in decided if not d.allowed)
            run.aborted = True
            error = AbortAgentError(f"carbguard stopped the agent. {refusal_text(refusal)}", out, env)
            run.messages = list(error.messages)
            raise error
        return query, runtime, env, out, extra_args

    def _check(self, runtime: FunctionsRuntime) -> None:
        """At the first turn with a suite's tools: its functions against the policy (once per set of names)."""
        names = frozenset(runtime.functions)
        if names in self._checked:
            return
        self._checked.add(names)
        schemas = [
            {"type": "function", "name": f.name, "description": f.description, "parameters": _parameters(f)}
            for f in runtime.functions.values()
        ]
        check_tools(self.guard.policy, from_openai_tools(schemas, "<AgentDojo suite>"), log.warning)

    def _decide_turn(
        self, run: GuardedRun, calls: list[Any], runtime: FunctionsRuntime, env: Any
    ) -> list[tuple[Any, Decision]]:
        """Each call of the turn in order through the flow (``abort`` stops at the first refusal).

        A call the flow lets go comes back as its authorized copy; one that could not be bound is
        refused (its refusal recorded after the turn's decisions).
        """
        decided, unbound = [], []
        for call in calls:
            handed, decision, refusal = self._guard_call(run, call, runtime, env)
            run.decisions.append(decision)
            if refusal is not None:
                unbound.append(refusal)
            decided.append((handed, refusal or decision))
            if not decision.allowed and self.mode == "abort":
                break
        run.decisions.extend(unbound)
        return decided

    def _answer_refusals(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Any,
        messages: Sequence[Any],
        decided: list[tuple[Any, Decision]],
        extra_args: dict[str, Any],
    ) -> tuple[Any, list[Any]]:
        """Keep only the allowed calls in the turn, run them, and answer every decided call in order."""
        allowed = [c for c, d in decided if d.allowed]
        head = [*messages[:-1], {**messages[-1], "tool_calls": allowed}]
        results: dict[Any, Any] = {}
        if allowed:
            _, _, env, executed, _ = self.executor.query(query, runtime, env, head, extra_args)
            results = {m.get("tool_call_id"): m for m in executed[len(head) :]}
        return env, [*head, *(results.get(c.id) or self._refusal(c, d) for c, d in decided)]

    # ------------------------------------------------------------------ runs and the message feed

    def _run_for(self, messages: Sequence[Any]) -> GuardedRun:
        run = self.runs[-1] if self.runs else None
        if run is None or run.first is not messages[0] or len(messages) < run.position:
            if run is not None:
                run.session.close()  # a new run starts: the previous one has ended
            self._count += 1
            sid = self.session_id if self._count == 1 else f"{self.session_id}#{self._count}"
            run = GuardedRun(session=self.guard.session(sid), first=messages[0])
            self.runs.append(run)
        return run

    def _observe(self, run: GuardedRun, messages: Sequence[Any], end: int, query: str) -> None:
        """Feed ``messages[run.position:end]``.

        The user channel (docs/security.md#the-user-channel): a ``user`` message is a user turn only
        when its text is the query the pipeline received (the task's prompt, which ``InitQuery``
        adds); any other ``user``-role message (put there by another element, a tool output
        formatter, an attack) is observed as untrusted content.
        """
        session = run.session
        for position in range(run.position, end):
            message = messages[position]
            role = message.get("role")
            if role == "user":
                text = content_text(message.get("content"))
                if isinstance(query, str) and text.strip() == query.strip():
                    session.observe_user(text)
                elif text:
                    session.observe_content(text, "untrusted_source", "agentdojo:user_role_not_the_query")
            elif role == "assistant" and message.get("tool_calls"):
                # a turn this element did not see as newest (e.g. placed outside the loop): decide late
                for call in self._resolve(run, position, message["tool_calls"]):
                    run.decisions.append(session.decide(call.function, dict(call.args), call.id))
            elif role == "assistant":
                session.observe_final(content_text(message.get("content")))
            elif role == "tool":
                self._observe_tool(run, message)
        run.position = max(run.position, end)

    def _observe_tool(self, run: GuardedRun, message: Mapping[str, Any]) -> None:
        call_id = message.get("tool_call_id")
        if call_id in run.pending:
            run.pending.remove(call_id)
        elif not call_id and run.pending:
            call_id = run.pending.pop(0)
        else:
            run.skipped.append(f"tool result for unknown call id {call_id!r}")
            return
        text, status = result_text(message)
        try:
            run.session.observe_result(call_id, text, status)
        except InputError as exc:  # a call refused before it entered the graph (unknown tool, bad args)
            run.skipped.append(str(exc))

    def _resolve(self, run: GuardedRun, position: int, tool_calls: Sequence[Any]) -> list[Any]:
        """Copies of the calls with unique ids and ``ToolsExecutor``'s argument parsing applied."""
        out = []
        for j, raw in enumerate(tool_calls):
            call = raw if isinstance(raw, FunctionCall) else FunctionCall.model_validate(raw)
            original = call.id if isinstance(call.id, str) and call.id else None
            call_id = original if original is not None and original not in run.used else f"t{position}c{j}"
            while call_id in run.used:
                call_id += "_"
            run.used.add(call_id)
            run.pending.append(call_id)
            args = {k: literal_eval(v) if isinstance(v, str) and is_string_list(v) else v for k, v in call.args.items()}
            out.append(call.model_copy(update={"id": call_id, "args": copy.deepcopy(args)}))
        return out

    def _guard_call(
        self, run: GuardedRun, call: Any, runtime: FunctionsRuntime, env: Any
    ) -> tuple[Any, Decision, Decision | None]:
        """One call through the flow: (the call to hand over, its decision, the refusal when it could not be bound)."""
        session = run.session
        main = Call(call.function, dict(call.args), call.id)
        decision = session.decide(main.tool, main.args, main.call_id)
        if decision.verdict is Verdict.PROBE and run.first_probe is None and self.mode != "shadow":
            run.first_probe = len(run.decisions)

        def payload(target: Call, args: dict[str, Any]) -> Any:
            if target == main:  # the turn's call carrying the authorized arguments
                return call.model_copy(update={"args": args})
            return (target.tool, args) if target.tool in runtime.functions else None

        def execute(payload: Any) -> Any:
            if not isinstance(payload, tuple):  # the turn's call: handed to the executor, which runs it
                return payload
            value, error = runtime.run_function(env, *payload)
            return {"content": self.executor.output_formatter(value), "error": error}

        tools = Tools(payload, result_text, run.skipped.append, self.max_probe_rounds, observe_calls=False)
        outcome = guarded(session, main, tools, execute, decision=decision)
        if isinstance(outcome, Ran):
            return outcome.output, outcome.decision or decision, None
        if outcome.gate is None:  # the decision refused it
            return call, outcome.decision, None
        return call, outcome.gate, outcome.decision

    @staticmethod
    def _refusal(call: Any, decision: Decision) -> dict[str, Any]:
        return {
            "role": "tool",
            "content": [text_content_block_from_string("")],
            "tool_call_id": call.id,
            "tool_call": call,
            "error": refusal_text(decision),
        }


def _parameters(function: Any) -> Any:
    """The JSON schema of an AgentDojo function's parameters (a pydantic model), or ``{}``."""
    schema = getattr(function.parameters, "model_json_schema", None)
    return schema() if callable(schema) else {}
