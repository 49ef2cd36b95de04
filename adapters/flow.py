"""The one flow of a guarded tool call, written once for every adapter (the adapters' extension point).

An adapter calls :func:`guarded` (or its async twin :func:`aguarded`) once per proposed tool call,
``guarded(session, Call(tool, args, call_id), tools, run)``, and gets :class:`Ran` (the tool ran:
its output) or :class:`Refused` (it did not: the decision says why).  Inside: decide → run the
probes a ``probe`` verdict asks for (each decided, authorized, run and observed) and decide again →
the run rule → :meth:`~guard.session.Session.authorize` → ``run`` the authorized copy → observe it.

**The run rule** lives here alone (:func:`_clears`): a call runs only when its decision allows it
or the guard is in shadow mode.  Shadow mode decides and audits as enforcing does, runs no probe
and blocks nothing: a call that cannot be bound still runs with the arguments the agent gave.

**The one exception policy.** Any error before ``authorize`` returns the call's arguments — a
:class:`~guard.errors.BindingError` (no decision, changed arguments, a second run, not ``execute``)
or any other exception of the guard or the adapter — is a refusal, never a run:
:meth:`~guard.session.Session.refuse` audits an ``escalate``/``internal_error`` refusal naming the
error.  After ``authorize`` returned the tool runs; an exception it raises is observed as an
``error`` result and re-raised for the framework (a probe's is observed and settles nothing).

The steps are one I/O-free generator (the shape of httpx's ``auth_flow``) yielding "decide this
call" and "run this payload"; :func:`guarded` answers with ``session.decide`` and a blocking ``run``,
:func:`aguarded` with ``session.adecide`` and an awaitable one, so sync and async share every step.

A :class:`Tools` tells the flow how the framework runs a call (``payload``), reads a run's output
(``result``) and reports problems (``report``).  A framework that runs the authorized call itself
(the MCP proxy forwards it, AgentDojo's executor runs the rewritten turn) passes a ``run`` that
hands the payload over, and ``observe_calls=False``: it observes the result when it arrives.  The
OpenAI Agents SDK gates and invokes a call in two callbacks: the gate calls :func:`agate`, the
invoke :func:`aguarded` with ``cleared=True``.  Adapters may import this module and ``guard``'s
public surface, nothing else of the guard.

**Ending sessions.** :meth:`~guard.session.Session.close` writes the ``session_end`` audit entry
(docs/monitoring.md).  A custom loop uses ``with guard.session(id) as session:``, which closes it on
every way out.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar

from guard.decision import Decision, Mode, Verdict
from guard.errors import BindingError, InputError
from guard.runtime import Session

__all__ = [
    "Call",
    "Outcome",
    "Ran",
    "Refused",
    "Tools",
    "agate",
    "aguarded",
    "guarded",
    "observe",
]

log = logging.getLogger("guard.adapters")
P = TypeVar("P")  # the framework's request to run one call (a payload)
R = TypeVar("R")  # what running a payload returned
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """One proposed tool call as the agent wrote it (tool name, arguments, call id: raw, unchecked values)."""

    tool: Any
    args: Any
    call_id: Any


@dataclass(frozen=True, slots=True)
class Ran(Generic[R]):
    """Outcome: the call ran with its authorized arguments; ``output`` is what ``run`` returned.

    ``decision`` is the decision it ran under (None only when shadow mode ran a call that had none).
    """

    output: R
    decision: Decision | None


@dataclass(frozen=True, slots=True)
class Refused:
    """Outcome: the call did not run; ``decision`` says why (the model is told ``refusal_text``).

    ``gate`` is the decision that had let the call through when it was refused afterwards (it could
    not be bound); None when the decision itself refused it.
    """

    decision: Decision
    gate: Decision | None = None


Outcome: TypeAlias = Ran[R] | Refused


def _text(output: object) -> tuple[str, str]:
    return str(output), "ok"


@dataclass(frozen=True, slots=True)
class Tools(Generic[P, R]):
    """What an adapter tells the flow about its framework.

    ``payload(call, args)``: the request to run ``call`` with ``args`` (the authorized copy), or None
    when the agent has no such tool (a probe is skipped, a call refused); ``result(output)``: the text
    and status (``ok`` / ``error``) of a run's output.  ``observe_calls=False``: the adapter observes
    the results of the agent's own calls itself, later; the flow observes only its probes.
    """

    payload: Callable[[Call, dict[str, Any]], P | None]
    result: Callable[[R], tuple[str, str]] = _text
    report: Callable[[str], None] = field(default=log.warning)
    max_probe_rounds: int = 2
    observe_calls: bool = True


def guarded(
    session: Session,
    call: Call,
    tools: Tools[P, R],
    run: Callable[[P], R],
    *,
    decision: Decision | None = None,
    cleared: bool = False,
) -> Outcome[R]:
    """One guarded call: decide → probes → the run rule → authorize → ``run(payload)`` → observe.

    ``decision``: a decision already taken on exactly this call (it is not decided again; its
    probes still run).  ``cleared=True``: the call was let through before — a human approved its
    decision (:meth:`Session.review`), or the framework's gate ran :func:`agate` on it — so it goes
    straight to :meth:`Session.authorize`, which alone judges whether it runs.  ``run`` raising is
    observed as an ``error`` result and re-raised.
    """
    return _drive(_flow(session, call, tools, decision, cleared), session, run)


async def aguarded(
    session: Session,
    call: Call,
    tools: Tools[P, R],
    run: Callable[[P], Awaitable[R]],
    *,
    decision: Decision | None = None,
    cleared: bool = False,
) -> Outcome[R]:
    """The async twin of :func:`guarded`: ``session.adecide`` and an awaitable ``run``."""
    return await _adrive(_flow(session, call, tools, decision, cleared), session, run)


async def agate(
    session: Session,
    call: Call,
    tools: Tools[P, R],
    run: Callable[[P], Awaitable[R]],
    *,
    decision: Decision | None = None,
) -> Decision | Refused:
    """The first half of :func:`aguarded`, for a framework that gates and invokes a call in two callbacks.

    decide (unless ``decision`` is given) → probes (run with ``run``) → the run rule: the decision
    the call may run under, or :class:`Refused`.  The invoke then calls :func:`aguarded` with
    ``cleared=True``.
    """
    return await _adrive(_gate(session, call, tools, decision), session, run)


@dataclass(frozen=True, slots=True)
class _Decide:
    """Action: decide ``call``; answered with its :class:`Decision`."""

    call: Call


@dataclass(frozen=True, slots=True)
class _Run(Generic[P]):
    """Action: run ``payload``; answered with an :class:`_Output`."""

    payload: P


@dataclass(frozen=True, slots=True)
class _Output(Generic[R]):
    """The answer to a :class:`_Run`: what running its payload returned."""

    value: R


_Flow: TypeAlias = Generator[_Decide | _Run[P], Decision | _Output[R], T]


def _decide(call: Call) -> _Flow[P, R, Decision]:
    answer = yield _Decide(call)
    if not isinstance(answer, Decision):
        raise TypeError("a decide action was answered with a run's output")
    return answer


def _run(payload: P) -> _Flow[P, R, R]:
    answer = yield _Run(payload)
    if not isinstance(answer, _Output):
        raise TypeError("a run action was answered with a decision")
    return answer.value


def _clears(session: Session, decision: Decision) -> bool:
    """The run rule: a decided call runs only when its decision allows it or the guard is in shadow mode."""
    return decision.allowed or session.guard.mode is Mode.SHADOW


def _flow(
    session: Session, call: Call, tools: Tools[P, R], decision: Decision | None, cleared: bool
) -> _Flow[P, R, Outcome[R]]:
    """The whole flow of one call (:func:`guarded`)."""
    if not cleared:
        gate = yield from _gate(session, call, tools, decision)
        if isinstance(gate, Refused):
            return gate
        decision = gate
    return (yield from _execute(session, call, decision, tools))


def _gate(
    session: Session, call: Call, tools: Tools[P, R], decision: Decision | None
) -> _Flow[P, R, Decision | Refused]:
    """decide → probes → decide again → the run rule (:func:`agate`)."""
    decision = yield from _decided(session, call, tools, decision)
    return decision if _clears(session, decision) else Refused(decision)


def _decided(session: Session, call: Call, tools: Tools[P, R], decision: Decision | None) -> _Flow[P, R, Decision]:
    """decide (unless ``decision`` is given) → probes → decide again; an error on the way is an audited refusal."""
    try:
        if decision is None:
            decision = yield from _decide(call)
        return (yield from _settle(session, decision, call, tools))
    except Exception as exc:  # noqa: BLE001 - any error before authorize returned is a refusal
        return session.refuse(call.tool, call.args, call.call_id, exc)


def _settle(session: Session, decision: Decision, call: Call, tools: Tools[P, R]) -> _Flow[P, R, Decision]:
    """Run the probes a ``probe`` verdict asks for, observe them, and decide again (bounded).

    At most ``tools.max_probe_rounds`` rounds; a round in which no probe ran ends the loop and the
    last decision (still ``probe``: not executed) is returned.  Shadow mode runs no probe.
    """
    if session.guard.mode is Mode.SHADOW:
        return decision
    for _ in range(tools.max_probe_rounds):
        if decision.verdict is not Verdict.PROBE:
            return decision
        ran = 0
        for probe in decision.probes:
            probe_call = Call(probe.tool, dict(probe.args), probe.call_id)
            gate = yield from _decide(probe_call)
            if gate.allowed:
                outcome = yield from _execute(session, probe_call, gate, tools, probe=True)
                ran += isinstance(outcome, Ran)
        decision = yield from _decide(call)
        if ran == 0:
            break
    return decision


def _execute(
    session: Session, call: Call, decision: Decision | None, tools: Tools[P, R], *, probe: bool = False
) -> _Flow[P, R, Outcome[R]]:
    """authorize → run the authorized copy → observe its result.

    A tool that raises is observed as an ``error`` result; the exception is re-raised (a probe's is
    reported and its run settles nothing).
    """
    payload = _authorized(session, call, decision, tools)
    if isinstance(payload, Refused):
        return Refused(payload.decision, decision)
    observed = probe or tools.observe_calls
    try:
        output: R = yield from _run(payload)
    except Exception as exc:
        if observed:
            observe(session, call.call_id, f"{type(exc).__name__}: {exc}", "error", tools.report, call.tool)
        if not probe:
            raise
        tools.report(f"carbguard: probe {call.call_id} failed: {type(exc).__name__}: {exc}")
        return Refused(session.decision(call.call_id) or session.refuse(call.tool, call.args, call.call_id, exc))
    if observed:
        text, status = tools.result(output)
        observe(session, call.call_id, text, status, tools.report, call.tool)
    return Ran(output, decision)


def _authorized(session: Session, call: Call, decision: Decision | None, tools: Tools[P, R]) -> P | Refused:
    """The framework's payload for exactly the authorized copy of ``call``, or :class:`Refused`.

    The one exception policy (module docstring): any error is refused by :meth:`Session.refuse`;
    in shadow mode a call that cannot be bound runs as the agent gave it.
    """
    try:
        args = session.authorize(call.call_id, call.tool, call.args)
        payload = tools.payload(call, args)
    except BindingError as exc:
        tools.report(f"carbguard: {exc}")
        if session.guard.mode is Mode.SHADOW:  # shadow never blocks: the call runs as the agent gave it
            return _unbound(session, call, tools)
        return Refused(session.refuse(call.tool, call.args, call.call_id, exc))
    except Exception as exc:  # noqa: BLE001 - any error before authorize returned is a refusal
        return Refused(session.refuse(call.tool, call.args, call.call_id, exc))
    if payload is None:
        tools.report(f"carbguard: tool {call.tool!r} is not among the agent's tools; not run")
        missing = LookupError(f"tool {call.tool!r} is not among the agent's tools")
        return Refused(decision or session.refuse(call.tool, call.args, call.call_id, missing))
    return payload


def _unbound(session: Session, call: Call, tools: Tools[P, R]) -> P | Refused:
    """Shadow mode's payload for a call that could not be bound: the call as the agent gave it."""
    try:
        payload = tools.payload(call, call.args)
        if payload is None:
            raise LookupError(f"tool {call.tool!r} is not among the agent's tools")
    except Exception as exc:  # noqa: BLE001 - the one exception policy
        return Refused(session.refuse(call.tool, call.args, call.call_id, exc))
    return payload


def _drive(flow: _Flow[P, R, T], session: Session, run: Callable[[P], R]) -> T:
    """Run ``flow`` to its end: ``session.decide`` for a decide action, ``run(payload)`` for a run."""
    try:
        action = next(flow)
        while True:
            answer: Decision | _Output[R]
            try:
                if isinstance(action, _Decide):
                    answer = session.decide(action.call.tool, action.call.args, action.call.call_id)
                else:
                    answer = _Output(run(action.payload))
            except Exception as exc:  # noqa: BLE001 - handed to the flow, which refuses or re-raises
                action = flow.throw(exc)
            else:
                action = flow.send(answer)
    except StopIteration as stop:
        result: T = stop.value
        return result


async def _adrive(flow: _Flow[P, R, T], session: Session, run: Callable[[P], Awaitable[R]]) -> T:
    """The async twin of :func:`_drive`: ``session.adecide`` and an awaitable ``run``."""
    try:
        action = next(flow)
        while True:
            answer: Decision | _Output[R]
            try:
                if isinstance(action, _Decide):
                    answer = await session.adecide(action.call.tool, action.call.args, action.call.call_id)
                else:
                    answer = _Output(await run(action.payload))
            except Exception as exc:  # noqa: BLE001 - handed to the flow, which refuses or re-raises
                action = flow.throw(exc)
            else:
                action = flow.send(answer)
    except StopIteration as stop:
        result: T = stop.value
        return result


def observe(
    session: Session, call_id: Any, text: str, status: str, report: Callable[[str], None], tool: Any = None
) -> None:
    """Record a result; one the session cannot place (unknown or answered call id) is reported.

    The model still reads such a stray result, so its text is recorded as content (never as the
    result of a call): with the source kind the policy gives ``tool``, else ``untrusted_source``.
    """
    try:
        session.observe_result(call_id, text, status)
    except InputError as exc:
        report(f"carbguard: {exc} (recorded as content, answering no call)")
        name = tool if type(tool) is str and tool else None
        source = session.tool_source(name) if name else "untrusted_source"
        session.observe_content(text, source, f"stray_result:{name or 'unknown'}")
