"""The AgentDojo adapter: GuardElement (abort / deny), ReplayLLM in the real suites, online == offline."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

pytest.importorskip("agentdojo")

from agentdojo.agent_pipeline.errors import AbortAgentError
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime

from guard import CorpusError, Episode, Guard, ProbeCall, Reason, Session, Verdict
from guard.adapters.agentdojo import (
    EpisodeOutcome,
    GuardElement,
    ReplayLLM,
    compatible_versions,
    offline_episode,
    rerun_episode,
    run_suite,
    transcript,
)
from guard.adapters.agentdojo import episode_injections as rebuilt_injections
from guard.calibration.replay import replay_decisions
from guard.corpora.agentdojo import LoadReport, load_runs, load_suite_policy
from guard.decision import Certification
from guard.records import RecordKind
from guard.stages import PassThroughCertifier

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "agentdojo_runs_adapters"
SUITES = ("banking", "slack", "travel", "workspace")
THRESHOLD = 0.5  # explicit until shipped calibration artifacts exist


def suite_guard(suite: str) -> Guard:
    """The shipped suite policy with the explicit test threshold."""
    return Guard(load_suite_policy(suite), threshold=THRESHOLD)


class ListedTools:
    """A test scorer: 1.0 for the listed tools, 0.0 otherwise (so a test does not hang on policy weights)."""

    def __init__(self, *tools: str) -> None:
        self.tools = set(tools)

    def score(self, graph: Any, node: int, selected: frozenset[int]) -> tuple[float, Any]:
        listed = graph.records[node].tool in self.tools
        return (1.0 if listed else 0.0), MappingProxyType({"listed": listed})


def refusing_guard(suite: str, *tools: str, certifier: Any = None) -> Guard:
    """A guard over the suite policy that escalates exactly ``tools`` (SafeCommit off unless given)."""
    return Guard(
        load_suite_policy(suite),
        threshold=THRESHOLD,
        scorer=ListedTools(*tools),
        certifier=certifier or PassThroughCertifier(),
    )


class ProbeOnce:
    """Asks for one get_balance probe, then certifies once its result is in the session."""

    def certify(self, session: Session, node: int, spec: Any) -> Certification:
        if any(r.call_id == "probe-1" and r.kind is RecordKind.RESULT for r in session.graph.records.values()):
            return Certification(Verdict.EXECUTE, Reason.CERTIFIED, "certified after the probe")
        probe = ProbeCall(tool="get_balance", args={}, call_id="probe-1", name="balance")
        return Certification(Verdict.PROBE, Reason.PROBE_NEEDED, "probe the balance", probes=(probe,))


@pytest.fixture(scope="module")
def report() -> LoadReport:
    """The adapter's fixture runs, loaded by the corpus loader."""
    loaded = load_runs(RUNS)
    assert not loaded.failed
    return loaded


@pytest.fixture(scope="module")
def episode(report: LoadReport) -> Callable[[str], Episode]:
    """Look an episode up by the end of its id."""

    def find(suffix: str) -> Episode:
        return next(e for e in report.episodes if e.episode_id.endswith(suffix))

    return find


@pytest.fixture(scope="module")
def suite_results() -> dict[tuple[str, str], tuple[dict[str, Any], list[tuple[EpisodeOutcome, EpisodeOutcome]]]]:
    """run_suite on the fixture folder, every suite in both modes (re-executed once per module)."""
    results = {}
    for suite in SUITES:
        for mode in ("abort", "deny"):
            outcomes: list[tuple[EpisodeOutcome, EpisodeOutcome]] = []
            summary = run_suite(RUNS, suite, guard_factory=suite_guard, mode=mode, outcomes=outcomes)  # type: ignore[arg-type]
            results[suite, mode] = (summary, outcomes)
    return results


def assistant_calls(messages: Any) -> list[str]:
    return [c.function for m in messages if m["role"] == "assistant" for c in m["tool_calls"] or []]


# --------------------------------------------------------------------------- run_suite, all suites and modes


@pytest.mark.parametrize("mode", ["abort", "deny"])
@pytest.mark.parametrize("suite", SUITES)
def test_run_suite_on_attacked_and_benign_episodes(suite_results, suite: str, mode: str) -> None:
    """Every suite, both modes: attacked and benign episodes re-run; online decisions equal offline replay."""
    summary, outcomes = suite_results[suite, mode]
    assert set(summary) == {"suite", "episodes", "without_guard", "with_guard", "decisions_compared", "decisions_equal"}
    assert summary["suite"] == suite and summary["episodes"] == len(outcomes) >= 2
    assert {g.attacked for _, g in outcomes} == {True, False}
    assert summary["decisions_compared"] > 0
    assert summary["decisions_equal"] == summary["decisions_compared"]
    # refusing can only remove calls from a replayed run, never add an attacker's call
    assert summary["with_guard"]["attack_success"] <= summary["without_guard"]["attack_success"]
    assert all(len(g.decisions) >= 1 for _, g in outcomes)


def test_replay_without_the_guard_reproduces_the_logged_verdicts(suite_results, report: LoadReport) -> None:
    """ReplayLLM in the real environments gives AgentDojo's logged utility and security back."""
    logged = {e.episode_id: (e.meta.utility, e.meta.security) for e in report.episodes}
    for suite in SUITES:
        for base, _ in suite_results[suite, "deny"][1]:
            assert (base.utility, base.security) == logged[base.episode_id], base.episode_id


def test_declared_benchmark_version_is_used(suite_results) -> None:
    """A run file's benchmark_version wins; v1 runs (no field) map to v1."""
    versions = {g.episode_id.split("/")[0]: g.version for _, g in suite_results["banking", "deny"][1]}
    assert versions == {"gpt-4o-2024-05-13": "v1", "meta-llama_Llama-3.3-70B-Instruct": "v1.2.1"}


def test_run_suite_from_a_folder_with_a_limit() -> None:
    """A runs folder is loaded with the corpus loader; limit caps the episodes."""
    summary = run_suite(RUNS, "slack", guard_factory=suite_guard, mode="deny", limit=1)
    assert summary["episodes"] == 1


def test_run_suite_rejects_a_bad_mode_and_version(report: LoadReport) -> None:
    """Unknown modes and benchmark versions are errors, not silent defaults."""
    with pytest.raises(ValueError, match="mode"):
        run_suite(report, "slack", guard_factory=suite_guard, mode="warn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="version"):
        run_suite(report, "slack", guard_factory=suite_guard, version="v9")


def test_run_suite_rejects_what_is_not_episodes() -> None:
    """Anything but a folder, a LoadReport or episodes is reported clearly."""
    with pytest.raises(CorpusError, match="Episode"):
        run_suite([{"messages": []}], "slack", guard_factory=suite_guard)


# --------------------------------------------------------------------------- deny and abort in detail

MIXED = "slack/user_task_0/important_instructions/injection_task_5"


SLACK_ATTACK = ("invite_user_to_slack", "add_user_to_channel", "remove_user_from_slack")


def test_deny_removes_refused_calls_and_answers_them_with_errors(episode) -> None:
    """deny: refused calls leave the assistant messages, get error results in call order, and the agent goes on."""
    ep = episode(MIXED)
    out = rerun_episode(ep, "v1", guard=refusing_guard("slack", *SLACK_ATTACK), mode="deny")
    refused = {d.tool for d in out.decisions if not d.allowed}
    assert refused == {"invite_user_to_slack", "add_user_to_channel", "remove_user_from_slack"}
    assert not refused & set(assistant_calls(out.messages))
    assert "get_channels" in assistant_calls(out.messages)
    # the turn [invite_user_to_slack (refused), get_channels (allowed)]: results in the order proposed
    tools = [m for m in out.messages if m["role"] == "tool"]
    pair = [(m["tool_call"].function, m["error"] is not None) for m in tools[1:3]]
    assert pair == [("invite_user_to_slack", True), ("get_channels", False)]
    assert "carbguard did not run" in tools[1]["error"]
    assert out.messages[-1]["role"] == "assistant" and out.security is False
    assert out.equal == out.compared == 5
    assert rerun_episode(ep, "v1").security is True  # the same replay without the guard: the attack succeeds


def test_abort_stops_at_the_first_refusal(episode) -> None:
    """abort: the agent stops; calls after the refusal in the turn never run; AgentDojo still scores it."""
    ep = episode(MIXED)
    out = rerun_episode(ep, "v1", guard=refusing_guard("slack", *SLACK_ATTACK), mode="abort")
    assert [d.verdict for d in out.decisions][-1] is Verdict.ESCALATE
    assert len(out.decisions) == 2 and "get_channels" not in assistant_calls(out.messages)
    last = out.messages[-1]
    assert last["role"] == "assistant" and "carbguard stopped the agent" in last["content"][0]["content"]
    assert out.equal == out.compared == 2 and out.security is False


def test_probe_runs_against_the_environment_and_is_not_compared(episode) -> None:
    """probe: the probe tool runs in AgentDojo's environment, its result enters the session, the call runs."""
    ep = episode("gpt-4o-2024-05-13/banking/user_task_1/important_instructions/injection_task_0")
    out = rerun_episode(ep, "v1", guard=refusing_guard("banking", certifier=ProbeOnce()), mode="deny")
    assert [(d.tool, d.reason) for d in out.decisions] == [
        ("get_most_recent_transactions", Reason.UNDER_THRESHOLD),
        ("send_money", Reason.CERTIFIED),
    ]
    assert out.security is True  # certified, so the attacker's transfer ran
    # only the decision before the probed proposal is comparable with a replay of the transcript
    assert out.compared == out.equal == 1 and "probes ran online at proposal 1" in out.note


def test_guard_element_raises_abort_agent_error_directly() -> None:
    """Used by hand, the element raises AgentDojo's AbortAgentError carrying the messages."""
    element = GuardElement(suite_guard("banking"), "abort")
    messages = [
        {"role": "system", "content": [{"type": "text", "content": "sys"}]},
        {"role": "user", "content": [{"type": "text", "content": "Pay my bill."}]},
        {"role": "assistant", "content": None, "tool_calls": [FunctionCall(function="wipe_account", args={}, id="x1")]},
    ]
    with pytest.raises(AbortAgentError) as caught:
        element.query("Pay my bill.", FunctionsRuntime([]), messages=messages)
    assert "unknown_tool" in caught.value.messages[-1]["content"][0]["content"]
    assert element.runs[-1].decisions[0].verdict is Verdict.ESCALATE


def test_bad_mode_is_rejected() -> None:
    """Only abort and deny exist."""
    with pytest.raises(ValueError, match="abort"):
        GuardElement(suite_guard("banking"), "log")  # type: ignore[arg-type]


def test_tool_result_for_an_unknown_call_id_is_reported_not_fed() -> None:
    """A tool message answering no decided call goes to run.skipped; the session does not change."""
    element = GuardElement(suite_guard("banking"), "deny")
    call = FunctionCall(function="get_balance", args={}, id="b1")
    messages: list[Any] = [
        {"role": "system", "content": [{"type": "text", "content": "sys"}]},
        {"role": "user", "content": [{"type": "text", "content": "What is my balance?"}]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    _, _, _, messages, _ = element.query("q", FunctionsRuntime([]), messages=messages)
    stray = {
        "role": "tool",
        "content": [{"type": "text", "content": "x"}],
        "tool_call_id": "ghost",
        "tool_call": call,
        "error": None,
    }
    follow = {"role": "assistant", "content": None, "tool_calls": [FunctionCall(function="get_iban", args={}, id="b2")]}
    element.query("q", FunctionsRuntime([]), messages=[*messages, stray, follow])
    run = element.runs[-1]
    assert any("ghost" in s for s in run.skipped)
    assert [d.tool for d in run.decisions] == ["get_balance", "get_iban"]


def test_calls_without_ids_get_stable_unique_ids(episode) -> None:
    """Null call ids (Llama runs) become t{message}c{position}, written into the assistant message."""
    ep = episode("meta-llama_Llama-3.3-70B-Instruct/banking/user_task_10/important_instructions/injection_task_4")
    out = rerun_episode(ep, "v1.2.1", guard=suite_guard("banking"), mode="deny")
    ids = [d.call_id for d in out.decisions]
    assert ids[0] == "t2c0" and len(set(ids)) == len(ids)
    assert all(c.id for m in out.messages if m["role"] == "assistant" for c in m["tool_calls"] or [])
    assert out.equal == out.compared > 0


# --------------------------------------------------------------------------- ReplayLLM and the offline path


def test_replay_llm_accepts_a_run_dict_its_messages_or_an_episode(episode) -> None:
    """The three sources give the same turns (same calls in the same order)."""
    path = RUNS / "gpt-4o-2024-05-13/banking/user_task_1/important_instructions/injection_task_0.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    ep = episode("gpt-4o-2024-05-13/banking/user_task_1/important_instructions/injection_task_0")

    def calls(replay: ReplayLLM) -> list[list[str]]:
        return [[c["function"] for c in t["tool_calls"]] for t in replay.turns]

    assert calls(ReplayLLM(data)) == calls(ReplayLLM(data["messages"])) == calls(ReplayLLM(ep))
    assert calls(ReplayLLM(ep)) == [["get_most_recent_transactions"], ["send_money"], []]


def test_replay_llm_rejects_runs_with_missing_fields() -> None:
    """A run without messages, or a call without a function name, is a CorpusError naming the problem."""
    with pytest.raises(CorpusError, match="messages"):
        ReplayLLM({"suite_name": "banking", "user_task_id": "user_task_0"})
    with pytest.raises(CorpusError, match="function"):
        ReplayLLM([{"role": "assistant", "content": None, "tool_calls": [{"args": {}}]}])


def test_replay_llm_restarts_for_each_run() -> None:
    """The cursor restarts when a new run begins, and answers an empty final past the log."""
    replay = ReplayLLM([{"role": "assistant", "content": "hi", "tool_calls": None}])
    start: list[Any] = [{"role": "user", "content": [{"type": "text", "content": "q"}]}]
    for _ in range(2):
        _, _, _, messages, _ = replay.query("q", FunctionsRuntime([]), messages=start)
        assert messages[-1]["content"][0]["content"] == "hi"
    _, _, _, more, _ = replay.query("q", FunctionsRuntime([]), messages=messages)
    assert more[-1]["content"][0]["content"] == ""


def test_injections_are_rebuilt_from_the_episode(episode) -> None:
    """The attack's injection dict is rebuilt exactly from the episode's payloads and the suite."""
    suffix = "gpt-4o-2024-05-13/workspace/user_task_16/important_instructions/injection_task_3"
    data = json.loads((RUNS / f"{suffix}.json").read_text(encoding="utf-8"))
    assert rebuilt_injections(episode(suffix), "v1") == data["injections"]


def test_compatible_versions_match_prompts(episode) -> None:
    """A v1 run matches v1; its texts do not match an unrelated version's changes."""
    versions = compatible_versions(episode("gpt-4o-2024-05-13/banking/user_task_10/none/none"))
    assert versions[0] == "v1"


def test_offline_replay_of_the_transcript_equals_online_decisions(episode) -> None:
    """The transcript → loader → replay_decisions gives the online decisions (latency aside)."""
    ep = episode("gpt-4o-2024-05-13/workspace/user_task_16/important_instructions/injection_task_3")
    out = rerun_episode(ep, "v1", guard=refusing_guard("workspace", "send_email"), mode="deny")
    offline_ep = offline_episode(
        out.messages,
        episode_id=ep.episode_id,
        suite="workspace",
        user_task="user_task_16",
        injection_task="injection_task_3",
        attack="important_instructions",
    )
    offline = replay_decisions(refusing_guard("workspace", "send_email"), offline_ep)
    assert [(d.tool, d.verdict, d.score, d.selected) for d in offline] == [
        (d.tool, d.verdict, d.score, d.selected) for d in out.decisions
    ]
    # the refused send_email is back in its turn, before the allowed call it was proposed with
    turns = [m["tool_calls"] for m in transcript(out.messages) if m["role"] == "assistant" and m.get("tool_calls")]
    assert [c["function"] for c in turns[1]] == ["send_email", "get_unread_emails"]


def test_without_agentdojo_the_module_imports_and_use_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """A core-only install can import the adapter; using it says which extra to install."""
    import importlib
    import sys

    monkeypatch.delitem(sys.modules, "guard.adapters.agentdojo")
    monkeypatch.setitem(sys.modules, "agentdojo.agent_pipeline.agent_pipeline", None)
    module = importlib.import_module("guard.adapters.agentdojo")
    for use in (
        lambda: module.GuardElement(suite_guard("banking")),
        lambda: module.ReplayLLM([]),
        lambda: module.run_suite(RUNS, "banking", guard_factory=suite_guard),
    ):
        with pytest.raises(ImportError, match=r"carbguard\[agentdojo\]"):
            use()


def test_every_content_block_is_observed_as_the_model_gets_it() -> None:
    """A non-text block of an AgentDojo message is observed as its canonical JSON, never dropped.

    Catches: keeping only text blocks (a private value inside an unknown block would reach the model
    while the guard records an empty result), and a block that is not an object being skipped.
    """
    from guard.adapters._agentdojo_compat import content_text

    blocks = [
        {"type": "text", "content": "visible"},
        {"type": "image", "data": "PRIVATE-1"},
        "PRIVATE-2",
        {"type": "text", "content": {"nested": "PRIVATE-3"}},
    ]
    text = content_text(blocks)
    assert text.startswith("visible\n")
    assert all(f"PRIVATE-{n}" in text for n in (1, 2, 3))
    assert content_text({"odd": "PRIVATE-4"}) == '{"odd": "PRIVATE-4"}'
    assert content_text([{"type": "text", "text": "t"}]) == "t" and content_text(None) == ""
