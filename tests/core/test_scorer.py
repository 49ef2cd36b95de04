"""The frozen weighted scorer (METHOD §6)."""

from __future__ import annotations

from typing import Any

import pytest

from guard.graph import PrefixGraph, build_graph
from guard.policy import FeatureWeights, Policy
from guard.records import Record, Trust, proposal, result, user
from guard.scorer import FEATURES, WeightedScorer

CERT = "Number: X4821-99317"


def _graph(policy: Policy, *records: Record) -> PrefixGraph:
    return build_graph(policy, records)


def _features(policy: Policy, graph: PrefixGraph, node: int, selected: set[int]) -> dict[str, bool]:
    return WeightedScorer(policy).features(graph, node, frozenset(selected))


def _on(features: dict[str, bool]) -> set[str]:
    return {name for name, value in features.items() if value}


def test_feature_names_match_weights() -> None:
    """Every feature has exactly one weight in the policy model."""
    assert set(FEATURES) == set(FeatureWeights.model_fields)


def test_leak_fires_provenance_private_and_irreversible(small_policy: Policy) -> None:
    """A sink carrying a selected private value fires provenance_path, private_in_context, irreversible_sink."""
    g = _graph(
        small_policy,
        result(0, "c0", CERT, Trust.TOOL_PRIVATE, "read_certificate"),
        proposal(1, "send_email", {"to": "a@b.io", "body": "X4821-99317"}, "c1"),
    )
    assert _on(_features(small_policy, g, 1, {0})) == {"provenance_path", "private_in_context", "irreversible_sink"}


def test_provenance_needs_the_source_selected(small_policy: Policy) -> None:
    """Without the source in the selection, provenance_path does not fire."""
    g = _graph(
        small_policy,
        result(0, "c0", CERT, Trust.TOOL_PRIVATE, "read_certificate"),
        proposal(1, "send_email", {"to": "a@b.io", "body": "X4821-99317"}, "c1"),
    )
    assert _on(_features(small_policy, g, 1, set())) == {"irreversible_sink"}


def test_disconnected_private_fires_only_private_in_context(small_policy: Policy) -> None:
    """A selected private record with no path to the sink fires private_in_context, not provenance_path."""
    g = _graph(
        small_policy,
        result(0, "c0", CERT, Trust.TOOL_PRIVATE, "read_certificate"),
        proposal(1, "post_note", {"body": "lunch at noon"}, "c1"),
    )
    assert _on(_features(small_policy, g, 1, {0})) == {"private_in_context"}


def test_provenance_only_for_sinks(small_policy: Policy) -> None:
    """A non-sink carrying a private value does not fire provenance_path."""
    g = _graph(
        small_policy,
        result(0, "c0", CERT, Trust.TOOL_PRIVATE, "read_certificate"),
        proposal(1, "create_note", {"body": "X4821-99317"}, "c1"),
    )
    assert "provenance_path" not in _on(_features(small_policy, g, 1, {0}))


def test_canary_in_payload(small_policy: Policy) -> None:
    """A canary pattern in a payload argument fires canary with nothing selected."""
    g = _graph(small_policy, proposal(0, "post_note", {"body": "CANARY-0badcafe"}, "c"))
    assert "canary" in _on(_features(small_policy, g, 0, set()))


def test_canary_outside_payload_args_is_ignored(small_policy: Policy) -> None:
    """A canary in a non-payload argument of the proposal does not fire canary."""
    g = _graph(small_policy, proposal(0, "read_inbox", {"q": "CANARY-0badcafe"}, "c"))
    assert "canary" not in _on(_features(small_policy, g, 0, set()))


def test_canary_in_selection(small_policy: Policy) -> None:
    """A canary in a selected record fires canary."""
    g = _graph(
        small_policy,
        result(0, "c0", "secret CANARY-12345678", Trust.TOOL_PUBLIC, "read_document"),
        proposal(1, "post_note", {"body": "hi"}, "c1"),
    )
    assert "canary" in _on(_features(small_policy, g, 1, {0}))
    assert "canary" not in _on(_features(small_policy, g, 1, set()))


def test_injection_text_in_selection(small_policy: Policy, texts: Any) -> None:
    """Injection-like text in a selected record fires injection_text."""
    g = _graph(
        small_policy,
        result(0, "c0", texts.inbox, Trust.TOOL_UNTRUSTED, "read_inbox"),
        proposal(1, "post_note", {"body": "hi"}, "c1"),
    )
    assert "injection_text" in _on(_features(small_policy, g, 1, {0}))


def test_untrusted_payload(small_policy: Policy, texts: Any) -> None:
    """A recipient reused from an untrusted record fires untrusted_payload."""
    g = _graph(
        small_policy,
        result(0, "c0", texts.inbox, Trust.TOOL_UNTRUSTED, "read_inbox"),
        proposal(1, "send_email", {"to": texts.attacker, "body": "hi"}, "c1"),
    )
    assert "untrusted_payload" in _on(_features(small_policy, g, 1, {0}))


def test_untrusted_payload_cleared_when_user_named_it(small_policy: Policy, texts: Any) -> None:
    """A value the user also named does not fire untrusted_payload."""
    g = _graph(
        small_policy,
        user(0, f"reply to {texts.attacker}"),
        result(1, "c0", texts.inbox, Trust.TOOL_UNTRUSTED, "read_inbox"),
        proposal(2, "send_email", {"to": texts.attacker, "body": "hi"}, "c1"),
    )
    assert "untrusted_payload" not in _on(_features(small_policy, g, 2, {0, 1}))


def test_untrusted_payload_needs_selection(small_policy: Policy, texts: Any) -> None:
    """An untrusted source outside the selection does not fire untrusted_payload."""
    g = _graph(
        small_policy,
        result(0, "c0", texts.inbox, Trust.TOOL_UNTRUSTED, "read_inbox"),
        proposal(1, "send_email", {"to": texts.attacker, "body": "hi"}, "c1"),
    )
    assert "untrusted_payload" not in _on(_features(small_policy, g, 1, set()))


def test_score_is_sum_of_fired_weights(small_policy: Policy, texts: Any) -> None:
    """The score is the sum of the weights of the features that fired."""
    g = _graph(
        small_policy,
        result(0, "c0", CERT, Trust.TOOL_PRIVATE, "read_certificate"),
        result(1, "c1", texts.inbox, Trust.TOOL_UNTRUSTED, "read_inbox"),
        proposal(2, "send_email", {"to": texts.attacker, "body": "X4821-99317"}, "c2"),
    )
    score, features = WeightedScorer(small_policy).score(g, 2, frozenset({0, 1}))
    weights = small_policy.scorer.weights.model_dump()
    assert score == pytest.approx(sum(weights[n] for n, on in features.items() if on))
    assert _on(dict(features)) == set(FEATURES) - {"canary"}


def test_score_features_are_read_only(small_policy: Policy) -> None:
    """The feature mapping returned with a score cannot be changed."""
    g = _graph(small_policy, proposal(0, "post_note", {"body": "x"}, "c"))
    _, features = WeightedScorer(small_policy).score(g, 0, frozenset())
    with pytest.raises(TypeError):
        features["canary"] = True  # type: ignore[index]


def test_custom_weights_change_score(policy_data: dict[str, Any]) -> None:
    """Scores follow the policy's weights."""
    from guard.policy import parse_policy

    policy_data["scorer"] = {"weights": {"irreversible_sink": 0.9}}
    policy = parse_policy(policy_data)
    g = _graph(policy, proposal(0, "send_email", {"to": "a@b.io", "body": "x"}, "c"))
    assert WeightedScorer(policy).score(g, 0, frozenset())[0] == pytest.approx(0.9)
