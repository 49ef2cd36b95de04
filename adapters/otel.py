"""OpenTelemetry export of decisions, as an audit sink (needs ``pip install 'carbguard[otel]'``).

::

    from guard.adapters.otel import OTelAuditSink, TeeSink
    from guard.audit import AuditLog
    g = Guard(policy, threshold=0.5, audit=TeeSink(AuditLog("audit.jsonl"), OTelAuditSink(policy)))

Each decision becomes one span ``execute_tool <tool>`` (kind INTERNAL, a child of whatever span is
current when the decision is made) with the GenAI semantic-convention tool attributes
(``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.tool.type``, ``gen_ai.conversation.id`` = the session) and ``carbguard.verdict``,
``.reason``, ``.score``, ``.threshold``, ``.artifact_id``, ``.features`` (the names that fired),
``.selected``, ``.proposal_index``, ``.latency_us``; and one increment of the counter
``carbguard.decisions`` with verdict, reason and tool.  The span covers the decision itself
(``latency_us`` before the entry was built), not the tool's run.

It reads only the audit entry, which the core has already redacted (argument values hashed, call
ids scrubbed of values the episode read); a tool name the policy does not know (which the model
chose, so it may carry data) is exported as its hash on spans and as ``<unknown>`` on the counter.
Arguments, messages and results are never exported.  Nothing is exported unless this sink is configured,
and then only to the tracer and meter providers given (default: the global ones, which are no-ops
until an OpenTelemetry SDK is set up).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from guard.policy import Policy
from guard.protocols import AuditSink

try:
    from opentelemetry import metrics, trace
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("guard.adapters.otel needs OpenTelemetry: pip install 'carbguard[otel]'") from exc

__all__ = ["OTelAuditSink", "TeeSink", "span_attributes"]

SCOPE = "carbguard"
COUNTER = "carbguard.decisions"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if value in ("inf", "-inf"):
        return float(value)
    return None


def _tool_name(entry: Mapping[str, Any], policy: Policy) -> str | None:
    """The tool's name when the policy knows it, else None."""
    tool = entry.get("tool")
    return tool if isinstance(tool, str) and policy.tool(tool) is not None else None


def _hashed(value: Any) -> str:
    return "sha256:" + hashlib.sha256(str(value).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def span_attributes(entry: Mapping[str, Any], policy: Policy) -> dict[str, Any]:
    """The span attributes of one audit entry (no argument values, messages, results or unknown tool names)."""
    known = _tool_name(entry, policy)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": known if known is not None else _hashed(entry.get("tool", "")),
        "gen_ai.tool.call.id": str(entry.get("call_id", "")),
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": str(entry.get("session", "")),
        "carbguard.verdict": str(entry.get("verdict", "")),
        "carbguard.reason": str(entry.get("reason", "")),
        "carbguard.features": sorted(str(k) for k, on in (entry.get("features") or {}).items() if on),
        "carbguard.selected": [int(i) for i in entry.get("selected") or ()],
    }
    for key, name in (("score", "score"), ("threshold", "threshold"), ("latency_us", "latency_us")):
        number = _number(entry.get(key))
        if number is not None:
            attrs[f"carbguard.{name}"] = number
    if isinstance(entry.get("proposal_index"), int):
        attrs["carbguard.proposal_index"] = entry["proposal_index"]
    if entry.get("artifact") is not None:
        attrs["carbguard.artifact_id"] = str(entry["artifact"])
    if entry.get("error"):
        attrs["error.type"] = "carbguard.internal_error"
    return attrs


class OTelAuditSink:
    """Writes each audit entry as a span and a verdict count; raises nothing the OpenTelemetry API does not."""

    def __init__(self, policy: Policy, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from guard import __version__

        if not isinstance(policy, Policy):
            raise TypeError(
                f"OTelAuditSink needs the guard's Policy (to know its tool names), got {type(policy).__name__}"
            )
        self.policy = policy
        self._tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, __version__, meter_provider=meter_provider)
        self._decisions = meter.create_counter(
            COUNTER, unit="{decision}", description="Decisions of the carbguard gate, by verdict, reason and tool."
        )

    def write(self, entry: Mapping[str, Any]) -> None:
        """Export one (already redacted) audit entry."""
        attrs = span_attributes(entry, self.policy)
        end = _nanos(entry.get("ts"))
        latency = _number(entry.get("latency_us")) or 0.0
        start = None if end is None else end - int(latency * 1000)
        span = self._tracer.start_span(
            f"execute_tool {attrs['gen_ai.tool.name']}",
            kind=trace.SpanKind.INTERNAL,
            attributes=attrs,
            start_time=start,
        )
        if entry.get("error"):
            span.set_status(trace.Status(trace.StatusCode.ERROR, "carbguard internal error (fail closed)"))
        span.end(end_time=end)
        self._decisions.add(
            1,
            {
                "carbguard.verdict": attrs["carbguard.verdict"],
                "carbguard.reason": attrs["carbguard.reason"],
                "gen_ai.tool.name": _tool_name(entry, self.policy) or "<unknown>",
            },
        )


def _nanos(ts: Any) -> int | None:
    number = _number(ts)
    return None if number is None else int(number * 1e9)


class TeeSink:
    """Writes each entry to every sink in order; the first failure raises (the decision then fails closed)."""

    def __init__(self, *sinks: AuditSink) -> None:
        if not sinks:
            raise ValueError("TeeSink needs at least one sink")
        self.sinks: Sequence[AuditSink] = sinks

    def write(self, entry: Mapping[str, Any]) -> None:
        """Hand ``entry`` to each sink (a shallow copy each)."""
        for sink in self.sinks:
            sink.write(dict(entry))
