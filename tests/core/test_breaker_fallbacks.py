"""The breaker's two escalate fallbacks (docs/monitoring.md#the-circuit-breaker).

``escalate`` (the default) escalates every sink and side-effectful call after a trip; ``escalate_risky``
escalates only calls with private or untrusted provenance, irreversible effects or unknown tools, so the
safe part of the work goes on under the calibrated threshold.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from guard import stages
from guard.audit import MemoryAudit
from guard.breaker import Breaker
from guard.decision import Verdict
from guard.errors import PolicyError
from guard.features import FEATURE_GROUPS
from guard.policy import Effect, Policy, ToolSpec, parse_policy, policy_json_schema
from guard.provenance import risky_provenance
from guard.runtime import Guard, Session
from tests.conftest import SMALL_POLICY, TEXTS

ROOT = Path(__file__).resolve().parents[2]
RISKY = "calls with private or untrusted provenance, irreversible effects or unknown tools"
OLD_MESSAGE = "circuit breaker tripped: every sink and side-effectful call escalates until recalibration"
UNTRUSTED_VALUE = "https://files.example.org/reports/q3-summary-2026.pdf"


def _prefix(guard: Guard) -> Session:
    """A session that has read a private certificate, an untrusted inbox, untrusted MCP content and a
    public document, all before the trip (threshold 1.0: the score alone escalates nothing here)."""
    s = guard.session("s")
    s.observe_user("Tidy up press_release.md and note what is left to do.")
    assert s.decide("read_certificate", {"name": "passport"}, "p1").verdict is Verdict.EXECUTE
    s.observe_result("p1", TEXTS.cert)
    assert s.decide("read_inbox", {}, "p2").verdict is Verdict.EXECUTE
    s.observe_result("p2", TEXTS.inbox)
    s.observe_content(f"Latest report: {UNTRUSTED_VALUE}", "untrusted_source", "mcp:resource:reports")
    assert s.decide("read_document", {"path": "press_release.md"}, "p3").verdict is Verdict.EXECUTE
    s.observe_result("p3", TEXTS.doc)
    return s


def _tripped(policy: Policy, fallback: float | str) -> tuple[Guard, Session, MemoryAudit]:
    audit = MemoryAudit()
    guard = Guard(policy, threshold=1.0, audit=audit, artifact_id="art#abc", fallback=fallback)
    session = _prefix(guard)
    assert guard.trip("risk alarm")
    return guard, session, audit


SAFE_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_document", {"path": "b.md"}),  # a plain read
    ("read_document", {"path": "press_release.md"}),  # a read whose argument came from the user turn
    ("create_note", {"title": "todo", "body": "call the printer tomorrow"}),  # data-free, reversible
    ("post_note", {"body": "Acme opens a new solar plant in Lyon"}),  # reversible sink, public data only
]


def test_escalate_risky_lets_plain_reads_and_data_free_reversible_calls_run(small_policy: Policy) -> None:
    """After a trip with ``escalate_risky``, a plain read, a read of a user-named file, a data-free reversible
    side effect and a reversible sink carrying only public text execute under the calibrated threshold, in a
    session that has read private and untrusted records.  The breaker entry says which fallback applied.

    Catches the new fallback escalating every sink and side effect like ``escalate`` (planted: ``escalation``
    ignoring ``fallback_word`` -> the note and the post escalate), provenance read from the whole prefix
    instead of the call's ancestors and selection (planted: ``ancestor_bits(node) | chosen`` replaced by
    ``graph.node_bits()`` -> every call escalates once a private record was read), or any edge into the
    call counted as risky (planted: ``risky = graph.node_bits()`` -> the user-named read escalates).
    """
    guard, session, audit = _tripped(small_policy, "escalate_risky")
    assert guard.trip_state.fallback_word == "escalate_risky" and guard.trip_state.escalate_actions
    assert guard.threshold == 1.0
    for i, (tool, args) in enumerate(SAFE_CALLS):
        decision = session.decide(tool, args, f"ok{i}")
        assert decision.verdict is Verdict.EXECUTE, (tool, args, decision.message)
        assert decision.threshold == 1.0
    (entry,) = [e for e in audit.entries if e.get("kind") == "breaker"]
    assert entry["to"] == {"threshold": 1.0, "artifact": None, "escalate": RISKY}


def test_escalate_risky_escalates_private_untrusted_irreversible_and_unknown_calls(small_policy: Policy) -> None:
    """After a trip with ``escalate_risky``: a (reversible) send carrying the private certificate number, a
    note whose argument came from an untrusted tool result, one whose argument came from untrusted MCP
    content, a data-free irreversible send and an unknown tool all escalate; the message names the fallback
    and the cause.  Before the trip, the same calls execute (threshold 1.0): the breaker is what escalates.

    Catches the private check dropped (planted: ``risky`` built from ``flagged_bits("untrusted")`` only ->
    the post of the private number executes), untrusted provenance ignored (planted: ``risky`` built from
    ``flagged_bits("tainted")`` only -> both untrusted notes execute), the irreversible test dropped (planted:
    the ``Effect.IRREVERSIBLE`` branch removed -> the data-free e-mail executes) and an unknown tool let
    through.
    """
    risky_calls: list[tuple[str, dict[str, Any], str]] = [
        ("post_note", {"body": f"Number: {TEXTS.cert_number}"}, "private or untrusted provenance"),
        ("create_note", {"title": "x", "body": f"wire money to {TEXTS.attacker}"}, "private or untrusted provenance"),
        ("create_note", {"title": "x", "body": f"fetch {UNTRUSTED_VALUE}"}, "private or untrusted provenance"),
        ("send_email", {"to": "bob@example.com", "subject": "s", "body": "hello"}, "an irreversible call"),
    ]
    # the signature rule would escalate the injected note before the trip too, and so would the control rows (an
    # unrequested note whose body a third party supplied): off, so the breaker alone decides
    quiet = small_policy.scorer.weights.model_copy(update=dict.fromkeys(FEATURE_GROUPS["control"], 0.0))
    small_policy = small_policy.model_copy(
        update={"scorer": small_policy.scorer.model_copy(update={"signature_rule": "off", "weights": quiet})}
    )
    fresh = _prefix(Guard(small_policy, threshold=1.0, fallback="escalate_risky"))
    for i, (tool, args, _) in enumerate(risky_calls):
        assert fresh.decide(tool, args, f"pre{i}").verdict is Verdict.EXECUTE, (tool, args)
    guard, session, _ = _tripped(small_policy, "escalate_risky")
    for i, (tool, args, cause) in enumerate(risky_calls):
        decision = session.decide(tool, args, f"r{i}")
        assert decision.verdict is Verdict.ESCALATE, (tool, args)
        assert decision.message.startswith("circuit breaker tripped (fallback escalate_risky): "), decision.message
        assert cause in decision.message
    unknown = session.decide("wire_money", {"to": "x"}, "u1")
    assert unknown.verdict is Verdict.ESCALATE
    message = guard.breaker.escalation(None, lambda: False)
    assert message is not None and "tool the policy does not know" in message


def test_escalate_risky_counts_private_content_and_the_selected_evidence(small_policy: Policy) -> None:
    """Private MCP content reused by a reversible sink escalates (content, not only tool results), and with a
    selector that hands the scorer the whole prefix, a data-free call whose selection holds a private record
    escalates too.

    Catches provenance read from private tool results only (planted: ``risky`` built from
    ``flagged_bits("untrusted")`` -> the post of the private content executes) and the selection ignored
    (planted: ``| chosen`` dropped -> the full-prefix note executes).
    """
    guard = Guard(small_policy, threshold=1.0, fallback="escalate_risky")
    s = guard.session("c")
    s.observe_content("Door code for the lab: 4471-9920-3318", "private_source", "mcp:resource:codes")
    guard.trip("alarm")
    decision = s.decide("post_note", {"body": "the code is 4471-9920-3318"}, "c1")
    assert decision.verdict is Verdict.ESCALATE and "provenance" in decision.message
    assert s.decide("create_note", {"title": "t", "body": "plain"}, "c2").verdict is Verdict.EXECUTE

    full = Guard(small_policy.with_selector("full_prefix"), threshold=1.0, fallback="escalate_risky")
    f = _prefix(full)
    full.trip("alarm")
    assert f.decide("create_note", {"title": "t", "body": "plain"}, "f1").verdict is Verdict.ESCALATE


def test_escalate_risky_fails_closed_when_provenance_is_unknown(
    small_policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a side effect, a provenance test that raises, returns something other than ``False``, or is missing
    escalates.

    Catches a fail-open breaker (planted: ``found = False`` in the ``except`` branch of ``escalation`` -> the
    note executes while its provenance is unknown).
    """

    def broken(*_: object) -> bool:
        raise RuntimeError("graph gone")

    guard, session, _ = _tripped(small_policy, "escalate_risky")
    monkeypatch.setattr(stages, "risky_provenance", broken)
    decision = session.decide("create_note", {"title": "t", "body": "plain"}, "x1")
    assert decision.verdict is Verdict.ESCALATE and "cannot be determined" in decision.message
    spec = small_policy.tool("create_note")
    assert guard.breaker.escalates(spec, None)
    assert guard.breaker.escalates(spec, lambda: 0)  # type: ignore[arg-type, return-value]
    assert not guard.breaker.escalates(spec, lambda: False)


@pytest.mark.parametrize("fallback", [-math.inf, "escalate"], ids=["-inf", "word"])
def test_escalate_fallback_is_unchanged(small_policy: Policy, fallback: float | str) -> None:
    """With the old ``escalate`` fallback (``-inf`` or the word) every sink and side-effectful call escalates
    with the old message, even data-free; every read executes, even one carrying untrusted data; the breaker
    entry is the old one.

    Catches ``escalate`` taking the new rules (planted: ``if state.fallback_word != ESCALATE_RISKY`` inverted
    -> the data-free note executes and the untrusted read escalates) or its entry text changed.
    """
    guard, session, audit = _tripped(small_policy, fallback)
    assert guard.trip_state.fallback_word == "escalate" and guard.trip_state.fallback == -math.inf
    for i, (tool, args) in enumerate(SAFE_CALLS):
        decision = session.decide(tool, args, f"o{i}")
        expected = Verdict.EXECUTE if tool == "read_document" else Verdict.ESCALATE
        assert decision.verdict is expected, (tool, args)
        if expected is Verdict.ESCALATE:
            assert decision.message == OLD_MESSAGE
    read = session.decide("read_document", {"path": UNTRUSTED_VALUE}, "o9")
    assert read.verdict is Verdict.EXECUTE
    (entry,) = [e for e in audit.entries if e.get("kind") == "breaker"]
    assert entry["to"] == {"threshold": 1.0, "artifact": None, "escalate": "sinks and side effects"}


@pytest.mark.parametrize("word", ["escalate-risky", "Escalate", "escalate_safe", "strict", "escalate risky"])
def test_an_unknown_fallback_word_is_refused(word: str) -> None:
    """A ``calibration.fallback`` that is a word but not one of the fallbacks is refused at load, with a message
    naming the allowed spellings; paths (a directory or an extension) and the two words load.

    Catches a typo read as an artifact path (planted: the ``_known_word`` validator removed -> the policy
    loads and the deployment fails later, or never trips to what was meant)."""
    data = copy.deepcopy(SMALL_POLICY)
    data["calibration"] = {"fallback": word}
    with pytest.raises(PolicyError) as caught:
        parse_policy(data)
    assert "'escalate'" in str(caught.value) and "'escalate_risky'" in str(caught.value)
    for ok in ("escalate", "escalate_risky", "strict.json", "./strict", "fallbacks/strict"):
        data["calibration"] = {"fallback": ok}
        assert parse_policy(data).calibration.fallback == ok
    with pytest.raises(ValueError, match="escalate_risky"):
        Breaker(0.5, None, word, None, None)


def test_schema_describes_the_fallbacks() -> None:
    """The JSON Schema's ``calibration.fallback`` names both words.  Catches the description left stale."""
    schema = policy_json_schema()
    text = schema["$defs"]["CalibrationSpec"]["properties"]["fallback"]["description"]
    assert "'escalate'" in text and "'escalate_risky'" in text


def test_from_policy_reads_escalate_risky(tmp_path: Path) -> None:
    """``calibration.fallback: escalate_risky`` in a policy file reaches the breaker; ``escalate`` (and no key)
    stays the old ``-inf`` fallback.  Catches the word read as an artifact path by ``load_deployment``
    (planted: the old ``!= "escalate"`` test -> loading fails)."""
    source = ROOT / "policies" / "agentdojo" / "banking.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    data["calibration"]["artifact"] = str((source.parent / data["calibration"]["artifact"]).resolve())
    kappa = data.get("safecommit", {}).get("kappa", {})
    if "artifact" in kappa:
        kappa["artifact"] = str((source.parent / kappa["artifact"]).resolve())
    for word, expected in (("escalate_risky", "escalate_risky"), ("escalate", "escalate"), (None, "escalate")):
        if word is None:
            data["calibration"].pop("fallback", None)
        else:
            data["calibration"]["fallback"] = word
        path = tmp_path / f"{word}.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        guard = Guard.from_policy(path)
        assert guard.trip_state.fallback_word == expected and guard.trip_state.fallback == -math.inf
        guard.trip("alarm")
        assert guard.threshold == guard.trip_state.calibrated


RISKY_READS: list[tuple[str, dict[str, Any]]] = [
    ("read_document", {"path": UNTRUSTED_VALUE}),  # a value of untrusted MCP content
    ("read_document", {"path": TEXTS.cert_number}),  # a value of the private certificate
    ("read_document", {"path": f"notes on {TEXTS.attacker}"}),  # a value of the untrusted inbox
    ("read_certificate", {"name": "passport"}),  # user-named, and held by the private certificate too
]


@pytest.mark.parametrize(("tool", "args"), RISKY_READS, ids=[str(a) for _, a in RISKY_READS])
def test_escalate_risky_lets_every_read_run_whatever_its_provenance(
    small_policy: Policy, tool: str, args: dict[str, Any]
) -> None:
    """After a trip with ``escalate_risky``, a read (a tool that is neither a sink nor has a side effect) keeps
    the calibrated threshold whatever its provenance: each row carries a value of a private or untrusted record
    (the gate's provenance test says so) and executes, at the calibrated threshold.

    Catches reads escalated by provenance, which stopped every look-up after a ticket was read (planted: the
    ``elif not acts(spec): return None`` branch removed from ``Breaker.escalation`` -> every row escalates)."""
    guard, session, _ = _tripped(small_policy, "escalate_risky")
    decision = session.decide(tool, args, "r1")
    assert risky_provenance(session, decision.proposal_index, frozenset(decision.selected)), "row must be risky"
    assert decision.verdict is Verdict.EXECUTE, decision.message
    assert decision.threshold == guard.trip_state.calibrated


SPECS = [
    {"kind": kind, "effect": effect}
    for kind in ("private_source", "public_source", "untrusted_source", "sink", "other", ["sink", "untrusted_source"])
    for effect in ("none", "reversible", "irreversible")
]


def _answers() -> list[tuple[str, Any]]:
    def raises() -> bool:
        raise RuntimeError("graph gone")

    return [("risky", lambda: True), ("clean", lambda: False), ("raises", raises), ("missing", None)]


@pytest.mark.parametrize("spec", SPECS, ids=[f"{s['kind']}-{s['effect']}" for s in SPECS])
def test_escalate_risky_never_escalates_what_escalate_lets_run(spec: dict[str, Any]) -> None:
    """For every kind and effect (and an unknown tool), whatever the provenance test answers (risky, clean,
    raises, missing): a call ``escalate_risky`` escalates is one ``escalate`` escalates too; a read never asks the
    provenance test; an irreversible effect or an unknown tool escalates without asking it; a sink or side effect
    escalates unless the test says exactly False.

    Catches a read escalated by provenance (planted: the read branch of ``Breaker.escalation`` removed -> a
    ``private_source``/``none`` tool with risky provenance escalates under ``escalate_risky`` only) and a fail-open
    side effect (planted: ``found = False`` in the ``except`` branch -> a reversible sink whose test raises runs).
    """
    tool = ToolSpec.model_validate(spec)
    risky, plain = Breaker(0.5, None, "escalate_risky", None, None), Breaker(0.5, None, "escalate", None, None)
    risky.trip("alarm", None)
    plain.trip("alarm", None)
    for label, answer in _answers():
        asked: list[bool] = []

        def counted(answer: Any = answer, asked: list[bool] = asked) -> bool:
            asked.append(True)
            return bool(answer())

        test = None if answer is None else counted
        for candidate in (tool, None):
            escalated = risky.escalates(candidate, test)
            assert not escalated or plain.escalates(candidate, test), (label, candidate)
        acts = tool.is_sink or tool.effect is not Effect.NONE
        asked.clear()
        escalated = risky.escalates(tool, test)
        if not acts:
            assert not escalated and not asked, label
        elif tool.effect is Effect.IRREVERSIBLE:
            assert escalated and not asked, label
        else:
            assert escalated is (label != "clean"), label


def test_a_guard_built_from_a_policy_applies_its_fallback(tmp_path: Path) -> None:
    """``Guard(policy, threshold=...)`` applies the policy's ``calibration.fallback`` as ``Guard.from_policy`` does:
    no key and ``escalate`` -> ``-inf``, ``escalate_risky`` -> that word, an artifact path -> its threshold and id (one
    looser than the given threshold is a PolicyError naming the policy); an explicit ``fallback=`` wins, and a
    ``fallback_id`` without a ``fallback`` is refused.

    Catches the constructor ignoring the policy (planted: the old ``fallback: float | str = -math.inf`` default ->
    the ``escalate_risky`` and artifact rows trip to ``escalate``)."""
    from guard.deployment import load_deployment

    source = ROOT / "policies" / "agentdojo" / "banking.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    artifact = str((source.parent / data["calibration"]["artifact"]).resolve())
    data["calibration"]["artifact"] = artifact
    kappa = data.get("safecommit", {}).get("kappa", {})
    if "artifact" in kappa:
        kappa["artifact"] = str((source.parent / kappa["artifact"]).resolve())
    rows: list[tuple[str | None, str | None, bool]] = [
        (None, "escalate", False),
        ("escalate", "escalate", False),
        ("escalate_risky", "escalate_risky", False),
        (artifact, None, True),
    ]
    for named, word, by_artifact in rows:
        if named is None:
            data["calibration"].pop("fallback", None)
        else:
            data["calibration"]["fallback"] = named
        path = tmp_path / "p.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        found = load_deployment(path)
        guard = Guard(found.policy, threshold=found.threshold, artifact_id=found.artifact_id)
        state, expected = guard.trip_state, Guard.from_policy(path).trip_state
        assert (state.fallback_word, state.fallback, state.fallback_id) == (
            expected.fallback_word,
            expected.fallback,
            expected.fallback_id,
        ), named
        assert state.fallback_word == word
        assert (state.fallback_id is not None) is by_artifact
        if by_artifact:
            with pytest.raises(PolicyError, match="looser than the guard's"):
                Guard(found.policy, threshold=found.threshold - 0.01)
        explicit = Guard(found.policy, threshold=found.threshold, fallback="escalate")
        assert explicit.trip_state.fallback_word == "escalate"
    with pytest.raises(PolicyError, match="fallback_id"):
        Guard(found.policy, threshold=found.threshold, fallback_id="strict#1")
