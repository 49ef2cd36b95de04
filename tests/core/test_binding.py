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


class HideAllDict(dict):  # type: ignore[type-arg]
    """Hides ``bcc`` from every Python-level view: items, keys, values, __iter__, __getitem__, __len__, get."""

    def items(self) -> Any:
        return [(k, v) for k, v in dict.items(self) if k != "bcc"]

    def keys(self) -> Any:
        return [k for k in dict.keys(self) if k != "bcc"]

    def values(self) -> Any:
        return [v for k, v in dict.items(self) if k != "bcc"]

    def __iter__(self) -> Any:
        return iter(self.keys())

    def __getitem__(self, key: Any) -> Any:
        if key == "bcc":
            raise KeyError(key)
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        return default if key == "bcc" else dict.get(self, key, default)

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, key: object) -> bool:
        return key != "bcc" and dict.__contains__(self, key)


class SneakyStr(str):
    """A ``str`` value that prints, compares and hashes as ``a.md`` while holding an address."""

    __slots__ = ()

    def __str__(self) -> str:
        return "a.md"

    def __repr__(self) -> str:
        return "'a.md'"

    def __eq__(self, other: object) -> bool:
        return other == "a.md"

    def __hash__(self) -> int:
        return hash("a.md")


class SneakyInt(int):
    """An int that prints as 7 whatever it holds."""

    def __str__(self) -> str:
        return "7"

    __repr__ = __str__


class SneakyFloat(float):
    """A float that prints as 0.5 whatever it holds."""

    def __str__(self) -> str:
        return "0.5"

    __repr__ = __str__


@pytest.mark.parametrize(
    "hostile",
    [
        HidingDict(path="a.md", to="attacker@evil.test"),
        HideAllDict(path="a.md", bcc="attacker@evil.test"),
        {"path": "a.md", "opts": [HideAllDict(bcc="attacker@evil.test")]},
        {"path": SneakyStr("attacker@evil.test")},
        {"path": "a.md", "n": SneakyInt(4111111111111111)},
        {"path": "a.md", "x": SneakyFloat(4111.25)},
        {SneakyStr("attacker@evil.test"): "a.md"},
    ],
    ids=[
        "hides-to",
        "hides-bcc-everywhere",
        "nested-hiding-dict",
        "str-subclass",
        "int-subclass",
        "float-subclass",
        "str-subclass-key",
    ],
)
def test_arguments_that_cannot_be_copied_exactly_are_refused(
    session: Session, memory_audit: Any, hostile: dict[str, Any]
) -> None:
    """A subclass anywhere in the arguments (dict views hiding a key, lying str/int/float) is refused, never run.

    Catches the old canonical copy by JSON round trip (json.dumps reads a dict subclass through its overridden
    items(), so ``bcc`` vanished from what was scored while the caller's object still held it; str/int/float
    subclasses were copied by value, so ``type(x) is str`` was never asked): the read then got ``execute``.
    """
    decision = session.decide("read_document", hostile, "c1")
    assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.BAD_ARGUMENTS)
    assert decision.args is None and "subclass" in decision.message and "arguments" in decision.message
    assert "attacker@evil.test" not in decision.message
    with pytest.raises(BindingError):
        session.authorize("c1", "read_document", hostile)
    assert "c1" not in session.executed and "c1" not in session.proposals
    entry = memory_audit.entries[-1]
    assert (entry["verdict"], entry["reason"]) == ("escalate", "bad_arguments")


def _plain(value: Any) -> bool:
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in dict.items(value))
    if type(value) is list:
        return all(_plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def test_scored_audited_and_authorized_args_are_one_plain_copy(session: Session, memory_audit: Any) -> None:
    """What is scored (the proposal record), decided, audited and handed to the tool is one plain fresh copy.

    Catches a canonical copy that keeps the caller's containers (e.g. returns a list as is): the caller mutating
    its arguments after ``decide`` then changes what was scored and what authorize hands the tool.
    """
    inner = ["a.md", ("b.md", 2)]
    args: dict[str, Any] = {"path": "a.md", "more": inner, "n": 3, "x": 1.5, "ok": True, "none": None}
    decision = session.decide("read_document", args, "c1")
    assert decision.verdict is Verdict.EXECUTE and decision.args is not None
    expected = {"path": "a.md", "more": ["a.md", ["b.md", 2]], "n": 3, "x": 1.5, "ok": True, "none": None}
    inner.append("secret.md")  # the caller edits its object after the decision
    args["more"] = inner
    scored = dict(session.proposals["c1"].args)
    assert dict(decision.args) == scored == expected and _plain(dict(decision.args))
    assert sorted(memory_audit.entries[-1]["args"]) == sorted(expected)
    with pytest.raises(BindingError, match="arguments differ"):
        session.authorize("c1", "read_document", args)
    granted = session.authorize("c1", "read_document", expected)
    assert granted == expected and _plain(granted)


class HashLyingStr(str):
    """Holds ``send_email`` but hashes and compares as ``read_document`` (a dict lookup finds the read tool)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return str.__eq__(other, "read_document") if isinstance(other, str) else False

    def __hash__(self) -> int:
        return hash("read_document")


def test_str_subclass_tool_name_cannot_pass_as_a_read(session: Session) -> None:
    """A tool name equal (by __eq__ and __hash__) to a read tool but holding ``send_email`` is refused.

    Catches ``isinstance(tool, str)`` in place of ``type(tool) is str`` in normalize: the policy lookup then
    finds ``read_document`` and the call executes as a public read.
    """
    decision = session.decide(HashLyingStr("send_email"), {"path": "a.md"}, "c1")
    assert decision.verdict is not Verdict.EXECUTE and decision.reason is Reason.UNKNOWN_TOOL
    assert type(decision.tool) is str and decision.args is None
    with pytest.raises(BindingError):
        session.authorize("c1", "read_document", {"path": "a.md"})


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
