"""Transports of the MCP guard proxy: newline-delimited JSON-RPC over stdio, both sides.

The client is this process's stdin/stdout; the real server is a subprocess whose stdin/stdout the
proxy owns (its stderr is passed through).  One process serves one client connection, so it holds
one guard session.  Lines are parsed once; what is forwarded is the parsed value re-serialized.

The session is closed (its ``session_end`` audit entry written) on every way out: the client hangs
up (stdin EOF), a pipe breaks, the server exits, an error, SIGINT, SIGTERM or SIGHUP — the signals
stop the relay, the server and the session in order instead of killing the process mid-way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, BinaryIO

from guard.adapters._mcp_relay import GuardedRelay
from guard.errors import InputError
from guard.runtime import Guard

MAX_LINE_BYTES = 64 * 1024 * 1024
SHUTDOWN_GRACE_S = 5.0


def _encode(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _decode(line: bytes) -> Any:
    """A parsed JSON-RPC line; a line that is not JSON raises InputError."""
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"not a JSON-RPC message: {type(exc).__name__}") from None


class LineWriter:
    """Serialized writes of whole lines to an asyncio stream or a blocking binary file."""

    def __init__(self, sink: asyncio.StreamWriter | BinaryIO) -> None:
        self._sink = sink
        self._lock = asyncio.Lock()

    async def send(self, message: Any) -> None:
        data = _encode(message)
        async with self._lock:
            if isinstance(self._sink, asyncio.StreamWriter):
                self._sink.write(data)
                await self._sink.drain()
            else:
                self._sink.write(data)
                self._sink.flush()


def stdin_fd() -> int:
    """This process's stdin file descriptor; InputError when stdin is closed."""
    try:
        fd = sys.stdin.fileno()
        os.fstat(fd)
    except (AttributeError, OSError, ValueError):
        raise InputError("stdin is closed: mcp-proxy speaks MCP to its client over stdin/stdout") from None
    return fd


async def stdin_reader(fd: int) -> asyncio.StreamReader:
    """Stdin as an asyncio stream: a pipe, socket or terminal directly; a file or ``/dev/null`` by a reader thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        return reader

    def feed() -> None:  # epoll cannot wait on a regular file or /dev/null
        try:
            while chunk := os.read(fd, 65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except OSError:
            pass
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=feed, name="carbguard-stdin", daemon=True).start()
    return reader


async def spawn_server(command: Sequence[str], env: Mapping[str, str] | None = None) -> asyncio.subprocess.Process:
    """Start the real MCP server (stdin/stdout piped, stderr inherited)."""
    if not command:
        raise InputError("no MCP server command given (put it after --)")
    try:
        return await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=dict(os.environ if env is None else env),
            limit=MAX_LINE_BYTES,
        )
    except OSError as exc:
        raise InputError(f"cannot start MCP server {command[0]!r}: {exc.strerror or exc}") from None


async def pump(
    reader: asyncio.StreamReader,
    handle: Callable[[Any], Awaitable[None]],
    on_bad_line: Callable[[str], Awaitable[None]],
) -> None:
    """Feed each line of ``reader`` to ``handle`` in order until EOF."""
    while True:
        try:
            line = await reader.readline()
        except ValueError:  # a line over the limit
            await on_bad_line(f"a message longer than {MAX_LINE_BYTES} bytes")
            return
        if not line:
            return
        if not line.strip():
            continue
        try:
            message = _decode(line)
        except InputError as exc:
            await on_bad_line(str(exc))
            continue
        await handle(message)


async def stop_server(process: asyncio.subprocess.Process) -> int:
    if process.stdin is not None and not process.stdin.is_closing():
        process.stdin.close()
    try:
        return await asyncio.wait_for(process.wait(), SHUTDOWN_GRACE_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            return await asyncio.wait_for(process.wait(), SHUTDOWN_GRACE_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            return await process.wait()


def _report(task: asyncio.Future[None], what: str, warn: Callable[[str], None]) -> None:
    """A pipe that broke ends the connection with one line on stderr; anything else propagates."""
    exc = task.exception()
    if isinstance(exc, ConnectionError | BrokenPipeError):
        warn(f"carbguard: {what} broke: {exc}")
    elif exc is not None:
        raise exc


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def serve_stdio(
    guard: Guard,
    command: Sequence[str],
    *,
    session_id: str,
    client_in: asyncio.StreamReader | None = None,
    client_out: asyncio.StreamWriter | BinaryIO | None = None,
    env: Mapping[str, str] | None = None,
    warn: Callable[[str], None] = _stderr,
) -> int:
    """Run the proxy for one client connection until the client or the server hangs up; the server's exit code."""
    reader = client_in if client_in is not None else await stdin_reader(stdin_fd())  # before the server starts
    process = await spawn_server(command, env)
    assert process.stdin is not None and process.stdout is not None
    to_client = LineWriter(client_out if client_out is not None else sys.stdout.buffer)
    to_server = LineWriter(process.stdin)
    session = guard.session(session_id)
    relay = GuardedRelay(session, to_client.send, to_server.send, warn=warn)

    async def bad_client_line(why: str) -> None:
        warn(f"carbguard: refused a client message: {why}")
        await to_client.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"carbguard: {why}"}})

    async def bad_server_line(why: str) -> None:
        warn(f"carbguard: dropped a server message: {why}")

    client_task = asyncio.ensure_future(pump(reader, relay.from_client, bad_client_line))
    server_task = asyncio.ensure_future(pump(process.stdout, relay.from_server, bad_server_line))
    stopped = asyncio.Event()
    signal_task = asyncio.ensure_future(stopped.wait())
    handled = _on_signals(stopped)
    try:
        done, _ = await asyncio.wait({client_task, server_task, signal_task}, return_when=asyncio.FIRST_COMPLETED)
        if signal_task in done:  # SIGINT/SIGTERM/SIGHUP: stop the relay and the server, then close the session
            warn("carbguard: stopped by a signal; the session is closed")
            relay.close()
            client_task.cancel()
            return await stop_server(process)
        if client_task in done:  # the client hung up: let the server finish what it was sent
            _report(client_task, "the client connection", warn)
            if not relay.heard:
                warn("carbguard: the client closed stdin before sending anything; the proxy stops")
            relay.close()
            code = await stop_server(process)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(server_task, SHUTDOWN_GRACE_S)
            return code
        _report(server_task, "the server connection", warn)
        relay.close()
        client_task.cancel()
        return await stop_server(process)
    finally:
        for task in (client_task, server_task, signal_task):
            task.cancel()
        try:
            if process.returncode is None:
                await stop_server(process)
        finally:
            session.close()  # never raises; every exit path writes the session_end entry
            _off_signals(handled)  # only now: a signal during the shutdown does not kill the process before it


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _on_signals(stopped: asyncio.Event) -> list[signal.Signals]:
    """Let SIGINT, SIGTERM and SIGHUP set ``stopped`` (main thread only); the signals handled."""
    loop = asyncio.get_running_loop()
    handled = []
    for signum in STOP_SIGNALS:
        try:
            loop.add_signal_handler(signum, stopped.set)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            continue
        handled.append(signum)
    return handled


def _off_signals(handled: list[signal.Signals]) -> None:
    loop = asyncio.get_running_loop()
    for signum in handled:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signum)


__all__ = ["LineWriter", "serve_stdio", "spawn_server"]
