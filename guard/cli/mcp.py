"""``carbguard mcp-proxy``: the MCP guard proxy over stdio."""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from guard.errors import GuardError


def register(sub: Any) -> None:
    proxy = sub.add_parser(
        "mcp-proxy",
        help="guard an MCP server: speak MCP over stdio to the client and to the server started after --",
        description="Every tools/call is decided; refused calls are answered with an isError tool result and "
        "never reach the server.  Example: carbguard mcp-proxy --policy P --threshold 0.5 -- python server.py",
    )
    proxy.add_argument("--policy", required=True, help="policy file of the server's tools")
    gate = proxy.add_mutually_exclusive_group()
    gate.add_argument("--artifact", help="calibration artifact for the threshold (default: the policy's)")
    gate.add_argument("--threshold", type=float, help="an explicit threshold instead of a calibration artifact")
    proxy.add_argument("--audit", help="JSON-lines audit file (default: the policy's audit.path, if any)")
    proxy.add_argument("--session", help="session id of this client connection (default: mcp-<random>)")
    proxy.add_argument(
        "--http", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio"
    )
    http = proxy.add_argument_group("HTTP mode (--http)")
    http.add_argument(
        "--token-file",
        help="file holding the bearer token clients must send (default: $CARBGUARD_MCP_TOKEN); "
        "required on a non-loopback bind",
    )
    http.add_argument(
        "--allow-host",
        action="append",
        metavar="HOST[:PORT|:*]",
        help="a Host header value to accept (repeatable; default: loopback names on a loopback bind, the bind address "
        "otherwise)",
    )
    http.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="an Origin header value to accept, e.g. https://app.example (repeatable; default: loopback origins on a "
        "loopback bind, none otherwise; requests without Origin are accepted)",
    )
    http.add_argument("--idle-timeout", type=float, default=900.0, help="seconds before an idle session is reaped")
    http.add_argument("--max-sessions", type=int, default=64, help="open sessions in all (default 64)")
    http.add_argument("--max-sessions-per-client", type=int, default=8, help="open sessions per remote address")
    proxy.add_argument("--shadow", action="store_true", help="decide and audit, but never block (shadow mode)")
    proxy.add_argument("command", nargs=argparse.REMAINDER, help="-- then the MCP server command and its arguments")
    proxy.set_defaults(func=_mcp_proxy)


def server_command(command: list[str]) -> list[str]:
    """The server command after ``--``; a GuardError when there is none."""
    rest = command[1:] if command[:1] == ["--"] else command
    if not rest:
        raise GuardError("no MCP server command: put it after --, e.g. -- python server.py")
    return rest


def build_guard(args: argparse.Namespace) -> Any:
    """The Guard of ``--policy`` with ``--artifact`` / ``--threshold`` / the policy's artifact, and ``--audit``."""
    from guard.artifact import load_artifact
    from guard.decision import Mode
    from guard.policy import load_policy
    from guard.runtime import Guard

    policy = load_policy(args.policy)
    audit = args.audit or (str(policy.resolve(policy.audit.path)) if policy.audit.path else None)
    mode = Mode.SHADOW if getattr(args, "shadow", False) else Mode.ENFORCE
    if args.threshold is not None:
        return Guard(policy, threshold=args.threshold, audit=audit, mode=mode)
    artifact_path = args.artifact or (
        policy.resolve(policy.calibration.artifact) if policy.calibration.artifact else None
    )
    if artifact_path is None:
        raise GuardError(f"{args.policy}: no threshold: pass --threshold T or --artifact A (the policy names none)")
    art = load_artifact(artifact_path, policy)
    return Guard(policy, threshold=art.threshold, audit=audit, artifact_id=art.artifact_id, mode=mode)


def _mcp_proxy(args: argparse.Namespace) -> int:
    import asyncio

    from guard.adapters.mcp import serve_stdio

    command = server_command(args.command)
    guard = build_guard(args)
    if args.http:
        return _serve_http(guard, command, args)
    session_id = args.session or f"mcp-{uuid.uuid4().hex[:12]}"
    code = asyncio.run(serve_stdio(guard, command, session_id=session_id))
    return 0 if code == 0 else 1


def read_token(token_file: str | None) -> str | None:
    """The token of ``--token-file`` (whitespace around it stripped), else ``$CARBGUARD_MCP_TOKEN``, else None."""
    import os
    from pathlib import Path

    from guard.adapters._mcp_http import TOKEN_ENV

    if token_file is not None:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise GuardError(f"--token-file {token_file!r}: cannot read it: {exc}") from None
        if not token:
            raise GuardError(f"--token-file {token_file!r} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def _serve_http(guard: Any, command: list[str], args: argparse.Namespace) -> int:
    import sys

    from guard.adapters.mcp import HttpProxy, serve_http

    where = args.http
    host, sep, port = where.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise GuardError(f"--http {where!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    options: dict[str, Any] = {
        "token": read_token(args.token_file),
        "allowed_hosts": args.allow_host,
        "allowed_origins": args.allow_origin,
        "idle_timeout": args.idle_timeout,
        "max_sessions": args.max_sessions,
        "max_per_client": args.max_sessions_per_client,
    }
    bind = host.strip("[]")

    def warn(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    HttpProxy(guard, command, warn=warn, host=bind, **options)  # refuses a bad configuration before binding
    auth = "bearer token required" if options["token"] else "no token (loopback only)"
    print(f"carbguard mcp-proxy: streamable HTTP at http://{host}:{port}/mcp ({auth})", file=sys.stderr, flush=True)
    serve_http(guard, command, host=bind, port=int(port), warn=warn, **options)
    return 0
