"""The transport-free core of the MCP guard proxy: one guarded relay per client connection.

Messages are JSON-RPC values (already parsed).  Everything is forwarded in order, re-serialized from
the parsed value (so the server reads exactly what the guard read), except ``tools/call`` requests:
each is decided; ``probe`` verdicts run their probe calls against the server and decide again; an
``execute`` is authorized and the server gets the authorized arguments; anything else is answered
with a tool result ``isError: true`` naming the verdict and reason, and the server never sees it.
Everything the server sends that can carry content is observed before the client gets it
(:mod:`guard.adapters._mcp_content`): tool results with every content item, resources, prompts,
listings, completions, notifications, server requests; a read of an undeclared resource or prompt
is refused (``mcp.undeclared``), and an answer the guard could not observe is withheld (the client
gets a JSON-RPC error instead).  Server messages that answer nothing the client asked are dropped.
Server requests (sampling, elicitation) are refused unless ``mcp.server_requests: observe``; then a
sampling request that asks for the client's context is refused still, and the client's answer is
observed before the server gets it (one to a request the proxy did not forward is dropped).
No ``mcp`` import here.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from guard.adapters._mcp_content import ContentObserver, observe_all, result_text
from guard.adapters._refusal import refusal_text as refusal_text
from guard.adapters.flow import Call, Refused, Tools, aguarded
from guard.decision import Decision
from guard.errors import GuardError, InputError
from guard.policy.tools import ToolSchema, check_tools, from_mcp_tools
from guard.runtime import Session

Send = Callable[[Any], Awaitable[None]]
Warn = Callable[[str], None]

PROBE_TIMEOUT_S = 30.0
MAX_PROBE_ROUNDS = 3
MAX_LIST_PAGES = 100
REFUSED = -32001  # JSON-RPC error code of a request the guard refused
NOT_OBSERVED = -32003  # JSON-RPC error code of an answer the guard withheld because it could not observe it


def refusal_result(decision: Decision) -> dict[str, Any]:
    """An MCP ``CallToolResult`` (wire form) with ``isError: true`` for a call that was not run."""
    meta = {"verdict": decision.verdict.value, "reason": decision.reason.value, "score": decision.score}
    return {
        "content": [{"type": "text", "text": refusal_text(decision)}],
        "isError": True,
        "_meta": {"carbguard": meta},
    }


@dataclass(frozen=True, slots=True)
class Request:
    """A ``tools/call`` to run: its params (the authorized arguments), and whether it is the guard's own probe."""

    params: dict[str, Any]
    probe: bool


def mcp_tools(
    warn: Warn, result: Callable[[Any], tuple[str, str]], main: Call, *, observe: bool = True
) -> Tools[Request, Any]:
    """The flow's view of an MCP server: a call runs as ``tools/call`` params; ``result`` reads what it returned.

    ``main`` is the client's call (any other is a probe); ``observe=False``: its answer is observed when it arrives.
    """

    def payload(call: Call, args: dict[str, Any]) -> Request:
        return Request({"name": call.tool, "arguments": args}, call != main)

    return Tools(payload, result, warn, MAX_PROBE_ROUNDS, observe)


def _rpc_error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


class GuardedRelay:
    """One client connection: a guard session between the client and the real server."""

    def __init__(
        self,
        session: Session,
        to_client: Send,
        to_server: Send,
        *,
        warn: Warn,
        probe_timeout: float = PROBE_TIMEOUT_S,
        check_at_start: bool = True,
    ) -> None:
        self.session = session
        self._to_client = to_client
        self._to_server = to_server
        self._warn = warn
        self._probe_timeout = probe_timeout
        self._check_at_start = check_at_start
        self._nonce = f"carbguard-{uuid.uuid4().hex[:12]}-"
        self._counter = 0
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._guarded: dict[Any, str] = {}  # JSON-RPC id (as JSON) -> guard call id of a forwarded call
        self._pending: dict[str, tuple[str, Any]] = {}  # id (as JSON) -> method, params of a forwarded request
        self._asked: dict[str, str] = {}  # id (as JSON) -> method of a server request forwarded to the client
        self._content = ContentObserver(session)
        self._warned: set[str] = set()
        self.tools: dict[str, ToolSchema] = {}
        self.problems: list[str] = []
        self.started: asyncio.Task[None] | None = None
        self.heard = False  # whether the client sent anything

    # ------------------------------------------------------------------ client -> server

    async def from_client(self, message: Any) -> None:
        """Handle one message from the client (the caller awaits each in order)."""
        self.heard = True
        if isinstance(message, list):
            for item in message:
                if isinstance(item, Mapping) and "id" in item and "method" in item:
                    await self._to_client(_rpc_error(item["id"], -32600, "carbguard: JSON-RPC batches are refused"))
            return
        if not isinstance(message, Mapping):
            await self._to_client(_rpc_error(None, -32600, "carbguard: a JSON-RPC message must be an object"))
            return
        method, msg_id = message.get("method"), message.get("id")
        if isinstance(msg_id, str) and msg_id.startswith(self._nonce):
            await self._to_client(_rpc_error(msg_id, -32600, "carbguard: request id is reserved by the proxy"))
            return
        if method == "tools/call" and "id" in message:
            await self._call(message)
            return
        if method == "tools/call":  # a notification cannot carry a call the guard could answer
            return
        if method is None:
            await self._reply(message)
            return
        if "id" in message and "method" in message:
            refusal = self._content.refusal(method, message.get("params"))
            if refusal is not None:
                await self._to_client(_rpc_error(msg_id, REFUSED, refusal))
                return
            self._pending[json.dumps(msg_id, sort_keys=True)] = (str(method), message.get("params"))
        await self._to_server(message)
        if method == "notifications/initialized" and self._check_at_start and self.started is None:
            self.started = asyncio.ensure_future(self._check_listing())

    async def _call(self, message: Mapping[str, Any]) -> None:
        msg_id = message["id"]
        params = message.get("params")
        params = params if isinstance(params, Mapping) else {}
        tool = params.get("name")
        args = params.get("arguments", {})
        call_id = "rpc:" + json.dumps(msg_id, sort_keys=True)
        tool_name: Any = tool  # not a str: decide refuses it (bad_arguments), nothing is forwarded
        if "task" in params:  # its result would arrive through tasks/result, which the guard cannot observe
            text = "carbguard: task-augmented tools/call is not supported; call the tool without `task`"
            await self._to_client(_rpc_error(msg_id, -32602, text))
            return
        call = Call(tool_name, args, call_id)

        async def run(request: Request) -> Any:
            """A probe runs against the server; the client's call is forwarded (its answer observed in ``_answer``)."""
            if request.probe:  # its result (the JSON-RPC response) never reaches the client
                return await self._request("tools/call", request.params)
            self._guarded[json.dumps(msg_id, sort_keys=True)] = call_id
            await self._to_server({**message, "params": {**params, **request.params}})
            return None

        outcome = await aguarded(self.session, call, mcp_tools(self._warn, response_text, call, observe=False), run)
        if isinstance(outcome, Refused):
            await self._to_client({"jsonrpc": "2.0", "id": msg_id, "result": refusal_result(outcome.decision)})

    async def _request(self, method: str, params: Mapping[str, Any]) -> Any:
        """A request of the proxy's own to the server; its response never reaches the client."""
        self._counter += 1
        rpc_id = f"{self._nonce}{self._counter}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rpc_id] = future
        try:
            await self._to_server({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": dict(params)})
            return await asyncio.wait_for(future, self._probe_timeout)
        finally:
            self._waiting.pop(rpc_id, None)

    # ------------------------------------------------------------------ server -> client

    async def from_server(self, message: Any) -> None:
        """Handle one message from the server: observe what it carries, then forward it (or withhold it)."""
        if not isinstance(message, Mapping) or not isinstance(message.get("method", ""), str):
            self._warn("carbguard: dropped a server message that is not a JSON-RPC object")
            return
        method = message.get("method")
        if method is None:
            await self._answer(message)
            return
        if "id" in message:
            try:
                refusal = self._content.server_request(method, message.get("params"))
            except InputError as exc:
                refusal = f"carbguard: server request {method[:100]!r} not observed ({exc}); refused"
            if refusal is not None:
                self._warn(refusal)
                await self._to_server(_rpc_error(message["id"], REFUSED, refusal))
                return
            self._asked[json.dumps(message["id"], sort_keys=True)] = method
        else:
            try:
                self._content.notification(method, message.get("params"))
            except InputError as exc:
                self._warn(f"carbguard: dropped server notification {method[:100]!r}: not observed ({exc})")
                return
        await self._to_client(message)

    async def _reply(self, message: Mapping[str, Any]) -> None:
        """The client's answer to a server request: observed, then forwarded; one to a request the proxy did not
        forward is dropped, one it cannot observe is replaced by an error (the server never gets it)."""
        if "id" not in message:
            self._warn("carbguard: dropped a client message that is neither request, notification nor response")
            return
        key = json.dumps(message["id"], sort_keys=True)
        method = self._asked.pop(key, None)
        if method is None:
            self._warn(f"carbguard: dropped a client response to no request the proxy forwarded ({key[:80]})")
            return
        try:
            self._content.client_answer(method, message)
        except InputError as exc:
            self._warn(f"carbguard: client answer withheld: not observed: {exc}")
            text = f"carbguard: the client's answer was not observed ({exc})"
            await self._to_server(_rpc_error(message["id"], NOT_OBSERVED, text))
            return
        await self._to_server(message)

    async def _answer(self, message: Mapping[str, Any]) -> None:
        """A response of the server: to a probe or start-up listing (kept), or to the client (observed first)."""
        if "id" not in message:
            self._warn("carbguard: dropped a server message that is neither request, notification nor response")
            return
        msg_id = message["id"]
        if isinstance(msg_id, str) and msg_id in self._waiting:
            future = self._waiting[msg_id]
            if not future.done():
                future.set_result(message)
            return
        key = json.dumps(msg_id, sort_keys=True)
        call_id = self._guarded.pop(key, None)
        pending = self._pending.pop(key, None)
        try:
            if call_id is not None:
                text, status = response_text(message)
                self.session.observe_result(call_id, text, status)
            elif pending is not None:
                observe_all(self._content, pending[0], pending[1], message)
            else:
                self._warn(f"carbguard: dropped a server response to no request of the client ({key[:80]})")
                return
        except InputError as exc:
            self._warn(f"carbguard: answer withheld: not observed: {exc}")
            await self._to_client(_rpc_error(msg_id, NOT_OBSERVED, f"carbguard: the answer was not observed ({exc})"))
            return
        if pending is not None and pending[0] == "tools/list":
            self._learn(message.get("result"))
        await self._to_client(message)

    def close(self) -> None:
        """Cancel waits on the server (it went away)."""
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(TimeoutError("the MCP server closed the connection"))
        if self.started is not None:
            self.started.cancel()

    # ------------------------------------------------------------------ helpers

    async def _check_listing(self) -> None:
        """List the server's tools once at start and warn about every mismatch with the policy."""
        cursor: Any = None
        try:
            for _ in range(MAX_LIST_PAGES):
                response = await self._request("tools/list", {} if cursor is None else {"cursor": cursor})
                result = response.get("result") if isinstance(response, Mapping) else None
                if not isinstance(result, Mapping):
                    self._warn(f"carbguard: tools/list failed at start: {response.get('error')!r}")
                    return
                self._learn(result)
                cursor = result.get("nextCursor")
                if not cursor:
                    break
        except (TimeoutError, GuardError) as exc:
            self._warn(f"carbguard: tools/list at start did not complete: {exc}")
            return
        self.problems = check_tools(self.session.guard.policy, self.tools.values(), policy_extra=False)
        for problem in self.problems:
            self._warn(f"carbguard: warning: {problem}")

    def _learn(self, result: Any) -> None:
        tools = result.get("tools") if isinstance(result, Mapping) else None
        if not isinstance(tools, list):
            return
        try:
            schemas = from_mcp_tools([t for t in tools if isinstance(t, Mapping)])
        except GuardError as exc:
            self._warn(f"carbguard: warning: tools/list answer not understood: {exc}")
            return
        for schema in schemas:
            self.tools[schema.name] = schema
            if self.session.guard.policy.tool(schema.name) is None and schema.name not in self._warned:
                self._warned.add(schema.name)
                if self.started is not None and self.started.done():
                    self._warn(f"carbguard: warning: server tool {schema.name!r} is not in the policy; refused")


def response_text(response: Any) -> tuple[str, str]:
    """Text and status of a JSON-RPC response to ``tools/call`` (an error response is an ``error`` result)."""
    if not isinstance(response, Mapping):
        return "", "error"
    if "error" in response:
        return json.dumps(response.get("error"), sort_keys=True, default=str), "error"
    return result_text(response.get("result"))


__all__ = ["GuardedRelay", "Request", "mcp_tools", "refusal_result", "refusal_text", "response_text", "result_text"]
