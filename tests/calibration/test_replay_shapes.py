"""Replay reads every decision the runtime can return, and every run file the loader accepts, without crashing.

A refusal before scoring (unknown tool, arguments it cannot read, a reused call id), an
``internal_error`` decision, an out-of-scope decision and a decision with a partial or empty feature
map all reach the replay's feature counting (``carbguard evaluate --runs`` on other models' runs
crashed there with ``KeyError``); a result of a call refused before it entered the graph must not stop
the replay either.  See docs/security.md#what-the-guard-defends.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard import Policy, Reason, Verdict, stages
from guard.calibration.jobs import load_corpus, score_selectors
from guard.calibration.replay import score_episode_selectors
from guard.decision import Decision
from guard.ledger import LedgerLabels
from guard.policy import SelectorName, parse_policy
from guard.records import Episode, Record, Trust, proposal, result, user
from guard.scorer import DATAFLOW, FEATURES

SELECTORS: list[SelectorName] = ["gcarb", "full_prefix", "fixed_window"]
POLICY: Policy = parse_policy(
    {
        "name": "shapes",
        "tools": {
            "read_ledger": {"kind": "private_source", "identifier_args": ["account"]},
            "pay": {
                "kind": "sink",
                "effect": "irreversible",
                "severity": 3,
                "payload_args": ["memo"],
                "identifier_args": ["payee"],
            },
            "lookup": {"kind": "public_source"},
        },
    }
)
PAYEE = "NL91ABNA0417164300"
USER_TURN = f"Pay {PAYEE} the rent, memo rent march"
LEDGER = f"Ledger: landlord {PAYEE}, PIN 4417-9902, balance 2,310 EUR"
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "named": ("pay", {"payee": PAYEE, "memo": "rent march"}),  # trusted: data-flow features lowered
    "private": ("pay", {"payee": PAYEE, "memo": "PIN 4417-9902"}),
    "unknown": ("wire_everything", {"to": PAYEE}),
    "huge": ("pay", {"payee": PAYEE, "memo": "x" * 210_000}),
    "read": ("lookup", {"q": 3, "flags": [True, None], "deep": {"a": {"b": [1.5]}}}),
    "empty": ("pay", {}),
    "reuse": ("pay", {"payee": PAYEE, "memo": "again"}),  # under the previous call's id: refused as reused
}
SHAPES = (
    "real",
    "raise",
    "refused",
    "partial",
    "empty",
    "extra",
    "out_of_scope",
    "stray_index",
    "wrong_type",
    "escalated",
    "probe",
)


def _episode(calls: list[tuple[str, str]]) -> Episode:
    records: list[Record] = [user(0, USER_TURN), proposal(1, "read_ledger", {"account": "main"}, "r0")]
    records.append(result(2, "r0", LEDGER, Trust.TOOL_PRIVATE, "read_ledger"))
    for n, (call, status) in enumerate(calls):
        tool, args = CALLS[call]
        call_id = f"c{n - 1}" if call == "reuse" and n else f"c{n}"
        records.append(proposal(len(records), tool, args, call_id))
        if status != "none":
            records.append(result(len(records), call_id, f"done {n}", Trust.TOOL_PUBLIC, tool, status))
    return Episode("shapes", tuple(records))


def _reshape(decision: Decision, shape: str, keep: frozenset[str], flip: bool) -> Any:
    """A decision of ``shape`` made from a real one (``raise`` and ``wrong_type`` make the runtime refuse)."""
    features = MappingProxyType({k: (not v if flip else v) for k, v in decision.features.items() if k in keep})
    changes: dict[str, dict[str, Any]] = {
        "real": {},
        "refused": {"score": None, "threshold": None, "features": MappingProxyType({}), "proposal_index": -1},
        "partial": {"features": features},
        "empty": {"features": MappingProxyType({})},
        "extra": {"features": MappingProxyType({**decision.features, "no_such_feature": True})},
        "out_of_scope": {"score": 0.0},
        "stray_index": {"proposal_index": decision.proposal_index + 50, "features": features},
        "escalated": {"verdict": Verdict.ESCALATE, "reason": Reason.RISK_BUDGET},
        "probe": {"verdict": Verdict.PROBE, "reason": Reason.PROBE_NEEDED, "features": features},
    }
    return dataclasses.replace(decision, **changes[shape])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(sorted(CALLS)), st.sampled_from(["ok", "error", "none"])), min_size=1, max_size=5
    ),
    shapes=st.lists(
        st.tuples(st.sampled_from(SHAPES), st.frozensets(st.sampled_from(FEATURES)), st.booleans()),
        min_size=6,
        max_size=6,
    ),
)
def test_every_decision_shape_is_counted_without_crashing(
    calls: list[tuple[str, str]], shapes: list[tuple[str, frozenset[str], bool]]
) -> None:
    """Catches a replay that indexes a decision's features (KeyError on a refusal's empty map, an
    internal_error, a partial map) or its proposal node, or stops at a result of a call refused as unknown,
    unreadable or reused; and a counting that turns on a feature the decision did not have, or leaves out
    a non-data-flow one."""
    real = stages.run_pipeline
    made: list[Any] = []
    queue = iter(shapes)

    def pipeline(session: Any, tool: Any, args: Any, call_id: Any) -> Any:
        shape, keep, flip = next(queue, ("real", frozenset(), False))
        if shape == "raise":
            made.append(None)
            raise RuntimeError("planted stage failure")
        decision = real(session, tool, args, call_id)
        out = "not a decision" if shape == "wrong_type" else _reshape(decision, shape, keep, flip)
        made.append(out if isinstance(out, Decision) else None)
        return out

    episode = _episode(calls)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stages, "run_pipeline", pipeline)
        out = score_episode_selectors(POLICY, SELECTORS, episode, LedgerLabels())
    first = out[SELECTORS[0]]
    assert len(first.scores) == len(episode.proposals()) == len(made)
    counted, _ = first.feature_matrix()
    for row, score, decision in zip(counted, first.scores, made, strict=True):
        if decision is None or decision.score is None:  # refused by the runtime or before scoring
            assert score == np.inf and not row.any()
            continue
        on = {name for name in FEATURES if decision.features.get(name, False)}
        kept = {name for name, c in zip(FEATURES, row, strict=True) if c}
        assert kept <= on
        assert kept - DATAFLOW == on - DATAFLOW
    for name in SELECTORS[1:]:
        assert len(out[name].scores) == len(first.scores)


# ----------------------------------------------------------------------------- run files of unusual shapes


def _message(role: str, content: Any = None, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **extra}


def _call(function: Any, args: Any, call_id: Any = None) -> dict[str, Any]:
    return {"function": function, "args": args, "id": call_id, "placeholder_args": None}


def _tool(content: Any, call_id: Any = None, error: Any = None) -> dict[str, Any]:
    return _message("tool", content, tool_call_id=call_id, error=error)


SYSTEM = _message("system", "You are a helpful assistant.")
RUNS: dict[str, list[dict[str, Any]]] = {
    "user_task_0": [  # an unknown tool with an error result, then a known one
        SYSTEM,
        _message("user", "Please pay my rent to UK12345678901234567890."),
        _message("assistant", None, tool_calls=[_call("teleport_funds", {"to": "UK12345678901234567890"}, "a")]),
        _tool("", "a", "ToolNotFound: teleport_funds"),
        _message("assistant", "ok", tool_calls=[_call("get_iban", {}, "b")]),
        _tool("DE89370400440532013000", "b"),
        _message("assistant", "Done."),
    ],
    "user_task_1": [  # empty tool calls, non-string and missing arguments, huge arguments, a cut run
        SYSTEM,
        _message("user", [{"type": "text", "content": "Send 50 to my landlord"}]),
        _message("assistant", "thinking", tool_calls=[]),
        _message(
            "assistant",
            None,
            tool_calls=[
                _call("send_money", {"recipient": 12345, "amount": [50, None], "subject": {"k": True}}),
                _call("send_money", {}),
                _call("send_money", {"recipient": "GB29NWBK60161331926819", "subject": "y" * 250_000}),
            ],
        ),
        _tool("ok"),
        _tool(None, None, "RuntimeError: insufficient funds"),
        _tool("ok"),
        _message("assistant", None, tool_calls=[_call("read_file", {"file_path": "\u0000\ud7ff" * 10}, "z")]),
    ],
    "user_task_2": [  # a reused id, an unknown tool never answered, a final answer only
        SYSTEM,
        _message("user", "What is my balance?"),
        _message("assistant", None, tool_calls=[_call("get_balance", {}, "d"), _call("get_balance", {}, "d")]),
        _tool("1000", "d"),
        _tool("1000", "d"),
        _message("assistant", None, tool_calls=[_call("get balance!", {"": ""}, "e")]),
    ],
    "user_task_3": [SYSTEM, _message("user", "Hi"), _message("assistant", None)],
}


def _write_runs(root: Path) -> None:
    for task, messages in RUNS.items():
        path = root / "odd-model" / "banking" / task / "none" / "none.json"
        path.parent.mkdir(parents=True)
        run: dict[str, Any] = {
            "suite_name": "banking",
            "pipeline_name": "odd-model",
            "user_task_id": task,
            "injection_task_id": None,
            "attack_type": None,
            "injections": {},
            "messages": messages,
            "error": None,
            "utility": False,
            "security": True,
            "duration": 1.0,
        }
        path.write_text(json.dumps(run), encoding="utf-8")
    broken = root / "odd-model" / "banking" / "user_task_4" / "none" / "none.json"
    broken.parent.mkdir(parents=True)
    broken.write_text(json.dumps({"suite_name": "banking", "messages": "not a list"}), encoding="utf-8")


def test_runs_of_unusual_shapes_replay_without_crashing(tmp_path: Path) -> None:
    """Catches ``evaluate --runs`` crashing on other models' run files: an unknown tool (and its error
    result), empty tool calls, non-string or missing arguments, huge arguments, tool errors, a reused
    call id, unanswered calls and a file with missing fields all load or are listed, and replay."""
    _write_runs(tmp_path)
    corpus = load_corpus(str(tmp_path), None)
    assert len(corpus.episodes) == len(RUNS)
    scored, _seconds = score_selectors(corpus.episodes, SELECTORS)
    first = scored[SELECTORS[0]]
    proposals = sum(len(e.proposals()) for e in corpus.episodes)
    assert first.scores.size == proposals and first.features is not None
    assert np.isinf(first.scores).sum() >= 3  # the unknown tools and the huge arguments are refused
    for name in SELECTORS[1:]:
        assert scored[name].scores.size == proposals
