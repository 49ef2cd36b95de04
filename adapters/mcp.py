"""carbguard for the Model Context Protocol: a guard proxy between any MCP client and server, and a guarded client.

* :func:`serve_stdio` (``carbguard mcp-proxy --policy P -- <server command ...>``) speaks MCP over
  stdio to the client and to the real server it starts; every ``tools/call`` is decided, probed when
  the guard asks, authorized and forwarded with the decided arguments, or answered with a tool
  result ``isError: true`` naming the verdict and reason (the server never sees it).
* :func:`serve_http` (``carbguard mcp-proxy --http HOST:PORT ...``) is the same proxy over
  streamable HTTP: one server process and one guard session per MCP session.
* :class:`GuardedClientSession` wraps an ``mcp.ClientSession`` for programs that embed a client:
  ``call_tool`` is decided and bound the same way; ``read_resource``, ``get_prompt``, the listings
  and ``complete`` are observed (a read of an undeclared resource or prompt raises InputError); its
  sampling and elicitation callbacks answer the server as the policy's ``mcp.server_requests`` says.
* :func:`list_server_tools` reads a server's ``tools/list`` (for ``carbguard policy init --from-mcp``).

The user channel (docs/security.md#the-user-channel): MCP has none from the server side.  Nothing
the server sends is a user turn — a prompt's or a sampling request's ``role: user`` messages
included; they are observed as content of the kind the policy's ``mcp`` section gives.  Only a
program that embeds a client records its human's own words, with ``session.observe_user``.

The relay core imports nothing from ``mcp``; the SDK (``pip install 'carbguard[mcp]'``) is needed
only by the guarded client and :func:`list_server_tools`.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from guard.adapters._lifecycle import check_tools
from guard.adapters._mcp_content import ContentObserver, observe_all
from guard.adapters._mcp_http import HttpProxy, serve_http
from guard.adapters._mcp_relay import (
    NOT_OBSERVED,
    REFUSED,
    GuardedRelay,
    Request,
    mcp_tools,
    refusal_result,
    refusal_text,
    result_text,
)
from guard.adapters._mcp_stdio import serve_stdio
from guard.adapters.flow import Call, Ran, aguarded
from guard.decision import Decision
from guard.errors import InputError
from guard.policy.tools import ToolSchema, from_mcp_tools
from guard.runtime import Session

log = logging.getLogger("guard.adapters.mcp")
_CALLBACKS = (("_sampling_callback", "sampling/createMessage"), ("_elicitation_callback", "elicitation/create"))
_HINT = "pip install 'carbguard[mcp]'"


def _require_mcp() -> Any:
    try:
        import mcp
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(f"this part of guard.adapters.mcp needs the mcp SDK: {_HINT}") from exc
    return mcp


def _wire(model: Any) -> Any:
    """The JSON wire form of an SDK result model."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


class GuardedClientSession:
    """An ``mcp.ClientSession`` whose ``call_tool`` goes through a guard session.

    Every other attribute is the wrapped session's.  ``call_tool`` decides the call; on ``probe`` it
    runs the probe calls through the same client and decides again; on ``execute`` it calls the
    server with the arguments :meth:`Session.authorize` returns and observes the result; otherwise
    it returns a ``CallToolResult`` with ``is_error=True`` and never calls the server.
    """

    def __init__(self, client: Any, session: Session) -> None:
        _require_mcp()
        self._client = client
        self.session = session
        self._ids = itertools.count(1)
        self._prefix = f"mcp-{uuid.uuid4().hex[:8]}-"
        self.last_decision: Decision | None = None
        self._content = ContentObserver(session)
        for name, method in _CALLBACKS:
            self._guard_callback(name, method)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _guard_callback(self, name: str, method: str) -> None:
        """Put the policy's ``mcp.server_requests`` in front of the wrapped session's sampling or elicitation
        callback, as the proxy does: refused (``refuse``), or the request and the answer observed (``observe``,
        a sampling request for the client's context refused).  The SDK's own default (it refuses) is left as it is,
        so the session advertises no capability it did not have; a client without the attribute has none to guard.
        """
        from mcp.client import session as sdk

        original = getattr(self._client, name, None)
        if original is None or original is getattr(sdk, f"_default_{name.strip('_')}", None):
            return
        types = _require_mcp().types

        async def guarded_callback(context: Any, params: Any) -> Any:
            try:
                refusal = self._content.server_request(method, _wire(params))
            except InputError as exc:
                refusal = f"carbguard: server request {method!r} not observed ({exc}); refused"
            if refusal is not None:
                log.warning(refusal)
                return types.ErrorData(code=REFUSED, message=refusal)
            answer = await original(context, params)
            try:
                self._content.client_answer(
                    method, {"error" if isinstance(answer, types.ErrorData) else "result": _wire(answer)}
                )
            except InputError as exc:
                return types.ErrorData(
                    code=NOT_OBSERVED, message=f"carbguard: the client's answer was not observed ({exc})"
                )
            return answer

        setattr(self._client, name, guarded_callback)

    async def initialize(self, *args: Any, **kwargs: Any) -> Any:
        """``initialize``, then the server's tools against the policy: every mismatch logged as a warning."""
        result = await self._client.initialize(*args, **kwargs)
        try:
            await self.check_tools()
        except Exception as exc:  # noqa: BLE001 - a failed check is a warning; calls are still decided one by one
            log.warning("carbguard: tools/list at start did not complete: %s: %s", type(exc).__name__, exc)
        return result

    async def check_tools(self) -> list[str]:
        """List the server's tools (every page) and return every mismatch with the policy (each logged)."""
        tools: list[Any] = []
        cursor: str | None = None
        types = _require_mcp().types
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._client.list_tools(params=params)
            tools.extend(_wire(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return check_tools(self.session.guard.policy, from_mcp_tools(tools), log.warning)

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None, **kwargs: Any
    ) -> Any:
        """Decide, then run (with the decided arguments) or refuse one tool call; returns a ``CallToolResult``."""
        args: Any = {} if arguments is None else arguments
        cid = call_id if call_id is not None else f"{self._prefix}{next(self._ids)}"
        call = Call(name, args, cid)

        async def run(request: Request) -> Any:
            """A probe is called as the guard asks; the client's call with the caller's extra arguments."""
            return await self._client.call_tool(**request.params, **({} if request.probe else kwargs))

        tools = mcp_tools(log.warning, lambda result: result_text(_wire(result)), call)
        outcome = await aguarded(self.session, call, tools, run)
        if isinstance(outcome, Ran):
            self.last_decision = outcome.decision
            return outcome.output
        self.last_decision = outcome.gate or outcome.decision  # the decision, not a later binding refusal
        return _require_mcp().types.CallToolResult.model_validate(refusal_result(outcome.decision))

    async def read_resource(self, uri: Any, *args: Any, **kwargs: Any) -> Any:
        """``read_resource``, observed as the kind the policy's ``mcp.resources`` gives ``uri``."""
        return await self._observed("resources/read", {"uri": str(uri)}, "read_resource", uri, *args, **kwargs)

    async def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """``get_prompt``, observed as the kind the policy's ``mcp.prompts`` gives ``name``."""
        params = {"name": name, "arguments": dict(arguments or {})}
        return await self._observed("prompts/get", params, "get_prompt", name, arguments, **kwargs)

    async def list_resources(self, *args: Any, **kwargs: Any) -> Any:
        """``list_resources``, every entry observed."""
        return await self._observed("resources/list", {}, "list_resources", *args, **kwargs)

    async def list_resource_templates(self, *args: Any, **kwargs: Any) -> Any:
        """``list_resource_templates``, every entry observed."""
        return await self._observed("resources/templates/list", {}, "list_resource_templates", *args, **kwargs)

    async def list_prompts(self, *args: Any, **kwargs: Any) -> Any:
        """``list_prompts``, every entry observed."""
        return await self._observed("prompts/list", {}, "list_prompts", *args, **kwargs)

    async def list_tools(self, *args: Any, **kwargs: Any) -> Any:
        """``list_tools``, observed (tool descriptions reach the model)."""
        return await self._observed("tools/list", {}, "list_tools", *args, **kwargs)

    async def complete(self, ref: Any, *args: Any, **kwargs: Any) -> Any:
        """``complete``, observed as the kind of the resource or prompt it completes for."""
        wire_ref = _wire(ref) if hasattr(ref, "model_dump") else ref
        return await self._observed("completion/complete", {"ref": wire_ref}, "complete", ref, *args, **kwargs)

    async def _observed(self, method: str, params: dict[str, Any], name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped session's ``name`` and observe its answer before returning it (InputError: not returned)."""
        refusal = self._content.refusal(method, params)
        if refusal is not None:
            raise InputError(refusal)
        try:
            result = await getattr(self._client, name)(*args, **kwargs)
        except Exception as exc:
            observe_all(self._content, method, params, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
            raise
        observe_all(self._content, method, params, {"result": _wire(result)})
        return result


async def list_server_tools(command: Sequence[str], env: Mapping[str, str] | None = None) -> list[ToolSchema]:
    """Start an MCP server over stdio, read its ``tools/list`` (every page), stop it."""
    mcp = _require_mcp()
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    if not command:
        raise InputError("no MCP server command given (put it after --)")
    params = StdioServerParameters(
        command=command[0], args=list(command[1:]), env=dict(os.environ if env is None else env)
    )
    tools: list[Any] = []
    async with stdio_client(params, errlog=sys.stderr) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        cursor: str | None = None
        while True:
            page = await client.list_tools(params=mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.extend(_wire(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
    return from_mcp_tools(tools, f"tools/list of {' '.join(command)}")


__all__ = [
    "GuardedClientSession",
    "GuardedRelay",
    "HttpProxy",
    "list_server_tools",
    "refusal_text",
    "serve_http",
    "serve_stdio",
]
