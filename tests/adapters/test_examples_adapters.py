"""The integration examples run offline and do what their docstrings say."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> dict[str, Any]:
    """The example's module globals (its ``__main__`` block does not run)."""
    return runpy.run_path(str(EXAMPLES / name), run_name=f"example_{name[:-3]}")


def test_custom_loop_refuses_the_leak_and_the_unparseable_call(capsys: pytest.CaptureFixture[str]) -> None:
    """custom_loop.py: benign calls run; the steered send and the truncated-JSON call are refused."""
    messages = load("custom_loop.py")["main"]()
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert results["call_1"].startswith("Customer: Lena Novak")
    assert results["call_3"].startswith("draft saved")
    assert "risk_budget" in results["call_4"] and not results["call_4"].startswith("sent")
    assert "bad_arguments" in results["call_5"]
    assert "escalate" in capsys.readouterr().out


def test_langchain_agent_blocks_the_send_and_lets_benign_calls_through(capsys: pytest.CaptureFixture[str]) -> None:
    """langchain_agent.py: create_agent + GuardMiddleware refuses only the exfiltrating send_email."""
    pytest.importorskip("langchain")
    messages = load("langchain_agent.py")["main"]()
    tool_messages = [(m.name, m.status) for m in messages if m.type == "tool"]
    assert tool_messages == [
        ("read_record", "success"),
        ("read_inbox", "success"),
        ("save_draft", "success"),
        ("send_email", "error"),
    ]
    assert "carbguard did not run `send_email`" in capsys.readouterr().out


def test_custom_loop_shadow_runs_everything_and_decides_as_enforcing(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """custom_loop.py in shadow mode: the leak runs as without a guard; every verdict equals the enforcing run's,
    and the printout says which refused calls ran anyway (catches a shadow printout identical to enforce mode's,
    where nothing shows that the refused send was sent, and a decided call reported as "no decision for this
    call" or as an unknown call id when shadow mode runs it unbound)."""
    module = load("custom_loop.py")
    enforced = module["main"]("enforce")
    enforced_out = capsys.readouterr().out.splitlines()
    shadowed = module["main"]("shadow")
    shadow_out = capsys.readouterr().out.splitlines()
    reported = caplog.text  # the flow reports through logging
    # the unreadable call was decided (bad_arguments): never reported as undecided or unknown
    assert "no decision for this call" not in reported and "unknown call id" not in reported
    assert "before its arguments could be read" in reported
    results = {m["tool_call_id"]: m["content"] for m in shadowed if m["role"] == "tool"}
    assert results["call_4"] == "sent to compliance@audit-desk.net"
    assert enforced_out[0] == "mode: enforce" and shadow_out[0].startswith("mode: shadow (")
    # the printed tools, verdicts, reasons and scores of every call are the same in both modes
    assert [line.split()[:4] for line in enforced_out[1:]] == [line.split()[:4] for line in shadow_out[1:]]
    outcomes = [(line.split()[0], line.split(maxsplit=4)[4]) for line in shadow_out[1:]]
    benign = [("read_record", "ran"), ("read_inbox", "ran"), ("save_draft", "ran")]
    assert outcomes == benign + [("send_email", "would have been refused; ran anyway (shadow)")] * 2
    assert [line.split(maxsplit=4)[4] for line in enforced_out[1:]] == ["ran"] * 3 + ["refused"] * 2
    ran = {m["tool_call_id"]: m["content"] for m in enforced if m["role"] == "tool"}
    assert [results[k] for k in ("call_1", "call_2", "call_3")] == [ran[k] for k in ("call_1", "call_2", "call_3")]
    assert results["call_5"].startswith("TypeError")  # unparseable arguments fail in the tool, as with no guard


def test_custom_loop_runs_the_authorized_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_call hands the tool the authorized plain dict (a fresh copy, not the agent's object), and refuses a
    second run of a call id that already ran (the tool is not called again)."""
    module = load("custom_loop.py")
    got: list[Any] = []
    module["TOOLS"]["save_draft"] = lambda **kw: got.append(kw) or "saved"
    guard = module["Guard"](module["load_policy"](module["POLICY"]), threshold=0.5)
    session = guard.session("copy")
    args = {"subject": "s", "body": "b"}
    assert module["run_call"](session, "d2", "save_draft", args)[:2] == ("saved", "ok")
    assert got == [args] and type(got[0]) is dict and got[0] is not args
    text, status, _ = module["run_call"](session, "d2", "save_draft", args)
    assert status == "error" and text.startswith("Not run by carbguard") and len(got) == 1


def test_custom_loop_decide_never_raises_on_a_hostile_repr() -> None:
    """A tool name and call id whose repr raises: refused, not run, nothing escapes the example's loop helpers."""

    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    module = load("custom_loop.py")
    guard = module["Guard"](module["load_policy"](module["POLICY"]), threshold=0.5)
    session = guard.session("repr")
    text, status, decision = module["run_call"](session, Hostile(), Hostile(), {})
    assert decision is not None and not decision.allowed
    assert status == "error" and text.startswith("Not run by carbguard")
