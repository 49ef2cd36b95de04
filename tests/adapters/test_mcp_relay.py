"""The MCP relay core in-process: order, probes against the server, refusals, reserved ids (no subprocess)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from guard.adapters._mcp_relay import GuardedRelay, result_text
from guard.decision import Certification, ProbeCall, Reason, Verdict
from guard.policy import ToolSpec, load_policy
from guard.runtime import Guard, Session

POLICY = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_policy.yaml"


class ProbeOnce:
    """Asks for one read_record probe, then certifies once its result is in the session."""

    def certify(self, session: Session, node: int, spec: ToolSpec) -> Certification:
        if any(r.call_id == "probe-1" and r.kind.value == "result" for r in session.graph.records.values()):
            return Certification(Verdict.EXECUTE, Reason.CERTIFIED, "certified after the probe")
        probe = ProbeCall(tool="read_record", args={"name": "bob"}, call_id="probe-1")
        return Certification(Verdict.PROBE, Reason.PROBE_NEEDED, "probe the record", probes=(probe,))


class Harness:
    """A relay between a list (the client) and a scripted server that answers every tools/call."""

    def __init__(self, guard: Guard) -> None:
        self.client: list[Any] = []
        self.server: list[Any] = []
        self.warnings: list[str] = []
        self.relay = GuardedRelay(
            guard.session("s"), self._to_client, self._to_server, warn=self.warnings.append, check_at_start=False
        )

    async def _to_client(self, message: Any) -> None:
        self.client.append(message)

    async def _to_server(self, message: Any) -> None:
        self.server.append(message)
        if message.get("method") == "tools/call":
            text = f"ran {message['params']['name']}"
            result = {"content": [{"type": "text", "text": text}], "isError": False}
            asyncio.get_running_loop().call_soon(
                lambda: asyncio.ensure_future(
                    self.relay.from_server({"jsonrpc": "2.0", "id": message["id"], "result": result})
                )
            )

    def run(self, messages: list[Any]) -> None:
        async def go() -> None:
            for message in messages:
                await self.relay.from_client(message)
            await asyncio.sleep(0.05)

        asyncio.run(go())


def _call(rpc_id: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": {"name": tool, "arguments": args}}


def test_other_messages_forwarded_unchanged_and_in_order() -> None:
    """Catches a relay that drops, reorders or rewrites anything that is not a tools/call (the client's answer to
    the server's ``roots/list`` included)."""
    h = Harness(Guard(load_policy(POLICY), threshold=0.5))
    roots = {"jsonrpc": "2.0", "id": "r", "method": "roots/list"}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "file:///x", "é": [1, None]}},
        {"jsonrpc": "2.0", "id": "r", "result": {"roots": []}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]

    async def go() -> None:
        await h.relay.from_server(roots)
        for message in messages:
            await h.relay.from_client(message)
        await asyncio.sleep(0.05)

    asyncio.run(go())
    assert h.server == messages and h.client == [roots]


def test_probe_runs_against_the_server_then_the_call() -> None:
    """Catches a relay that skips the probe, shows the probe's answer to the client, or forwards before certifying."""
    h = Harness(Guard(load_policy(POLICY), threshold=0.5, certifier=ProbeOnce()))
    h.run([_call(7, "delete_file", {"path": "old.txt"})])
    assert [(m["params"]["name"], m["params"]["arguments"]) for m in h.server] == [
        ("read_record", {"name": "bob"}),
        ("delete_file", {"path": "old.txt"}),
    ]
    assert isinstance(h.server[0]["id"], str) and h.server[0]["id"].startswith("carbguard-")
    assert h.server[1]["id"] == 7
    assert [m["id"] for m in h.client] == [7] and h.client[0]["result"]["content"][0]["text"] == "ran delete_file"
    session = h.relay.session
    assert session.decisions["rpc:7"].reason is Reason.CERTIFIED
    assert "rpc:7" in session.answered and "probe-1" in session.answered


def test_refused_call_answered_with_is_error_and_not_forwarded() -> None:
    """Catches a relay that forwards a refused call or answers it as a success."""
    h = Harness(Guard(load_policy(POLICY), threshold=-1.0))  # every call scores >= 0 > threshold
    h.run([_call(1, "read_inbox", {})])
    assert h.server == []
    (answer,) = h.client
    assert answer["id"] == 1 and answer["result"]["isError"] is True
    assert answer["result"]["_meta"]["carbguard"]["verdict"] in {"escalate", "defer", "abstain"}


def test_batches_and_reserved_ids_are_refused() -> None:
    """Catches a relay that lets a batch, a request in the proxy's own id space, or a task-augmented call through."""
    h = Harness(Guard(load_policy(POLICY), threshold=0.5))
    reserved = h.relay._nonce + "1"
    task = {**_call(3, "read_inbox", {}), "params": {"name": "read_inbox", "arguments": {}, "task": {"ttl": 1000}}}
    h.run([[_call(1, "read_inbox", {})], _call(reserved, "read_inbox", {}), _call(2, 5, {}), task])
    assert h.server == []
    assert [m["id"] for m in h.client] == [1, reserved, 2, 3]
    assert all("error" in m for m in (h.client[0], h.client[1], h.client[3]))
    assert h.client[2]["result"]["isError"] is True


def test_result_text_reads_every_part_and_structured_content() -> None:
    """Catches an observer that misses a second text part, an embedded resource, a non-text part, structured content."""
    result = {
        "content": [
            {"type": "text", "text": "a"},
            {"type": "resource", "resource": {"uri": "x", "text": "b"}},
            {"type": "image", "data": "...", "mimeType": "image/png"},
        ],
        "structuredContent": {"k": "c"},
        "isError": True,
    }
    text, status = result_text(result)
    assert text.split("\n") == [
        "a",
        "b",
        '{"resource": {"uri": "x"}, "type": "resource"}',
        '{"data": "...", "mimeType": "image/png", "type": "image"}',
        '{"k": "c"}',
    ]
    assert status == "error"
