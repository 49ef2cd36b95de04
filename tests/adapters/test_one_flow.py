"""Every adapter drives the one flow: the same scripted scenario gives the same audit trail and the same runs.

The scenario, over the MCP fixture's tools (``tests/fixtures/mcp_server.py``) and policy:

1. ``read_inbox`` — runs;
2. ``send_email`` to an outside address — refused (the scripted scorer puts it over the threshold);
3. the agent's **edit** of that call: ``send_email`` to a colleague — the certifier asks for a
   **probe** (``read_record`` of bob), which is decided, run and observed, and the call runs once
   certified;
4. ``delete_file`` — an **error in the guard** (the scorer raises): refused with ``internal_error``.

It is driven through LangChain's ``create_agent`` middleware, the OpenAI Agents SDK's ``Runner`` with
its scripted model, a guarded MCP client over a real stdio server, and an AgentDojo pipeline; each
must give the same decision entries (tool, hashed arguments, verdict, reason, score) and run the same
tools with the same arguments.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from guard import Guard, ProbeCall, Reason, Verdict, load_policy
from guard.audit import MemoryAudit
from guard.decision import Certification
from guard.policy import ToolSpec
from guard.runtime import Session

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "fixtures" / "mcp_server.py"
POLICY = ROOT / "tests" / "fixtures" / "mcp_policy.yaml"
TASK = "Answer the mail in my inbox."
OUTSIDE = {"to": "audit@evil.example", "subject": "records", "body": "see attached"}
EDITED = {"to": "bob@corp.example", "subject": "records", "body": "see attached"}
DELETE = {"path": "old.txt"}
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("read_inbox", {}),
    ("send_email", OUTSIDE),
    ("send_email", EDITED),
    ("delete_file", DELETE),
]
RAN = [("read_inbox", {}), ("read_record", {"name": "bob"}), ("send_email", EDITED)]
TRAIL = [
    ("read_inbox", "execute", "under_threshold"),
    ("send_email", "escalate", "risk_budget"),
    ("send_email", "probe", "probe_needed"),
    ("read_record", "execute", "under_threshold"),
    ("send_email", "execute", "certified"),
    ("delete_file", "escalate", "internal_error"),
]


class ScriptedScorer:
    """1.0 for a send outside the company, 0.0 otherwise; raises on ``delete_file`` (the planted guard error)."""

    def score(self, graph: Any, node: int, selected: frozenset[int]) -> tuple[float, Any]:
        record = graph.records[node]
        if record.tool == "delete_file":
            raise RuntimeError("planted scorer fault")
        outside = record.tool == "send_email" and "evil" in str(record.args.get("to"))
        return (1.0 if outside else 0.0), MappingProxyType({"outside": outside})


class ProbeThenCertify:
    """Asks for one ``read_record`` probe, then certifies once its result is in the session."""

    def certify(self, session: Session, node: int, spec: ToolSpec) -> Certification:
        if any(r.call_id == "probe-1" and r.kind.value == "result" for r in session.graph.records.values()):
            return Certification(Verdict.EXECUTE, Reason.CERTIFIED, "certified after the probe")
        probe = ProbeCall(tool="read_record", args={"name": "bob"}, call_id="probe-1")
        return Certification(Verdict.PROBE, Reason.PROBE_NEEDED, "probe the record", probes=(probe,))


def make_guard() -> Guard:
    return Guard(
        load_policy(POLICY),
        threshold=0.5,
        audit=MemoryAudit(),
        scorer=ScriptedScorer(),
        certifier=ProbeThenCertify(),
    )


def trail(guard: Guard, *, scores: bool = False) -> list[tuple[Any, ...]]:
    """The decision entries as (tool, verdict, reason), with hashed arguments and score when ``scores``."""
    assert isinstance(guard.audit, MemoryAudit)
    rows = [e for e in guard.audit.entries if e.get("event") is None and e.get("kind") is None]
    if scores:
        return [(e["tool"], e["verdict"], e["reason"], json.dumps(e["args"], sort_keys=True), e["score"]) for e in rows]
    return [(e["tool"], e["verdict"], e["reason"]) for e in rows]


def _text(tool: str, args: dict[str, Any]) -> str:
    return {"read_inbox": "one new mail", "read_record": "Bob's record", "send_email": "sent"}.get(tool, "done")


# --------------------------------------------------------------------------- the four drivers


def via_langchain(guard: Guard, ran: list[tuple[str, dict[str, Any]]]) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool

    from guard.adapters.langchain import GuardMiddleware
    from guard.adapters.langchain_testing import ScriptedChatModel, tool_call

    @tool
    def read_inbox() -> str:
        """Read the inbox."""
        ran.append(("read_inbox", {}))
        return _text("read_inbox", {})

    @tool
    def read_record(name: str) -> str:
        """Read a record."""
        ran.append(("read_record", {"name": name}))
        return _text("read_record", {})

    @tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        ran.append(("send_email", {"to": to, "subject": subject, "body": body}))
        return _text("send_email", {})

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(("delete_file", {"path": path}))
        return _text("delete_file", {})

    turns = [AIMessage(content="", tool_calls=[tool_call(t, a, f"c{k}")]) for k, (t, a) in enumerate(SCRIPT)]
    model = ScriptedChatModel(responses=[*turns, AIMessage(content="done")])
    tools = [read_inbox, read_record, send_email, delete_file]
    agent = create_agent(model, tools, middleware=[GuardMiddleware(guard)])
    agent.invoke({"messages": [HumanMessage(TASK)]})


def via_openai_agents(guard: Guard, ran: list[tuple[str, dict[str, Any]]]) -> None:
    from agents import Agent, function_tool, set_tracing_disabled

    from guard.adapters.openai_agents import run_sync
    from guard.adapters.openai_agents_testing import ScriptedModel, function_call

    @function_tool
    def read_inbox() -> str:
        """Read the inbox."""
        ran.append(("read_inbox", {}))
        return _text("read_inbox", {})

    @function_tool
    def read_record(name: str) -> str:
        """Read a record."""
        ran.append(("read_record", {"name": name}))
        return _text("read_record", {})

    @function_tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        ran.append(("send_email", {"to": to, "subject": subject, "body": body}))
        return _text("send_email", {})

    @function_tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(("delete_file", {"path": path}))
        return _text("delete_file", {})

    set_tracing_disabled(True)
    turns: list[Any] = [[function_call(t, a, f"c{k}")] for k, (t, a) in enumerate(SCRIPT)]
    model = ScriptedModel([*turns, "done"])
    agent = Agent(name="mail", model=model, tools=[read_inbox, read_record, send_email, delete_file])
    run_sync(guard, agent, TASK, session_id="openai")


def via_mcp(guard: Guard, ran: list[tuple[str, dict[str, Any]]], tmp_path: Path) -> None:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from guard.adapters.mcp import GuardedClientSession

    log = tmp_path / "server.log"

    async def drive() -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env={"MCP_FIXTURE_LOG": str(log)})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            guarded = GuardedClientSession(client, guard.session("mcp"))
            await guarded.initialize()
            guarded.session.observe_user(TASK)
            for k, (tool, args) in enumerate(SCRIPT):
                await guarded.call_tool(tool, args, call_id=f"c{k}")
            guarded.session.observe_final("done")

    anyio.run(drive)
    ran.extend((e["tool"], e["args"]) for e in map(json.loads, log.read_text().splitlines()))


def via_agentdojo(guard: Guard, ran: list[tuple[str, dict[str, Any]]]) -> None:
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline
    from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor
    from agentdojo.functions_runtime import EmptyEnv, FunctionsRuntime, make_function

    from guard.adapters.agentdojo import GuardElement, ReplayLLM

    def read_inbox() -> str:
        """Read the inbox."""
        ran.append(("read_inbox", {}))
        return _text("read_inbox", {})

    def read_record(name: str) -> str:
        """Read a record.

        :param name: whose record
        """
        ran.append(("read_record", {"name": name}))
        return _text("read_record", {})

    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail.

        :param to: the recipient
        :param subject: the subject
        :param body: the body
        """
        ran.append(("send_email", {"to": to, "subject": subject, "body": body}))
        return _text("send_email", {})

    def delete_file(path: str) -> str:
        """Delete a file.

        :param path: the file
        """
        ran.append(("delete_file", {"path": path}))
        return _text("delete_file", {})

    turns: list[dict[str, Any]] = [
        {"role": "assistant", "content": None, "tool_calls": [{"function": t, "args": a, "id": f"c{k}"}]}
        for k, (t, a) in enumerate(SCRIPT)
    ]
    replay = ReplayLLM([*turns, {"role": "assistant", "content": "done", "tool_calls": None}])
    element = GuardElement(guard, "deny", session_id="agentdojo")
    loop = ToolsExecutionLoop([element, ToolsExecutor(), replay])
    pipeline = AgentPipeline([SystemMessage("You answer mail."), InitQuery(), replay, loop])
    functions = [make_function(f) for f in (read_inbox, read_record, send_email, delete_file)]
    pipeline.query(TASK, FunctionsRuntime(functions), EmptyEnv())


DRIVERS = ["langchain", "openai_agents", "mcp", "agentdojo"]


@pytest.fixture
def quiet_sdk() -> Iterator[None]:
    """The OpenAI Agents SDK's tracing off and its default loop closed (see openai_support)."""
    from tests.adapters.openai_support import quiet_tracing_and_close_loops

    yield from quiet_tracing_and_close_loops()


def drive(name: str, guard: Guard, tmp_path: Path) -> list[tuple[str, dict[str, Any]]]:
    ran: list[tuple[str, dict[str, Any]]] = []
    if name == "langchain":
        pytest.importorskip("langchain")
        via_langchain(guard, ran)
    elif name == "openai_agents":
        pytest.importorskip("agents")
        via_openai_agents(guard, ran)
    elif name == "mcp":
        pytest.importorskip("mcp")
        via_mcp(guard, ran, tmp_path)
    else:
        pytest.importorskip("agentdojo")
        via_agentdojo(guard, ran)
    return ran


@pytest.mark.parametrize("name", DRIVERS)
def test_every_adapter_gives_the_scenario_s_audit_trail(name: str, tmp_path: Path, quiet_sdk: None) -> None:
    """Catches an adapter whose probe, edit, refusal or guard-error handling differs from the one flow's."""
    guard = make_guard()
    ran = drive(name, guard, tmp_path)
    assert trail(guard) == TRAIL
    assert ran == RAN


def test_the_four_trails_are_identical(tmp_path: Path, quiet_sdk: None) -> None:
    """Catches adapters that agree on verdicts but audit different arguments or scores for the same calls."""
    trails = {}
    for name in [
        "langchain",
        "mcp",
        "agentdojo",
        "openai_agents",
    ]:  # the SDK's run_sync last: its loop closes at teardown
        guard = make_guard()
        (tmp_path / name).mkdir()
        drive(name, guard, tmp_path / name)
        trails[name] = trail(guard, scores=True)
    assert all(t == trails["langchain"] for t in trails.values()), trails
