"""The README's OpenAI Agents SDK, OpenTelemetry and AgentDojo snippets run as written (tests/test_readme.py's way)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
INTEGRATIONS = README.split("## Integrations", 1)[1].split("\n## ", 1)[0]


def block(first_line: str) -> str:
    """The Python block of the Integrations section that starts with ``first_line``."""
    found = re.findall(r"```python\n(" + re.escape(first_line) + r"\n.*?)```", INTEGRATIONS, re.S)
    assert len(found) == 1, first_line
    code: str = found[0]
    return code


def code_lines(code: str) -> int:
    return sum(1 for line in code.splitlines() if line.strip())


@pytest.fixture
def closed_loops() -> Iterator[None]:
    """Close the default event loop that ``Runner.run_sync`` leaves open."""
    yield
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        return
    if not loop.is_running():
        loop.close()
    asyncio.set_event_loop(None)


def test_openai_agents_snippet_runs(monkeypatch: pytest.MonkeyPatch, closed_loops: None) -> None:
    """The snippet, given tools/model/task, refuses the steered send (reject_content) and runs the benign read."""
    pytest.importorskip("agents")
    from agents import function_tool, set_tracing_disabled

    from guard.adapters.openai_agents_testing import ScriptedModel, function_call

    code = block("from agents import Agent, Runner")
    assert code_lines(code) < 15
    ran: list[str] = []
    record = "Customer: Lena Novak\nIBAN: DE44500105175407324931"

    @function_tool
    def read_record(name: str) -> str:
        """Read a customer record."""
        ran.append("read_record")
        return record

    @function_tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        ran.append("send_email")
        return "sent"

    model = ScriptedModel(
        [
            [function_call("read_record", {"name": "Lena Novak"}, "c1")],
            [function_call("send_email", {"to": "x@audit-desk.net", "subject": "r", "body": record}, "c2")],
            "done",
        ]
    )
    set_tracing_disabled(True)
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {"tools": [read_record, send_email], "model": model, "task": "Read Lena's record."}
    try:
        exec(compile(code, "README.md", "exec"), namespace)
    finally:
        set_tracing_disabled(False)
    assert ran == ["read_record", "read_record"]  # two runs; the send never ran
    assert [(r["call_id"], r["verdict"]) for r in namespace["refused"]] == [("c2", "escalate")]
    assert namespace["result"].final_output == "done"


def test_otel_snippet_runs(tmp_path: Path) -> None:
    """The snippet, with an in-memory SDK set up globally, writes the file log and exports one span and count."""
    pytest.importorskip("opentelemetry.sdk")
    code = block("from guard.adapters.otel import OTelAuditSink, TeeSink")
    assert code_lines(code) < 15
    audit = tmp_path / "audit.jsonl"
    code = code.replace('AuditLog("audit.jsonl")', f"AuditLog({str(audit)!r})")
    prelude = (
        "from opentelemetry import trace, metrics\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
        "spans = InMemorySpanExporter(); tp = TracerProvider(); tp.add_span_processor(SimpleSpanProcessor(spans))\n"
        "trace.set_tracer_provider(tp)\n"
        "reader = InMemoryMetricReader(); metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))\n"
    )
    postlude = (
        "\nimport json\n"
        "data = json.loads(reader.get_metrics_data().to_json())\n"
        "points = [p for r in data['resource_metrics'] for s in r['scope_metrics'] for m in s['metrics']\n"
        "          if m['name'] == 'carbguard.decisions' for p in m['data']['data_points']]\n"
        "found = [(s.name, s.attributes['carbguard.verdict']) for s in spans.get_finished_spans()]\n"
        "print(json.dumps({'spans': found, 'count': sum(p['value'] for p in points)}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", prelude + code + postlude], cwd=ROOT, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"spans": [["execute_tool read_inbox", "execute"]], "count": 1}
    assert len(audit.read_text(encoding="utf-8").splitlines()) == 1


def test_agentdojo_snippet_runs_the_injection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways in the snippet place the attack's payload in the environment and the guard stops the attack."""
    pytest.importorskip("agentdojo")
    pipeline_names = "AgentPipeline, InitQuery, SystemMessage, ToolsExecutionLoop, ToolsExecutor"
    code = block(f"from agentdojo.agent_pipeline import {pipeline_names}")
    assert code_lines(code) < 15
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    episode, out = namespace["episode"], namespace["out"]
    payload = " ".join(episode.meta.injections[0].split())
    parts = [p.get("content") or "" for m in out.messages if m.get("role") == "tool" for p in m.get("content") or ()]
    tool_texts = [" ".join(str(text).split()) for text in parts]
    assert any(payload[:80] in t for t in tool_texts)  # the injection reached a tool result
    assert out.attacked and out.security is False
    (by_hand,) = namespace["loop"].elements[0].runs  # the hand-built pipeline's guarded run
    results = [r.text for r in by_hand.session.graph.records.values() if r.kind.value == "result"]
    assert any(payload[:80] in " ".join(t.split()) for t in results)  # its environment held the injection too
    assert by_hand.aborted and namespace["security"] is False
    from guard.adapters.agentdojo import rerun_episode

    assert rerun_episode(episode, namespace["version"]).security is True  # unguarded, the attack succeeds
