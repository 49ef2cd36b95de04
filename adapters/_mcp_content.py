"""What the MCP proxy observes of everything the server sends the client besides tool calls' answers.

Every server-to-client message that can carry content is observed before the client gets it:
answers to ``resources/read`` and ``prompts/get`` with the kind the policy's ``mcp`` section gives
the resource or prompt; listings, completions, ``initialize`` instructions, notifications, server
requests and answers of methods the proxy does not interpret as the ``mcp.messages`` kinds (their
canonical JSON).  A content item is observed as the client gets it: its ``text`` as text, the rest
of it (type, annotations, ``_meta``, uri, name, title, mime type, base64 data, unknown fields) as
canonical JSON — never as nothing.  Nothing here is a user turn (docs/security.md#the-user-channel):
a ``role: user`` message of a prompt or a sampling request is the server's text, observed as
content.  Any observation that fails raises :class:`~guard.errors.InputError`; the relay then
withholds the message.  No ``mcp`` import here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from guard.errors import InputError
from guard.runtime import Session

Item = tuple[str, tuple[str, ...], str]  # (text, source kinds, origin)
QUIET_SERVER_REQUESTS = ("ping", "roots/list")  # they carry nothing to the model


def canonical(value: Any) -> str:
    """The canonical JSON of a parsed JSON value (sorted keys, Unicode kept)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def part_texts(item: Any) -> list[str]:
    """What the client is given of one content item: its text (and embedded resource text) as text, the rest as JSON.

    A non-object item is its JSON; an object without text is its whole JSON (image and audio data
    included as their base64 form); a text item with nothing but ``type`` besides is its text alone.
    """
    if not isinstance(item, Mapping):
        return [canonical(item)]
    texts: list[str] = []
    rest = dict(item)
    if isinstance(rest.get("text"), str):
        texts.append(rest.pop("text"))
    resource = rest.get("resource")
    if isinstance(resource, Mapping) and isinstance(resource.get("text"), str):
        texts.append(resource["text"])
        rest["resource"] = {k: v for k, v in resource.items() if k != "text"}
    if set(rest) - {"type"} or not texts:
        texts.append(canonical(rest))
    return texts


def result_text(result: Any) -> tuple[str, str]:
    """Text and status of a ``tools/call`` result: every content item (see :func:`part_texts`), structured content,
    and any other field of the result (``_meta``, unknown keys) as JSON."""
    if not isinstance(result, Mapping):
        return canonical(result), "error"
    parts: list[str] = []
    content = result.get("content")
    if isinstance(content, list):
        for item in content:
            parts.extend(part_texts(item))
    elif content is not None:
        parts.append(canonical(content))
    structured = result.get("structuredContent")
    if structured is not None:
        dumped = canonical(structured)
        if dumped not in parts:
            parts.append(dumped)
    others = {k: v for k, v in result.items() if k not in ("content", "structuredContent", "isError")}
    if others:
        parts.append(canonical(others))
    return "\n".join(parts), "error" if result.get("isError") is True else "ok"


class ContentObserver:
    """Classifies and observes the server's content for one guard session (the policy's ``mcp`` section)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.spec = session.guard.policy.mcp

    # ------------------------------------------------------------------ client requests

    def refusal(self, method: Any, params: Any) -> str | None:
        """Why a client request is not forwarded (a read of an undeclared resource or prompt), or None."""
        if method not in ("resources/read", "prompts/get"):
            return None
        key = "uri" if method == "resources/read" else "name"
        value = params.get(key) if isinstance(params, Mapping) else None
        if not isinstance(value, str):
            return f"carbguard: {method} needs a string {key!r}; refused"
        declared = self.spec.resource_kind(value) if key == "uri" else self.spec.prompt_kind(value)
        if declared is None and self.spec.undeclared == "refuse":
            section = "mcp.resources" if key == "uri" else "mcp.prompts"
            verdict = self.session.guard.policy.on_unknown.value
            return (
                f"carbguard: {method} of undeclared {key} {value[:200]!r} refused ({verdict}: the policy's "
                f"on_unknown); declare it under {section} with its kind"
            )
        return None

    # ------------------------------------------------------------------ server messages

    def response(self, method: str, params: Any, response: Mapping[str, Any]) -> None:
        """Observe the server's answer to a client request of ``method`` (not tools/call: see observe_result)."""
        params = params if isinstance(params, Mapping) else {}
        kinds, origin = self._request_channel(method, params)
        if "error" in response or "result" not in response:
            answer = {k: v for k, v in response.items() if k not in ("jsonrpc", "id")}
            self.observe([(canonical(answer), kinds, origin)])
            return
        result = response["result"]
        if not isinstance(result, Mapping):
            self.observe([(canonical(result), kinds, origin)])
            return
        handlers: dict[str, tuple[Any, str]] = {
            "resources/read": (self._read, "contents"),
            "prompts/get": (self._prompt, "messages"),
            "resources/list": (self._listing("resources", "uri", "resource"), "resources"),
            "resources/templates/list": (
                self._listing("resourceTemplates", "uriTemplate", "resource"),
                "resourceTemplates",
            ),
            "prompts/list": (self._listing("prompts", "name", "prompt"), "prompts"),
        }
        handler, field = handlers.get(method, (None, ""))
        items: list[Item] = handler(result, kinds, origin) if handler is not None else []
        rest = {k: v for k, v in result.items() if k != field or not isinstance(v, list)}
        if rest:
            items.append((canonical(rest), kinds, origin))
        self.observe(items)

    def notification(self, method: str, params: Any) -> None:
        """Observe a server notification's parameters (nothing to observe when it has none)."""
        if params is None or params == {}:
            return
        kinds: tuple[str, ...] = self.spec.messages
        if method == "notifications/resources/updated" and isinstance(params, Mapping):
            kinds = self._kinds(self._resource(params.get("uri")))
        self.observe([(canonical(params), kinds, f"mcp:notification:{method}")])

    def server_request(self, method: str, params: Any) -> str | None:
        """Observe a server-to-client request, or say why it is refused: ``mcp.server_requests: refuse``, or a
        sampling request that asks the client to add its own context (``includeContext`` other than ``none``:
        the session's data would go back to the server in the answer, decided by nobody)."""
        if method not in QUIET_SERVER_REQUESTS and self.spec.server_requests == "refuse":
            return (
                f"carbguard: server request {method[:100]!r} refused: the policy's mcp.server_requests is refuse "
                "(its content would reach the model unobserved)"
            )
        context = params.get("includeContext", "none") if isinstance(params, Mapping) else "none"
        if method == "sampling/createMessage" and context != "none":
            return (
                f"carbguard: sampling/createMessage with includeContext {canonical(context)[:40]} refused: the "
                "client's context would go to the server in the answer without a decision; ask with includeContext none"
            )
        if params is not None and params != {}:
            text = canonical({"method": method, "params": params})
            self.observe([(text, self.spec.messages, f"mcp:request:{method}")])
        return None

    def client_answer(self, method: str, answer: Mapping[str, Any]) -> None:
        """Observe the client's answer to a server request of ``method`` before it goes to the server: a sampling
        result is text a model wrote from the server's messages, an elicitation result may hold the server's own
        defaults, so neither is a user turn (docs/security.md#the-user-channel); both are the ``messages`` kinds."""
        body = {k: v for k, v in answer.items() if k not in ("jsonrpc", "id")}
        if body:
            self.observe([(canonical(body), self.spec.messages, f"mcp:answer:{method[:100]}")])

    # ------------------------------------------------------------------ helpers

    def _kinds(self, *declared: str | None) -> tuple[str, ...]:
        found = tuple(dict.fromkeys(k for k in declared if k is not None))
        return found or self.spec.messages

    def _resource(self, uri: Any) -> str | None:
        return self.spec.resource_kind(uri) if isinstance(uri, str) else None

    def _undeclared(self) -> str | None:
        return None if self.spec.undeclared == "refuse" else self.spec.undeclared

    def _request_channel(self, method: str, params: Mapping[str, Any]) -> tuple[tuple[str, ...], str]:
        if method == "resources/read":
            uri = params.get("uri")
            return self._kinds(self._resource(uri) or self._undeclared()), f"mcp:resource:{uri}"
        if method == "prompts/get":
            name = params.get("name")
            declared = self.spec.prompt_kind(name) if isinstance(name, str) else None
            return self._kinds(declared or self._undeclared()), f"mcp:prompt:{name}"
        if method == "completion/complete":
            ref = params.get("ref")
            ref = ref if isinstance(ref, Mapping) else {}
            name = ref.get("name")
            declared = self.spec.prompt_kind(name) if isinstance(name, str) else None
            return self._kinds(self._resource(ref.get("uri")), declared), f"mcp:result:{method}"
        return self.spec.messages, f"mcp:result:{method}"

    def _read(self, result: Mapping[str, Any], kinds: tuple[str, ...], origin: str) -> list[Item]:
        items: list[Item] = []
        contents = result.get("contents")
        for item in contents if isinstance(contents, list) else ():
            own = self._resource(item.get("uri")) if isinstance(item, Mapping) else None
            both = tuple(dict.fromkeys((*kinds, *(() if own is None else (own,)))))
            items.extend((text, both, origin) for text in part_texts(item))
        return items

    def _prompt(self, result: Mapping[str, Any], kinds: tuple[str, ...], origin: str) -> list[Item]:
        items: list[Item] = []
        messages = result.get("messages")
        for message in messages if isinstance(messages, list) else ():
            if isinstance(message, Mapping):
                items.extend((text, kinds, origin) for text in part_texts(message.get("content")))
                rest = {k: v for k, v in message.items() if k != "content"}
                if set(rest) - {"role"}:
                    items.append((canonical(rest), kinds, origin))
            else:
                items.append((canonical(message), kinds, origin))
        return items

    def _listing(self, field: str, key: str, what: str) -> Any:
        def listing(result: Mapping[str, Any], kinds: tuple[str, ...], origin: str) -> list[Item]:
            entries = result.get(field)
            items: list[Item] = []
            for entry in entries if isinstance(entries, list) else ():
                value = entry.get(key) if isinstance(entry, Mapping) else None
                declared: str | None = None
                if isinstance(value, str):
                    declared = self.spec.resource_kind(value) if what == "resource" else self.spec.prompt_kind(value)
                items.append((canonical(entry), self._kinds(declared), f"mcp:{what}:{value}"))
            return items

        return listing

    def observe(self, items: Iterable[Item]) -> None:
        """Observe each (text, kinds, origin): one content record per kind; empty texts carry nothing."""
        for text, kinds, origin in items:
            if not text:
                continue
            for kind in kinds:
                self.session.observe_content(text, kind, origin[:500])


def observe_all(observer: ContentObserver, method: str, params: Any, response: Any) -> None:
    """:meth:`ContentObserver.response` for any parsed value (a non-object answer is observed as its JSON)."""
    if not isinstance(response, Mapping):
        observer.observe([(canonical(response), observer.spec.messages, f"mcp:result:{method}")])
        return
    observer.response(method, params, response)


__all__ = ["ContentObserver", "InputError", "canonical", "observe_all", "part_texts", "result_text"]
