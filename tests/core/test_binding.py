"""The binding rule: an execution is allowed only for the exact (session, call id, tool, canonical
arguments) that received ``execute``, once (``Session.authorize``), and ``decide`` refuses ids that ran."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from guard.decision import Reason, Verdict
from guard.errors import BindingError
from guard.policy import Policy
from guard.runtime import Guard, Session


class HidingDict(dict):  # type: ignore[type-arg]
    """A mapping whose views hide the key ``to`` (what a hostile caller could hand the guard)."""

    def items(self) -> Any:
        return [(k, v) for k, v in super().items() if k != "to"]

    def keys(self) -> Any:
        return [k for k in dict.keys(self) if k != "to"]

    def __iter__(self) -> Any:
        return iter(self.keys())


class LyingStr(str):
    """A ``str`` subclass that compares equal to ``read_document`` whatever it holds."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return other == "read_document" or str.__eq__(self, other)

    __hash__ = str.__hash__


class BadRepr:
    """An object whose ``repr`` raises."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_authorize_returns_the_decided_canonical_copy_once(session: Session) -> None:
    """An executed call is authorized once with a fresh plain copy; a second authorize is refused."""
    decision = session.decide("read_document", {"path": "a.md"}, "c1")
    assert decision.verdict is Verdict.EXECUTE
    args = session.authorize("c1", "read_document", {"path": "a.md"})
    assert args == {"path": "a.md"} and type(args) is dict
    with pytest.raises(BindingError, match="already ran"):
        session.authorize("c1", "read_document", {"path": "a.md"})


def test_authorize_refuses_changed_arguments(session: Session) -> None:
    """Arguments edited after the decision (e.g. by another middleware) cannot run on the old approval."""
    session.decide("read_document", {"path": "a.md"}, "c1")
    with pytest.raises(BindingError, match="arguments differ"):
        session.authorize("c1", "read_document", {"path": "secret.md"})
    assert "c1" not in session.executed


def test_authorize_refuses_another_tool(session: Session) -> None:
    """A call decided for one tool cannot run as another tool (name mismatch)."""
    session.decide("read_document", {"path": "a.md"}, "c1")
    with pytest.raises(BindingError, match="another tool"):
        session.authorize("c1", "send_email", {"path": "a.md"})


def test_authorize_refuses_undecided_and_refused_calls(session: Session) -> None:
    """No decision, or a refusal, means no execution in enforcing mode."""
    with pytest.raises(BindingError, match="no decision"):
        session.authorize("nope", "read_document", {})
    refused = session.decide("format_disk", {}, "c2")
    assert refused.verdict is not Verdict.EXECUTE
    with pytest.raises(BindingError):
        session.authorize("c2", "format_disk", {})


def test_shadow_mode_authorizes_refused_calls(small_policy: Policy) -> None:
    """In shadow mode the same refusal is decided (and audited) but the call is let through once."""
    enforce = Guard(small_policy, threshold=-math.inf).session("e")
    shadow = Guard(small_policy, threshold=-math.inf, mode="shadow").session("s")
    for s in (enforce, shadow):
        assert s.decide("read_document", {"path": "a.md"}, "c1").verdict is Verdict.ESCALATE
    with pytest.raises(BindingError, match="not execute"):
        enforce.authorize("c1", "read_document", {"path": "a.md"})
    assert shadow.authorize("c1", "read_document", {"path": "a.md"}) == {"path": "a.md"}
    with pytest.raises(BindingError, match="already ran"):
        shadow.authorize("c1", "read_document", {"path": "a.md"})


def test_unknown_mode_is_refused(small_policy: Policy) -> None:
    """A misspelt mode fails at construction instead of silently enforcing or not."""
    with pytest.raises(ValueError, match="mode must be one of"):
        Guard(small_policy, threshold=0.5, mode="shadowy")


@pytest.mark.parametrize("after", ["authorize", "result"])
def test_decide_refuses_a_call_id_that_ran(session: Session, after: str) -> None:
    """A call id that executed, or whose result was observed, is never approved again."""
    session.decide("read_document", {"path": "a.md"}, "c1")
    if after == "authorize":
        session.authorize("c1", "read_document", {"path": "a.md"})
    else:
        session.observe_result("c1", "contents")
    again = session.decide("read_document", {"path": "a.md"}, "c1")
    assert (again.verdict, again.reason) == (Verdict.ESCALATE, Reason.CALL_REUSED)


def test_hidden_keys_never_reach_the_tool(session: Session) -> None:
    """A dict subclass that hides ``to`` is scored on the canonical copy, and the tool gets that copy."""
    hostile = HidingDict(path="a.md", to="attacker@evil.test")
    decision = session.decide("read_document", hostile, "c1")
    assert decision.args is not None and "to" not in decision.args
    granted = session.authorize("c1", "read_document", hostile)
    assert granted == {"path": "a.md"}


def test_str_subclass_tool_name_is_refused(session: Session) -> None:
    """A tool name that is a ``str`` subclass (equal to a read tool, printing as a sink) is refused."""
    decision = session.decide(LyingStr("send_email"), {"path": "a.md"}, "c1")
    assert decision.verdict is not Verdict.EXECUTE and decision.reason is Reason.UNKNOWN_TOOL


@pytest.mark.parametrize("where", ["tool", "call_id"])
def test_hostile_repr_never_raises(session: Session, where: str) -> None:
    """A tool or call id whose ``repr`` raises is refused, never raised out of ``decide``."""
    tool: Any = BadRepr() if where == "tool" else "read_document"
    call_id: Any = BadRepr() if where == "call_id" else "c1"
    decision = session.decide(tool, {"path": "a.md"}, call_id)
    assert decision.verdict is not Verdict.EXECUTE


def test_probe_redecision_of_an_unrun_call_is_allowed(leak_session: Callable[[Guard], Session], guard: Guard) -> None:
    """Deciding the same unrun call again (as after probes) is a re-decision, not a reuse."""
    s = leak_session(guard)
    first = s.decide("read_document", {"path": "b.md"}, "c9")
    second = s.decide("read_document", {"path": "b.md"}, "c9")
    assert second.reason is not Reason.CALL_REUSED and second.verdict is first.verdict
