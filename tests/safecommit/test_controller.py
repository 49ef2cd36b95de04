"""The commit–probe–fallback controller: verdicts, probe replay, fallbacks, log."""

from __future__ import annotations

import json
import math

import pytest

from guard.errors import InputError
from guard.safecommit.controller import SafeCommitController, step
from guard.safecommit.types import Action, ProbeSpec, World

SAFE = {"w1": ["delete", "send"], "w2": ["send"], "w3": ["delete"]}


def make_worlds(w3_facts: dict[str, str] | None = None) -> list[World]:
    """w1: path temporary + recipient valid; w2: path repurposed; w3: recipient injected."""
    return [
        World("w1", {}, 0.2, 0.6),
        World("w2", {}, 0.6, 0.3),
        World("w3", w3_facts or {}, 0.9, 0.1),
    ]


@pytest.fixture
def worlds() -> list[World]:
    """The three worlds of the running example, all scoring below κ = 1."""
    return make_worlds()


@pytest.fixture
def actions() -> list[Action]:
    """Delete the path, or send the completion note."""
    return [Action("delete", 1.0, 0.3), Action("send", 1.0, 0.2)]


@pytest.fixture
def probes() -> list[ProbeSpec]:
    """A no-follow symlink check (tells w2 apart) and a recipient lookup (tells w3 apart)."""
    return [
        ProbeSpec("symlink_check", 1.0, {"w1": "plain", "w2": "link", "w3": "plain"}),
        ProbeSpec("recipient_lookup", 1.0, {"w1": "ok", "w2": "ok", "w3": "unknown"}),
    ]


@pytest.fixture
def controller() -> SafeCommitController:
    """κ = 1, two probes, η = 0."""
    return SafeCommitController(kappa=1.0, budget=2, eta=0.0)


def test_blocked_decision_asks_the_probe_that_shrinks_the_certificate(
    controller: SafeCommitController, worlds: list[World], actions: list[Action], probes: list[ProbeSpec]
) -> None:
    """send is blocked only by w3 (mass .1): the recipient lookup (Δ = .09) beats the symlink check (.03)."""
    result = controller.step(worlds, actions, SAFE, probes)
    assert (result.verdict, result.probe, result.action) == ("probe", "recipient_lookup", None)
    assert result.log.expected_shrinkage == pytest.approx(0.09)
    assert dict(result.log.certificate.blocking) == {"delete": ("w2",), "send": ("w3",)}


def test_probe_result_removes_contradicting_world_then_certifies(
    controller: SafeCommitController, worlds: list[World], actions: list[Action], probes: list[ProbeSpec]
) -> None:
    """Outcome "ok" removes w3; send is then safe in every retained world and is executed."""
    result = controller.run(worlds, actions, SAFE, probes, observe=["ok"])
    assert (result.verdict, result.action) == ("execute", "send")
    assert result.log.removed_by_probes == ("w3",)
    assert result.log.retained == ("w1", "w2")
    assert [(r.probe, r.outcome) for r in result.log.probes_run] == [("recipient_lookup", "ok")]


def test_callback_and_list_give_the_same_decision(
    controller: SafeCommitController, worlds: list[World], actions: list[Action], probes: list[ProbeSpec]
) -> None:
    """A callback answering as in w1 and the list ["ok"] lead to the same log."""
    by_list = controller.run(worlds, actions, SAFE, probes, observe=["ok"])
    by_call = controller.run(worlds, actions, SAFE, probes, observe=lambda p: p.outcomes["w1"])
    assert by_list.to_dict() == by_call.to_dict()


def test_list_running_out_returns_pending_probe(
    controller: SafeCommitController, worlds: list[World], actions: list[Action], probes: list[ProbeSpec]
) -> None:
    """With no outcome to hand the controller returns the probe request."""
    assert controller.run(worlds, actions, SAFE, probes, observe=[]).verdict == "probe"


def test_unparseable_outcome_leaves_set_unchanged_and_consumes_budget(
    worlds: list[World], actions: list[Action], probes: list[ProbeSpec]
) -> None:
    """An outcome no label matches removes nothing but spends the only probe: fallback."""
    result = step(worlds, actions, SAFE, 1.0, probes, budget=1, history=[("recipient_lookup", "¿?")])
    assert result.log.retained == ("w1", "w2", "w3")
    assert [(r.probe, r.outcome, r.raw_type) for r in result.log.probes_run] == [("recipient_lookup", None, "str")]
    assert result.verdict == "abstain"
    assert result.log.probe_stop == "budget_spent"


def test_unparseable_outcomes_cannot_loop_forever(
    controller: SafeCommitController, worlds: list[World], actions: list[Action], probes: list[ProbeSpec]
) -> None:
    """A probe runner that always answers garbage stops after ``budget`` probes."""
    result = controller.run(worlds, actions, SAFE, probes, observe=lambda p: {"garbage": True})
    assert len(result.log.probes_run) == 2
    assert result.verdict != "probe"


def test_world_set_empty_after_score_filter_abstains(
    worlds: list[World], actions: list[Action], probes: list[ProbeSpec]
) -> None:
    """κ below every score: nothing retained, abstain with reason empty_world_set."""
    result = step(worlds, actions, SAFE, 0.1, probes)
    assert (result.verdict, result.log.reason) == ("abstain", "empty_world_set")
    assert result.log.excluded_by_score == ("w1", "w2", "w3")


def test_world_set_empty_after_probe_filter_abstains(
    worlds: list[World], actions: list[Action], probes: list[ProbeSpec]
) -> None:
    """Outcomes that contradict every world (only w3 says unknown, only w2 says link) → abstain."""
    history = [("recipient_lookup", "unknown"), ("symlink_check", "link")]
    result = step(worlds, actions, SAFE, 1.0, probes, history=history)
    assert (result.verdict, result.log.reason) == ("abstain", "empty_world_set")
    assert result.log.retained == ()
    assert result.log.certificate.certified == ()


def test_infinite_kappa_retains_every_world(actions: list[Action]) -> None:
    """κ = +inf keeps even a world scored +inf; the log writes κ as "inf" (strict JSON)."""
    worlds = [World("a", {}, 0.0), World("b", {}, math.inf)]
    result = step(worlds, actions, {"a": ["send"], "b": ["send"]}, math.inf)
    assert (result.verdict, result.action) == ("execute", "send")
    assert result.log.retained == ("a", "b")
    assert json.loads(json.dumps(result.to_dict(), allow_nan=False))["log"]["kappa"] == "inf"


@pytest.mark.parametrize(
    ("facts", "verdict", "reason"),
    [
        ({"authority": "missing"}, "escalate", "authority_missing"),
        ({"evidence": "pending"}, "defer", "evidence_pending"),
        ({}, "abstain", "no_certified_action"),
    ],
)
def test_fallback_matches_what_is_missing(
    actions: list[Action], probes: list[ProbeSpec], facts: dict[str, str], verdict: str, reason: str
) -> None:
    """With no budget, the blocking world's facts decide between escalate, defer and abstain."""
    result = step(make_worlds(facts), actions, SAFE, 1.0, probes, budget=0)
    assert (result.verdict, result.log.reason) == (verdict, reason)
    assert result.action is None and result.probe is None


def test_no_safe_action_abstains(worlds: list[World], actions: list[Action]) -> None:
    """No action is safe in any retained world: abstain, no_safe_action."""
    result = step(worlds, actions, {"w1": [], "w2": [], "w3": []}, 1.0)
    assert (result.verdict, result.log.reason) == ("abstain", "no_safe_action")


def test_eta_above_every_value_falls_back(worlds: list[World], actions: list[Action], probes: list[ProbeSpec]) -> None:
    """η larger than the best Δ/c: no probe is worth it."""
    result = step(worlds, actions, SAFE, 1.0, probes, eta=0.5)
    assert result.verdict == "abstain"
    assert result.log.probe_stop == "no_valuable_probe"


def test_log_lists_merged_classes(actions: list[Action]) -> None:
    """Two worlds with one signature form one class whose weight is the sum."""
    worlds = [World("a", {}, 0.1, 1.0), World("b", {}, 0.2, 2.0), World("c", {}, 0.3, 0.5)]
    result = step(worlds, actions, {"a": ["send"], "b": ["send"], "c": ["delete", "send"]}, 1.0)
    classes = [(c.signature, c.worlds, c.weight) for c in result.log.classes]
    assert classes == [((False, True), ("a", "b"), 3.0), ((True, True), ("c",), 0.5)]
    assert result.to_dict()["log"]["classes"][0]["signature"] == {"delete": False, "send": True}  # type: ignore[index,call-overload]


def test_log_is_json_and_holds_no_raw_outcome(
    worlds: list[World], actions: list[Action], probes: list[ProbeSpec]
) -> None:
    """The log dict survives strict JSON and keeps only parsed labels and raw types."""
    result = step(worlds, actions, SAFE, 1.0, probes, history=[("symlink_check", "secret-value-123")])
    text = json.dumps(result.to_dict(), allow_nan=False)
    assert "secret-value-123" not in text
    assert json.loads(text)["log"]["probes_used"] == 1


def test_step_is_pure(worlds: list[World], actions: list[Action], probes: list[ProbeSpec]) -> None:
    """The same inputs give the same result; scores are not recomputed after probing."""
    history = [("recipient_lookup", "ok")]
    first = step(worlds, actions, SAFE, 1.0, probes, history=history)
    assert first == step(worlds, actions, SAFE, 1.0, probes, history=history)
    assert [w.score for w in worlds] == [0.2, 0.6, 0.9]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"history": [("nope", "x")]}, "unknown probe 'nope'"),
        ({"budget": -1}, "budget"),
        ({"eta": math.nan}, "eta"),
    ],
)
def test_bad_input_is_an_input_error(
    worlds: list[World], actions: list[Action], probes: list[ProbeSpec], kwargs: dict[str, object], match: str
) -> None:
    """Unknown probe results and bad settings raise InputError naming the value."""
    with pytest.raises(InputError, match=match):
        step(worlds, actions, SAFE, 1.0, probes, **kwargs)  # type: ignore[arg-type]


def test_duplicate_world_names_are_refused(actions: list[Action]) -> None:
    """Two worlds named alike cannot be told apart by a probe: InputError."""
    with pytest.raises(InputError, match="'a' appears twice"):
        step([World("a"), World("a")], actions, {"a": []}, 1.0)


def test_degenerate_problems_fail_closed(actions: list[Action]) -> None:
    """No worlds → empty_world_set; no candidate actions → no_safe_action; no probes → no_probes."""
    assert step([], actions, {}, 1.0).log.reason == "empty_world_set"
    assert step([World("x")], [], {"x": []}, 1.0).log.reason == "no_safe_action"
    blocked = step([World("x"), World("y")], actions, {"x": ["send"], "y": ["delete"]}, 1.0)
    assert (blocked.verdict, blocked.log.probe_stop) == ("abstain", "no_probes")


def test_malformed_history_entry_is_an_input_error(worlds: list[World], actions: list[Action]) -> None:
    """A history entry that is not a (probe, outcome) pair names itself in the error."""
    with pytest.raises(InputError, match="pair"):
        step(worlds, actions, SAFE, 1.0, history=["recipient_lookup"])  # type: ignore[list-item]
