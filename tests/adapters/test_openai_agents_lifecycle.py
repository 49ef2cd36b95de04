"""OpenAI Agents SDK: every session a guarded run opens ends (one ``session_end``) on every exit path.

Without its ``session_end`` entry a run is invisible to ``carbguard monitor`` (docs/monitoring.md).
Each test reads an audit file and asserts exactly one ``session_end`` for the run's session, and
that the caller can reach the session (``result.carbguard_session`` / ``exc.carbguard_session``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    RunConfig,
    Tool,
    function_tool,
    input_guardrail,
)
from agents.models.interface import Model

from guard import Guard, InputError, load_policy
from guard.adapters.openai_agents import run, run_streamed, run_sync
from guard.adapters.openai_agents_testing import ScriptedModel, function_call
from guard.audit import read_entries
from guard.runtime import Session
from tests.adapters.mail_agent_data import POLICY, RECORD, TASK
from tests.adapters.openai_support import arun, decision_entries, quiet_tracing_and_close_loops, session_ends

NO_TRACE = RunConfig(tracing_disabled=True)
LEAK = {"to": "x@evil.example", "subject": "Record", "body": RECORD}

_quiet_tracing_and_close_loops = pytest.fixture(autouse=True)(quiet_tracing_and_close_loops)


@function_tool
def read_record(name: str) -> str:
    """Read a customer record."""
    return RECORD


@function_tool(needs_approval=True)
def send_email(to: str, subject: str, body: str) -> str:
    """Send an e-mail."""
    return f"sent to {to}"


TOOLS: list[Tool] = [read_record, send_email]


def make_guard(tmp_path: Path) -> Guard:
    return Guard(load_policy(POLICY), threshold=0.5, audit=tmp_path / "audit.jsonl")


def ends(tmp_path: Path, session: str = "s1") -> list[dict[str, Any]]:
    return [e for e in session_ends(read_entries(tmp_path / "audit.jsonl")) if e["session"] == session]


def agent(model: Model, **kwargs: Any) -> Agent[Any]:
    return Agent(name="mail", tools=TOOLS, model=model, **kwargs)


def reads_then(last: Any) -> ScriptedModel:
    return ScriptedModel([[function_call("read_record", {"name": "Lena Novak"}, "c1")], last])


class Failing(Model):
    """A model whose every call raises ``error`` (an outage, or the user's Ctrl-C while it waits)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error


class Waiting(Model):
    """A model that never answers (the run waits until it is cancelled)."""

    def __init__(self) -> None:
        self.called = asyncio.Event()

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        self.called.set()
        await asyncio.Event().wait()

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        self.called.set()
        await asyncio.Event().wait()
        yield None  # pragma: no cover - never reached


@pytest.mark.parametrize("use_async", [False, True])
def test_a_finished_run_ends_its_session_once(tmp_path: Path, use_async: bool) -> None:
    """A run to its final answer: one session_end (ended: final); the closed session is on the result.

    Catches run/run_sync that never close their session (no session_end; the monitor never sees the run).
    """
    guard, model = make_guard(tmp_path), reads_then("done")
    if use_async:
        result = arun(run(guard, agent(model), TASK, session_id="s1", run_config=NO_TRACE))
    else:
        result = run_sync(guard, agent(model), TASK, session_id="s1", run_config=NO_TRACE)
    assert [e["ended"] for e in ends(tmp_path)] == ["final"]
    session = result.carbguard_session
    assert isinstance(session, Session) and session.session_id == "s1"


def test_an_approval_interrupt_ends_the_session_at_the_interrupt(tmp_path: Path) -> None:
    """An interrupt for approval ends the run's session (a resume is a session or segment of its own).

    Catches a session left open at the interrupt (no session_end until some resume that may never come).
    """
    model = reads_then([function_call("send_email", LEAK, "c2")])
    result = run_sync(make_guard(tmp_path), agent(model), TASK, session_id="s1", run_config=NO_TRACE)
    assert result.interruptions
    assert [e["ended"] for e in ends(tmp_path)] == ["close"]
    assert result.carbguard_session.session_id == "s1"


@pytest.mark.parametrize("use_async", [False, True])
def test_a_model_error_ends_the_session_and_names_it_on_the_exception(tmp_path: Path, use_async: bool) -> None:
    """A model that raises: one session_end; the exception carries the session.

    Catches closing only on the normal path (an exception skips the close).
    """
    guard, model = make_guard(tmp_path), Failing(RuntimeError("model outage"))
    with pytest.raises(RuntimeError, match="model outage") as caught:
        if use_async:
            arun(run(guard, agent(model), TASK, session_id="s1", run_config=NO_TRACE))
        else:
            run_sync(guard, agent(model), TASK, session_id="s1", run_config=NO_TRACE)
    assert len(ends(tmp_path)) == 1
    assert caught.value.carbguard_session.session_id == "s1"  # type: ignore[attr-defined]


def test_max_turns_exceeded_ends_the_session(tmp_path: Path) -> None:
    """MaxTurnsExceeded after a decided call: one session_end, counting the decision.

    Catches a close that misses the SDK's own run errors.
    """
    model = ScriptedModel([[function_call("read_record", {"name": "Lena Novak"}, f"c{i}")] for i in range(5)])
    with pytest.raises(MaxTurnsExceeded):
        run_sync(make_guard(tmp_path), agent(model), TASK, session_id="s1", max_turns=1, run_config=NO_TRACE)
    (end,) = ends(tmp_path)
    assert end["proposals"] == 1 and end["ended"] == "close"


def test_an_input_guardrail_tripwire_ends_the_session(tmp_path: Path) -> None:
    """An input guardrail's tripwire: one session_end.

    Catches a close that misses a guardrail exception.
    """

    @input_guardrail
    def no_records(ctx: Any, who: Any, text: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info="blocked", tripwire_triggered=True)

    model = reads_then("done")
    with pytest.raises(InputGuardrailTripwireTriggered):
        run_sync(
            make_guard(tmp_path),
            agent(model, input_guardrails=[no_records]),
            TASK,
            session_id="s1",
            run_config=NO_TRACE,
        )
    assert len(ends(tmp_path)) == 1


def test_keyboard_interrupt_ends_the_session(tmp_path: Path) -> None:
    """Ctrl-C while the model is called (KeyboardInterrupt): one session_end, and the interrupt propagates.

    Catches ``except Exception`` cleanup (a BaseException skips it).
    """
    with pytest.raises(KeyboardInterrupt):
        run_sync(make_guard(tmp_path), agent(Failing(KeyboardInterrupt())), TASK, session_id="s1", run_config=NO_TRACE)
    assert len(ends(tmp_path)) == 1


def test_a_cancelled_task_ends_the_session(tmp_path: Path) -> None:
    """An asyncio task running ``run`` cancelled while the model works: one session_end.

    Catches a close that a CancelledError skips.
    """
    guard, model = make_guard(tmp_path), Waiting()

    async def main() -> None:
        task = asyncio.create_task(run(guard, agent(model), TASK, session_id="s1", run_config=NO_TRACE))
        await model.called.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    arun(main())
    assert len(ends(tmp_path)) == 1


def test_a_run_refused_before_the_model_ends_its_session(tmp_path: Path) -> None:
    """An input item the guard does not understand, after the session was opened: one session_end.

    Catches a refusal raised between opening the session and the run (the session would stay open).
    """
    items = [{"role": "user", "content": TASK}, {"type": "item_reference", "id": "msg_1"}]
    with pytest.raises(InputError) as caught:
        run_sync(make_guard(tmp_path), agent(reads_then("done")), items, session_id="s1", run_config=NO_TRACE)
    assert len(ends(tmp_path)) == 1 and caught.value.carbguard_session.session_id == "s1"  # type: ignore[attr-defined]


def test_a_streamed_run_ends_its_session_when_the_stream_does(tmp_path: Path) -> None:
    """run_streamed: the refused send is decided, and one session_end once the events are consumed.

    Catches a streamed run whose session is never closed (Runner.run_streamed returns before the run).
    """
    guard = make_guard(tmp_path)
    model = ScriptedModel(
        [[function_call("read_record", {"name": "Lena Novak"}, "c1")], [function_call("send_now", LEAK, "c2")], "done"]
    )
    plain = Agent(name="mail", tools=[read_record, _send_now], model=model)

    async def main() -> Any:
        result = run_streamed(guard, plain, TASK, session_id="s1", run_config=NO_TRACE)
        async for _ in result.stream_events():
            pass
        await asyncio.sleep(0)  # the task's done callback runs on the next loop step
        return result

    arun(main())
    assert [(e["call_id"], e["verdict"]) for e in decision_entries(read_entries(tmp_path / "audit.jsonl"))] == [
        ("c1", "execute"),
        ("c2", "escalate"),
    ]
    assert len(ends(tmp_path)) == 1


def test_a_cancelled_stream_ends_its_session(tmp_path: Path) -> None:
    """run_streamed then result.cancel() while the model works: one session_end.

    Catches a streamed session closed only after the last event (a cancelled stream has none).
    """
    guard, model = make_guard(tmp_path), Waiting()

    async def main() -> None:
        result = run_streamed(guard, agent(model), TASK, session_id="s1", run_config=NO_TRACE)
        await model.called.wait()
        result.cancel()
        async for _ in result.stream_events():
            pass
        for _ in range(3):
            await asyncio.sleep(0)

    arun(main())
    assert len(ends(tmp_path)) == 1


@function_tool(name_override="send_now")
def _send_now(to: str, subject: str, body: str) -> str:
    """Send an e-mail (no approval step)."""
    return f"sent to {to}"
