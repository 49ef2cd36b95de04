"""OpenTelemetry GenAI spans exported as JSON → ``carbguard-episodes/1`` episode objects.

Input: OTLP JSON (``{"resourceSpans": [...]}``, as the collector's file exporter writes it, one
request a line or one file) or the SDK's console-exporter span objects (a list, or ``{"spans":
[...]}``).  Spans are grouped into one episode per ``gen_ai.conversation.id`` (else per trace) and
ordered by start time.  Semantic conventions used:

- tool calls: spans with ``gen_ai.operation.name = execute_tool`` → a proposal
  (``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.id``; the span id when
  the call id is absent) followed by its result (``gen_ai.tool.call.result``; status ``error`` when
  the span's status is ERROR or ``error.type`` is set);
- user turns: ``role: user`` messages of ``gen_ai.input.messages`` (each span repeats the history,
  so only user messages beyond those already seen are new);
- the final answer: the text of the last ``gen_ai.output.messages`` when no tool call follows it.

Arguments and results are recorded only when the instrumentation captures content; an
``execute_tool`` span without them is an error (the episode could not be replayed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from guard.corpora._writing import EpisodeBuilder, parse_arguments, read_json_items, text_of
from guard.errors import CorpusError
from guard.jsonio import loads_strict


@dataclass(frozen=True)
class Span:
    """The parts of a span the conversion reads."""

    trace_id: str
    span_id: str
    start: int
    order: int
    attributes: dict[str, Any]
    error: bool
    where: str


def _otlp_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [_otlp_value(v) for v in value["arrayValue"].get("values", [])]
    return None


def _attributes(raw: Any, at: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, list):
        return {a["key"]: _otlp_value(a.get("value")) for a in raw if isinstance(a, dict) and "key" in a}
    if raw is None:
        return {}
    raise CorpusError(f"{at}: attributes must be an object or an OTLP key/value list")


def _start(value: Any, at: str) -> int:
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    if isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise CorpusError(f"{at}: start time {value!r} is neither nanoseconds nor ISO 8601") from None
        return int(stamp.timestamp() * 1_000_000) * 1000
    raise CorpusError(f"{at}: span has no start time")


def _span(raw: Any, at: str, order: int) -> Span:
    if not isinstance(raw, dict):
        raise CorpusError(f"{at}: a span must be an object")
    context: dict[str, Any] = raw["context"] if isinstance(raw.get("context"), dict) else {}
    trace_id = raw.get("traceId") or context.get("trace_id")
    span_id = raw.get("spanId") or context.get("span_id") or f"s{order}"
    if not isinstance(trace_id, str) or not trace_id:
        raise CorpusError(f"{at}: span has no trace id")
    status: dict[str, Any] = raw["status"] if isinstance(raw.get("status"), dict) else {}
    code = status.get("code", status.get("status_code"))
    error = code in (2, "2", "STATUS_CODE_ERROR", "ERROR")
    start = _start(raw.get("startTimeUnixNano", raw.get("start_time")), at)
    return Span(trace_id, str(span_id), start, order, _attributes(raw.get("attributes"), at), error, at)


def read_spans(path: str | Path) -> list[Span]:
    """Every span of an OTLP-JSON or console-exporter file."""
    spans: list[Span] = []
    for where, value in read_json_items(path):
        for at, raw in _raw_spans(value, where):
            spans.append(_span(raw, at, len(spans)))
    if not spans:
        raise CorpusError(f"{path}: no spans found (expected OTLP JSON or a list of exported spans)")
    return spans


def _raw_spans(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and "resourceSpans" in value:
        for i, resource in enumerate(value["resourceSpans"] or []):
            for j, scope in enumerate(resource.get("scopeSpans", []) or []):
                for k, span in enumerate(scope.get("spans", []) or []):
                    yield f"{where}: resourceSpans[{i}].scopeSpans[{j}].spans[{k}]", span
    elif isinstance(value, dict) and isinstance(value.get("spans"), list):
        yield from ((f"{where}: spans[{k}]", s) for k, s in enumerate(value["spans"]))
    elif isinstance(value, list):
        for k, item in enumerate(value):
            yield from (
                _raw_spans(item, f"{where}[{k}]")
                if isinstance(item, dict) and "resourceSpans" in item
                else ((f"{where}[{k}]", item),)
            )
    elif isinstance(value, dict):
        yield where, value
    else:
        raise CorpusError(f"{where}: expected OTLP JSON, a span object or a list of spans")


def _messages(value: Any, at: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if isinstance(value, str):
        value = loads_strict(value, f"{at}: messages attribute")
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise CorpusError(f"{at}: messages attribute must be a JSON list of message objects")
    return value


def _message_text(message: dict[str, Any], at: str) -> str:
    parts = message.get("parts")
    if isinstance(parts, list):
        return text_of([p for p in parts if isinstance(p, dict) and p.get("type", "text") == "text"], at)
    return text_of(message.get("content"), at)


def _has_tool_call(message: dict[str, Any]) -> bool:
    parts = message.get("parts")
    return bool(message.get("tool_calls")) or (
        isinstance(parts, list) and any(isinstance(p, dict) and p.get("type") == "tool_call" for p in parts)
    )


def _result_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def convert_spans(spans: list[Span], where: str) -> EpisodeBuilder:
    """The records of one conversation's spans (in start order)."""
    builder = EpisodeBuilder(where)
    users_seen = 0
    final: tuple[int, str] | None = None
    for span in sorted(spans, key=lambda s: (s.start, s.order)):
        attrs = span.attributes
        if attrs.get("gen_ai.operation.name") == "execute_tool":
            _tool_span(builder, span)
            final = None
            continue
        users = [m for m in _messages(attrs.get("gen_ai.input.messages"), span.where) if m.get("role") == "user"]
        for message in users[users_seen:]:
            builder.user(_message_text(message, span.where))
        users_seen = max(users_seen, len(users))
        outputs = _messages(attrs.get("gen_ai.output.messages"), span.where)
        answers = [m for m in outputs if m.get("role", "assistant") == "assistant"]
        if answers and not any(_has_tool_call(m) for m in answers):
            final = (span.order, "\n".join(_message_text(m, span.where) for m in answers))
    if final is not None:
        builder.final(final[1])
    return builder


def _tool_span(builder: EpisodeBuilder, span: Span) -> None:
    attrs, at = span.attributes, span.where
    if "gen_ai.tool.call.arguments" not in attrs:
        raise CorpusError(f"{at}: execute_tool span without gen_ai.tool.call.arguments (enable content capture)")
    call_id = attrs.get("gen_ai.tool.call.id") or f"span:{span.span_id}"
    args = parse_arguments(attrs["gen_ai.tool.call.arguments"], at)
    builder.proposal(attrs.get("gen_ai.tool.name"), args, call_id, at)
    error = span.error or bool(attrs.get("error.type"))
    if "gen_ai.tool.call.result" in attrs:
        text = _result_text(attrs["gen_ai.tool.call.result"])
    elif error:
        text = str(attrs.get("error.type") or "error")
    else:
        raise CorpusError(f"{at}: execute_tool span without gen_ai.tool.call.result (enable content capture)")
    builder.result(call_id, text, "error" if error else "ok", at)


def _model(spans: list[Span]) -> str:
    for span in spans:
        for key in ("gen_ai.response.model", "gen_ai.request.model"):
            if isinstance(span.attributes.get(key), str):
                return str(span.attributes[key])
    return ""


def convert_otel(path: str | Path) -> Iterator[dict[str, Any]]:
    """Episode objects, one per conversation (``gen_ai.conversation.id``, else trace id), in first-span order."""
    groups: dict[str, list[Span]] = {}
    for span in read_spans(path):
        key = span.attributes.get("gen_ai.conversation.id") or span.trace_id
        groups.setdefault(str(key), []).append(span)
    for key, spans in groups.items():
        trace_ids = sorted({s.trace_id for s in spans})
        meta = {"model": _model(spans), "tags": {"trace_ids": trace_ids}}
        yield convert_spans(spans, f"{path} (conversation {key})").episode(key, meta)


__all__ = ["Span", "convert_otel", "convert_spans", "read_spans"]
