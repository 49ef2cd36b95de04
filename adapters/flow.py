"""The one flow of a guarded tool call, written once for every adapter (the adapters' extension point).

decide → run the probes a ``probe`` verdict asks for (each itself decided, authorized, run and
observed) and decide again → :meth:`~guard.session.Session.authorize` → run the authorized copy →
observe its result.  The flow is an I/O-free generator (the shape of httpx's ``auth_flow``): it
yields :class:`Decide` and :class:`Run` actions and a driver answers them — :func:`drive` with
``session.decide`` and a blocking ``run``, :func:`adrive` with ``session.adecide`` and an awaitable
``run``.  Sync and async adapters therefore share every step and every failure rule.

**The one exception policy.** Any error before ``authorize`` returns the arguments of the call —
a :class:`~guard.errors.BindingError` (no decision, changed arguments, a second run, not
``execute``) or any other exception of the guard or the adapter — is a refusal, never a run:
:meth:`~guard.session.Session.refuse` audits an ``escalate``/``internal_error`` refusal naming the
error, and the model is told it.  After
``authorize`` returned, the tool runs; an exception the tool raises is observed as an ``error``
result and re-raised for the framework to handle (a probe's is observed and settles nothing).

Shadow mode (``guard.mode == "shadow"``) decides and audits exactly as enforcing does, runs no probe
and blocks nothing: a call that cannot be bound still runs with the arguments the agent gave.

An adapter supplies a :class:`Tools`: how its framework runs a call with given arguments
(``payload``), how a run's output reads as text (``result``), where warnings go (``report``).
Adapters may import this module and ``guard``'s public surface, nothing else of the guard.

**Ending sessions.** A session ends with :meth:`~guard.session.Session.close` (its ``session_end``
audit entry, which the monitor and review read: docs/monitoring.md).  A custom loop uses the
session as a context manager (``with guard.session(id) as session:``), which closes it on every way
out — normal, an exception, ``KeyboardInterrupt``; adapters that cannot see the end of a run close
it when the run leaves through an exception (:func:`closed_on_error`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from guard.decision import Decision, Mode, Verdict
from guard.errors import BindingError, InputError
from guard.policy import Policy
from guard.policy import tools as policy_tools
from guard.policy.tools import ToolSchema
from guard.runtime import Session

__all__ = [
    "Action",
    "Call",
    "Decide",
    "Flow",
    "Ran",
    "Refused",
    "Run",
    "Tools",
    "adrive",
    "authorized",
    "check_tools",
    "closed_on_error",
    "decided",
    "drive",
    "execute",
    "guarded_call",
    "observe",
    "settle",
]

log = logging.getLogger("guard.adapters")
T = TypeVar("T")


@contextlib.contextmanager
def closed_on_error(session: Session | None) -> Iterator[None]:
    """Close ``session`` (its ``session_end`` entry) when the block leaves through any exception, then re-raise.

    For the adapters' ways out that skip the framework's end-of-run hook: a tool or model error, an
    interrupt (``KeyboardInterrupt``, cancellation, a framework's pause for human review).  A
    session closed here that decides again continues as a new segment (docs/audit.md).
    """
    try:
        yield
    except BaseException:
        if session is not None:
            session.close()  # never raises
        raise


@dataclass(frozen=True, slots=True)
class Call:
    """One proposed tool call as the agent wrote it (tool name, arguments, call id)."""

    tool: Any
    args: Any
    call_id: Any


@dataclass(frozen=True, slots=True)
class Decide:
    """Action: decide ``call`` (the driver answers with ``session.decide`` / ``adecide``)."""

    call: Call


@dataclass(frozen=True, slots=True)
class Run:
    """Action: run ``payload`` (the framework's request for the authorized copy); answer with its output."""

    payload: Any


@dataclass(frozen=True, slots=True)
class Ran:
    """Outcome: the call ran with its authorized arguments; ``output`` is what the framework returned."""

    output: Any


@dataclass(frozen=True, slots=True)
class Refused:
    """Outcome: the call did not run; ``decision`` says why (the model is told ``refusal_text``)."""

    decision: Decision


Action: TypeAlias = Decide | Run
Flow: TypeAlias = Generator[Action, Any, T]


def _no_tool(call: Call, args: dict[str, Any]) -> Any:
    return None


def _text(output: Any) -> tuple[str, str]:
    return str(output), "ok"


@dataclass(frozen=True, slots=True)
class Tools:
    """What an adapter tells the flow about its framework.

    ``payload(call, args)`` is the framework's request to run ``call`` with ``args`` (the authorized
    copy), or None when the agent has no such tool (a probe is then skipped, a call refused);
    ``result(output)`` is the text and status (``ok`` / ``error``) of what a run returned.
    ``observe_calls=False``: the framework feeds the results of the agent's own calls back through
    its message history (LangChain), so the flow observes only the probes it ran.
    """

    payload: Callable[[Call, dict[str, Any]], Any] = _no_tool
    result: Callable[[Any], tuple[str, str]] = _text
    report: Callable[[str], None] = field(default=log.warning)
    max_probe_rounds: int = 2
    observe_calls: bool = True


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


def check_tools(policy: Policy, schemas: Iterable[ToolSchema], report: Callable[[str], None]) -> list[str]:
    """At start: the agent's tools against the policy (unknown tools, argument names), each problem reported.

    Calls to tools the policy does not know are refused when they come (the policy's ``on_unknown``);
    this makes the mismatch visible before the first call.
    """
    problems = policy_tools.check_tools(policy, schemas, policy_extra=False)
    for problem in problems:
        report(f"carbguard: policy {policy.name!r} vs agent tools: {problem}")
    return problems


def settle(session: Session, decision: Decision, call: Call, tools: Tools) -> Flow[Decision]:
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
            gate = yield Decide(probe_call)
            if gate.allowed:
                outcome = yield from execute(session, probe_call, gate, tools, probe=True)
                ran += isinstance(outcome, Ran)
        decision = yield Decide(call)
        if ran == 0:
            break
    return decision


def authorized(session: Session, call: Call, decision: Decision | None, tools: Tools) -> Any:
    """The framework's payload for exactly the authorized copy of ``call``, or :class:`Refused`.

    The one exception policy (module docstring): any error is refused by :meth:`Session.refuse`;
    in shadow mode a call that cannot be bound runs as the agent gave it.
    """
    shadow = session.guard.mode is Mode.SHADOW
    try:
        args = session.authorize(call.call_id, call.tool, call.args)
        payload = tools.payload(call, args)
    except BindingError as exc:
        tools.report(f"carbguard: {exc}")
        if shadow:  # shadow never blocks: the call runs as the agent gave it
            return _unbound(session, call, tools)
        return Refused(session.refuse(call.tool, call.args, call.call_id, exc))
    except Exception as exc:  # noqa: BLE001 - any error before authorize returned is a refusal
        return Refused(session.refuse(call.tool, call.args, call.call_id, exc))
    if payload is None:
        tools.report(f"carbguard: tool {call.tool!r} is not among the agent's tools; not run")
        missing = LookupError(f"tool {call.tool!r} is not among the agent's tools")
        return Refused(decision or session.refuse(call.tool, call.args, call.call_id, missing))
    return payload


def _unbound(session: Session, call: Call, tools: Tools) -> Any:
    """Shadow mode's payload for a call that could not be bound: the call as the agent gave it."""
    try:
        payload = tools.payload(call, call.args)
        if payload is None:
            raise LookupError(f"tool {call.tool!r} is not among the agent's tools")
    except Exception as exc:  # noqa: BLE001 - the one exception policy
        return Refused(session.refuse(call.tool, call.args, call.call_id, exc))
    return payload


def execute(
    session: Session, call: Call, decision: Decision | None, tools: Tools, *, probe: bool = False
) -> Flow[Ran | Refused]:
    """authorize → run the authorized copy → observe its result.

    A tool that raises is observed as an ``error`` result; the exception is re-raised (a probe's is
    reported and its run settles nothing).
    """
    payload = authorized(session, call, decision, tools)
    if isinstance(payload, Refused):
        return payload
    observed = probe or tools.observe_calls
    try:
        output = yield Run(payload)
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
    return Ran(output)


def decided(session: Session, call: Call, tools: Tools, decision: Decision | None = None) -> Flow[Decision]:
    """decide (unless ``decision`` is given) → probes → decide again; an error on the way is an audited refusal."""
    try:
        if decision is None:
            decision = yield Decide(call)
        return (yield from settle(session, decision, call, tools))
    except Exception as exc:  # noqa: BLE001 - any error before authorize returned is a refusal
        return session.refuse(call.tool, call.args, call.call_id, exc)


def guarded_call(session: Session, call: Call, tools: Tools, decision: Decision | None = None) -> Flow[Ran | Refused]:
    """The whole flow of one call: :func:`decided` → authorize → run the authorized copy → observe."""
    decision = yield from decided(session, call, tools, decision)
    if not decision.allowed and session.guard.mode is not Mode.SHADOW:
        return Refused(decision)
    return (yield from execute(session, call, decision, tools))


def drive(flow: Flow[T], session: Session, run: Callable[[Any], Any]) -> T:
    """Run ``flow`` to its end: ``session.decide`` for :class:`Decide`, ``run(payload)`` for :class:`Run`."""
    try:
        action = next(flow)
        while True:
            try:
                value = (
                    session.decide(action.call.tool, action.call.args, action.call.call_id)
                    if isinstance(action, Decide)
                    else run(action.payload)
                )
            except Exception as exc:  # noqa: BLE001 - handed to the flow, which refuses or re-raises
                action = flow.throw(exc)
            else:
                action = flow.send(value)
    except StopIteration as stop:
        result: T = stop.value
        return result


async def adrive(flow: Flow[T], session: Session, run: Callable[[Any], Awaitable[Any]]) -> T:
    """The async twin of :func:`drive`: ``session.adecide`` and an awaitable ``run``."""
    try:
        action = next(flow)
        while True:
            try:
                if isinstance(action, Decide):
                    value = await session.adecide(action.call.tool, action.call.args, action.call.call_id)
                else:
                    value = await run(action.payload)
            except Exception as exc:  # noqa: BLE001 - handed to the flow, which refuses or re-raises
                action = flow.throw(exc)
            else:
                action = flow.send(value)
    except StopIteration as stop:
        result: T = stop.value
        return result
