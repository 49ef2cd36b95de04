"""Streamable-HTTP mode of the MCP guard proxy (the SDK's server transport, one server process per session).

Every request is checked before anything is created for it: its ``Host`` and ``Origin`` against
allow-lists (DNS-rebinding protection, on every bind), then its bearer token (``Authorization:
Bearer``, compared in constant time) when one is configured — required on any non-loopback bind.
A request without ``Mcp-Session-Id`` opens a session only if it is a valid ``initialize`` POST and
both caps (per remote address, global) have room; only then are its transport, its copy of the
real server (over stdio) and its guard session ``mcp-http-<session id>`` created.  A session whose
``initialize`` the transport rejects is ended at once; a session with no request in flight for
``idle_timeout`` seconds is reaped with its server process.  Rejected requests never hold a slot.
Every guard session is closed (its ``session_end`` audit entry written) however its MCP session
ends: the client's DELETE, the client gone (reaped when idle), an error, or the proxy shutting down
(SIGINT/SIGTERM: every open session is closed before the lifespan's shutdown completes).
Needs the ``mcp`` SDK with starlette and uvicorn (``carbguard[mcp]``).

Limitation: messages the server sends on its own (notifications, requests to the client) go to the
session's standalone GET stream, not to the stream of the POST they relate to.  Behind a reverse
proxy every client has the proxy's address, so the per-client cap counts them together.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from guard.adapters._mcp_relay import GuardedRelay
from guard.adapters._mcp_stdio import LineWriter, pump, spawn_server, stop_server
from guard.errors import GuardError, InputError
from guard.runtime import Guard

SESSION_HEADER = b"mcp-session-id"
MAX_SESSIONS = 64
MAX_PER_CLIENT = 8
IDLE_TIMEOUT_S = 900.0
MAX_BODY_BYTES = 4 * 1024 * 1024
MIN_TOKEN_CHARS = 16
TOKEN_ENV = "CARBGUARD_MCP_TOKEN"  # noqa: S105 - the name of the variable, not a token
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def _matches(value: str, patterns: Sequence[str]) -> bool:
    value = value.lower()
    for pattern in patterns:
        pattern = pattern.lower()
        if value == pattern:
            return True
        if pattern.endswith(":*") and value.startswith(pattern[:-1]) and value[len(pattern) - 1 :].isdigit():
            return True
    return False


def _security(hosts: Sequence[str], origins: Sequence[str]) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=list(hosts), allowed_origins=list(origins)
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
        token: str | None = None,
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] | None = None,
        max_sessions: int = MAX_SESSIONS,
        max_per_client: int = MAX_PER_CLIENT,
        idle_timeout: float = IDLE_TIMEOUT_S,
    ) -> None:
        loopback = is_loopback(host)
        if token is not None and len(token) < MIN_TOKEN_CHARS:
            raise InputError(f"the MCP bearer token must be at least {MIN_TOKEN_CHARS} characters")
        if not loopback and token is None:
            raise InputError(
                f"refusing to serve MCP over HTTP on non-loopback address {host!r} without a bearer token: "
                f"pass --token-file FILE or set {TOKEN_ENV} (and put a TLS-terminating reverse proxy in front)"
            )
        if allowed_hosts is None:
            if not loopback and _unspecified(host):
                raise InputError(f"binding {host!r} (every interface) needs --allow-host NAME[:PORT|:*]")
            name = f"[{host.strip('[]')}]" if ":" in host else host
            allowed_hosts = LOOPBACK_HOSTS if loopback else (f"{name}:*", name)
        if not 0 < idle_timeout < float("inf") or max_sessions < 1 or max_per_client < 1:
            raise InputError("idle timeout and session caps must be positive")
        self.guard = guard
        self.command = list(command)
        self.env = env
        self.warn = warn
        self.token = None if token is None else token.encode("utf-8")
        self.hosts = tuple(allowed_hosts)
        self.origins = tuple(LOOPBACK_ORIGINS if allowed_origins is None and loopback else allowed_origins or ())
        self.security = _security(self.hosts, self.origins)
        self.max_sessions = max_sessions
        self.max_per_client = max_per_client
        self.idle_timeout = idle_timeout
        self.transports: dict[str, Any] = {}
        self.owners: dict[str, str] = {}  # session id -> remote address that opened it
        self.processes = 0  # server processes running now
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
        headers = dict(scope.get("headers") or ())
        problem = self._reject(headers)
        if problem is not None:
            status, body = problem
            extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
            await _plain(send, status, body, extra)
            return
        sid = headers.get(SESSION_HEADER)
        if sid is not None:
            transport = self.transports.get(sid.decode("latin-1"))
            if transport is None:
                await _plain(send, 404, b"Session not found")
                return
            await transport.handle_request(scope, receive, send)
            return
        await self._open(scope, receive, send)

    def _reject(self, headers: Mapping[bytes, bytes]) -> tuple[int, bytes] | None:
        """Why a request is refused before anything else is done for it (Host, Origin, token), or None."""
        host = headers.get(b"host", b"").decode("latin-1")
        if not host or not _matches(host, self.hosts):
            return 421, b"Host not allowed"
        origin = headers.get(b"origin")
        if origin is not None and not _matches(origin.decode("latin-1"), self.origins):
            return 403, b"Origin not allowed"
        if self.token is not None:
            scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self.token):
                return 401, b"Missing or wrong bearer token"
        return None

    async def _lifespan(self, receive: Any, send: Any) -> None:
        async with contextlib.AsyncExitStack() as stack:
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await stack.enter_async_context(self.running())
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await stack.aclose()  # every session ends first: its server stopped, its session_end written
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    async def _open(self, scope: Any, receive: Any, send: Any) -> None:
        """A new session, only for a valid ``initialize`` POST with room under both caps."""
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        if self._tg is None:
            raise RuntimeError("HttpProxy is not running: serve it with a lifespan or inside running()")
        if scope.get("method") != "POST":
            await _plain(send, 400, b"No session: a session starts with an initialize POST")
            return
        body = await _body(receive)
        if body is None:
            await _plain(send, 413, b"Request body too large")
            return
        if not _is_initialize(body):
            await _plain(send, 400, b"No session: a session starts with an initialize POST")
            return
        client = str((scope.get("client") or ("?",))[0])
        if len(self.transports) >= self.max_sessions:
            await _plain(send, 503, b"Too many open sessions")
            return
        if sum(owner == client for owner in self.owners.values()) >= self.max_per_client:
            await _plain(send, 429, b"Too many open sessions from this address")
            return
        sid = uuid.uuid4().hex
        transport = StreamableHTTPServerTransport(
            mcp_session_id=sid, security_settings=self.security, idle_timeout=self.idle_timeout
        )
        self.transports[sid] = transport
        self.owners[sid] = client
        status: list[int] = []

        async def watched(message: Any) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            await self._tg.start(self._session, sid, transport)
            await transport.handle_request(scope, _replay(body, receive), watched)
        except Exception:
            self._forget(sid)
            with contextlib.suppress(Exception):
                await transport.terminate()
            raise
        if not status or status[0] >= 400:  # the transport refused the initialize: free the slot now
            await transport.terminate()

    def _forget(self, sid: str) -> None:
        self.transports.pop(sid, None)
        self.owners.pop(sid, None)

    async def _session(self, sid: str, transport: Any, *, task_status: Any) -> None:
        import anyio
        import mcp_types
        from mcp.shared.message import SessionMessage

        try:
            async with transport.connect() as (read, write):
                task_status.started()
                try:
                    process = await spawn_server(self.command, self.env)
                except GuardError as exc:
                    self.warn(f"carbguard: session {sid} not started: {exc}")
                    return
                self.processes += 1
                assert process.stdin is not None and process.stdout is not None

                async def to_client(message: Any) -> None:
                    await write.send(SessionMessage(mcp_types.jsonrpc_message_adapter.validate_python(message)))

                async def dropped(why: str) -> None:
                    self.warn(f"carbguard: dropped a server message: {why}")

                session = self.guard.session(f"mcp-http-{sid}")
                relay = GuardedRelay(session, to_client, LineWriter(process.stdin).send, warn=self.warn)
                try:
                    with transport.idle_scope:  # cancelled once no request was in flight for idle_timeout
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
                    self._forget(sid)
                    relay.close()
                    with anyio.CancelScope(shield=True):
                        try:
                            if not transport.is_terminated:
                                await transport.terminate()
                            await stop_server(process)
                        finally:
                            session.close()  # never raises; every way out writes the session_end entry
                    self.processes -= 1
        finally:
            self._forget(sid)


def _is_initialize(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") == "initialize" and "id" in message


async def _body(receive: Any) -> bytes | None:
    """The whole request body, or None when it is longer than ``MAX_BODY_BYTES``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives ``body`` once, then whatever the connection gives (its disconnect)."""
    given = False

    async def replayed() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _plain(send: Any, status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    headers = [(b"content-type", b"text/plain"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve_http(
    guard: Guard, command: Sequence[str], *, host: str, port: int, warn: Callable[[str], None], **options: Any
) -> None:
    """Serve the proxy at ``http://host:port/`` (any path) until interrupted; ``options`` go to :class:`HttpProxy`."""
    import uvicorn

    app = HttpProxy(guard, command, warn=warn, host=host, **options)
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")


__all__ = ["TOKEN_ENV", "HttpProxy", "is_loopback", "serve_http"]
