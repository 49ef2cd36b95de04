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
