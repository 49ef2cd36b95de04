"""Streamable-HTTP mode of the MCP guard proxy (the SDK's server transport, one server process per session).

Each MCP session the HTTP client opens (an ``initialize`` POST without ``Mcp-Session-Id``) gets its
own transport, its own copy of the real server (started over stdio) and its own guard session
``mcp-http-<session id>``; the same :class:`~guard.adapters._mcp_relay.GuardedRelay` as the stdio
mode sits between them.  Needs the ``mcp`` SDK with starlette and uvicorn (``carbguard[mcp]``).

Limitation: messages the server sends on its own (notifications, requests to the client) go to the
session's standalone GET stream, not to the stream of the POST they relate to.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from guard.adapters._mcp_relay import GuardedRelay
from guard.adapters._mcp_stdio import LineWriter, _stop, pump, spawn_server
from guard.runtime import Guard

SESSION_HEADER = b"mcp-session-id"
MAX_SESSIONS = 64


def _localhost_security(host: str) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


class HttpProxy:
    """An ASGI app: the guard proxy for every MCP session of streamable-HTTP clients."""

    def __init__(
        self,
        guard: Guard,
        command: Sequence[str],
        *,
        warn: Callable[[str], None],
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.guard = guard
        self.command = list(command)
        self.env = env
        self.warn = warn
        self.security = _localhost_security(host)
        self.max_sessions = max_sessions
        self.transports: dict[str, Any] = {}
        self._tg: Any = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The task group every session's relay runs in (enter it before serving)."""
        import anyio

        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        sid = dict(scope.get("headers") or ()).get(SESSION_HEADER)
        if sid is not None:
            transport = self.transports.get(sid.decode("latin-1"))
            if transport is None:
                await _plain(send, 404, b"Session not found")
                return
            await transport.handle_request(scope, receive, send)
            return
        if len(self.transports) >= self.max_sessions:
            await _plain(send, 503, b"Too many open sessions")
            return
        await self._open(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        async with contextlib.AsyncExitStack() as stack:
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await stack.enter_async_context(self.running())
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    async def _open(self, scope: Any, receive: Any, send: Any) -> None:
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        if self._tg is None:
            raise RuntimeError("HttpProxy is not running: serve it with a lifespan or inside running()")
        sid = uuid.uuid4().hex
        transport = StreamableHTTPServerTransport(mcp_session_id=sid, security_settings=self.security)
        self.transports[sid] = transport
        try:
            await self._tg.start(self._session, sid, transport)
            await transport.handle_request(scope, receive, send)
        except Exception:
            self.transports.pop(sid, None)
            raise

    async def _session(self, sid: str, transport: Any, *, task_status: Any) -> None:
        import anyio
        import mcp_types
        from mcp.shared.message import SessionMessage

        try:
            async with transport.connect() as (read, write):
                task_status.started()
                process = await spawn_server(self.command, self.env)
                assert process.stdin is not None and process.stdout is not None

                async def to_client(message: Any) -> None:
                    await write.send(SessionMessage(mcp_types.jsonrpc_message_adapter.validate_python(message)))

                async def dropped(why: str) -> None:
                    self.warn(f"carbguard: dropped a server message: {why}")

                relay = GuardedRelay(
                    self.guard.session(f"mcp-http-{sid}"), to_client, LineWriter(process.stdin).send, warn=self.warn
                )
                try:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(pump, process.stdout, relay.from_server, dropped)
                        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                            async for item in read:  # ends when the client ends the session (DELETE)
                                if isinstance(item, Exception):
                                    self.warn(f"carbguard: refused a client message: {item}")
                                    continue
                                wire = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
                                await relay.from_client(wire)
                        tg.cancel_scope.cancel()
                finally:
                    relay.close()
                    with anyio.CancelScope(shield=True):
                        await _stop(process)
        finally:
            self.transports.pop(sid, None)


async def _plain(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


def serve_http(guard: Guard, command: Sequence[str], *, host: str, port: int, warn: Callable[[str], None]) -> None:
    """Serve the proxy at ``http://host:port/`` (any path) until interrupted."""
    import uvicorn

    app = HttpProxy(guard, command, warn=warn, host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")


__all__ = ["HttpProxy", "serve_http"]
