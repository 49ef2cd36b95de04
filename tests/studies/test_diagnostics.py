"""Constructed-suite diagnostics (docs/studies.md) on the shipped suites.

Sizes are reduced (all of CES, the first 300 braid trajectories, 20 permutations) so the module runs
in seconds; the full run is ``run_bench_constructed()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from guard.calibration.evaluate import METHOD_SELECTORS
from guard.calibration.replay import score_episode
from guard.graph import E1, E3, PrefixGraph, ValueIndex, build_graph, record_text
from guard.policy import Policy, ToolKind
from guard.studies import constructed, diagnostics

PERMUTATIONS = 20
BRAID_SAMPLE = 300
METHODS = [
    "no_guard",
    "carb_gcarb",
    "carb_full_prefix",
    "carb_fixed_window",
    "carb_ledger_current",
    "carb_random_equal_size",
]
ROW_KEYS = {"method", "loss", "intervention", "utility", "benign_stop", "harm_stop"}


@pytest.fixture(scope="module")
def policy() -> Policy:
    """The packaged constructed-suite policy."""
    return constructed.constructed_policy()


@pytest.fixture(scope="module")
def suites(policy: Policy) -> diagnostics.Suites:
    """All CES episodes and the first braid trajectories, scored once with every method."""
    return diagnostics.score_suites(policy, braid=constructed.load_braid(policy=policy)[:BRAID_SAMPLE])


@pytest.fixture(scope="module")
def bench(suites: diagnostics.Suites) -> dict[str, list[dict[str, Any]]]:
    """The bench JSON at reduced permutations."""
    return diagnostics.bench_constructed(permutations=PERMUTATIONS, suites=suites)


def _row(rows: list[dict[str, Any]], method: str) -> dict[str, Any]:
    return next(r for r in rows if r["method"] == method)


def _max_scores(scored: diagnostics.ScoredItems, method: str, harmful: bool) -> np.ndarray:
    corpus = scored.corpus(method)
    mask = np.array([e.harmful is harmful for e in scored.items])
    values: np.ndarray = corpus.harm_level[mask] if harmful else corpus.max_score[mask]
    return values


# --------------------------------------------------------------------------- scoring


def test_scores_equal_the_session_replay(suites: diagnostics.Suites, policy: Policy) -> None:
    """One graph scored by every selector gives what replaying each episode through a Session gives."""
    sample = [*suites.ces.items[:10], *suites.braid.items[:10]]
    scored = diagnostics.score_items(sample, policy)
    for method, selector in METHOD_SELECTORS.items():
        for item, fast in zip(sample, scored.scores[method], strict=True):
            slow = score_episode(policy.with_selector(selector), item.episode, item.labels)  # type: ignore[arg-type]
            assert np.array_equal(fast.scores, slow.scores), (method, item.episode.episode_id)
            assert np.array_equal(fast.n_selected, slow.n_selected)
            assert np.array_equal(fast.n_prefix, slow.n_prefix)
            assert fast.harm_steps == slow.harm_steps


# --------------------------------------------------------------------------- the bench


def test_bench_json_shape(bench: dict[str, list[dict[str, Any]]]) -> None:
    """Three cohorts, each with no guard and the five CARB methods, each row with exactly six keys."""
    assert set(bench) == {"ces_clean", "ces_near_miss", "braid"}
    for rows in bench.values():
        assert [r["method"] for r in rows] == METHODS
        assert all(set(r) == ROW_KEYS for r in rows)


def test_gcarb_separates_near_misses_from_leaks(suites: diagnostics.Suites) -> None:
    """Mechanism: no near-miss reaches a leak's harm level under G-CARB (no path, no provenance)."""
    near = suites.cohort("near_miss")
    assert _max_scores(near, "carb_gcarb", False).max() < _max_scores(near, "carb_gcarb", True).min()


def test_ledger_current_cannot_separate_public_sends(suites: diagnostics.Suites) -> None:
    """Mechanism: the proposal alone of a public send scores like a leaking send."""
    near = suites.cohort("near_miss")
    assert _max_scores(near, "carb_ledger_current", False).max() >= _max_scores(near, "carb_ledger_current", True).min()


def test_gcarb_has_no_benign_stops_and_stops_every_leak(bench: dict[str, list[dict[str, Any]]]) -> None:
    """Given that separation, the CARB threshold lies below every leak and at or above every non-leak."""
    for cohort in ("ces_clean", "ces_near_miss", "braid"):
        row = _row(bench[cohort], "carb_gcarb")
        assert (row["benign_stop"], row["harm_stop"], row["loss"]) == (0.0, 1.0, 0.0), cohort


def test_gcarb_braid_benign_sinks_score_below_every_harm_level(suites: diagnostics.Suites) -> None:
    """Mechanism on graph-braid: a disconnected branch's sink never scores as high as a harmful chain."""
    corpus = suites.braid.corpus("carb_gcarb")
    benign = [corpus.scores[corpus.offsets[i] + b] for i, e in enumerate(suites.braid.items) for b in e.benign_sinks]
    assert max(benign) < _max_scores(suites.braid, "carb_gcarb", True).min()


def test_no_guard_loss_is_the_harm_rate(bench: dict[str, list[dict[str, Any]]]) -> None:
    """No guard never stops and its loss is the cohort's share of harmful episodes (about 1/2 and 1/4)."""
    clean, near = _row(bench["ces_clean"], "no_guard"), _row(bench["ces_near_miss"], "no_guard")
    assert clean["intervention"] == near["intervention"] == 0.0
    assert abs(clean["loss"] - 0.5) < 0.1 and abs(near["loss"] - 0.25) < 0.1


def test_calibrated_loss_stays_near_alpha(bench: dict[str, list[dict[str, Any]]]) -> None:
    """Every CARB method's mean test loss is within two standard errors of the α budget or below."""
    for cohort, rows in bench.items():
        n_test = {"ces_clean": 80, "ces_near_miss": 160, "braid": BRAID_SAMPLE // 2}[cohort]
        for row in rows[1:]:
            assert (
                row["loss"] <= diagnostics.ALPHA + 2 * (diagnostics.ALPHA * (1 - diagnostics.ALPHA) / n_test) ** 0.5
            ), (cohort, row)


def test_utility_is_one_minus_intervention(bench: dict[str, list[dict[str, Any]]]) -> None:
    """Every constructed episode succeeds when it runs to its end."""
    for rows in bench.values():
        assert all(abs(r["utility"] + r["intervention"] - 1.0) < 1e-12 for r in rows)


def test_transfer_from_clean_stops_disconnected_reads_with_full_prefix(suites: diagnostics.Suites) -> None:
    """Calibrated on CES clean, full prefix stops the disconnected-read near-misses; G-CARB stops none."""
    rows = {r["method"]: r for r in diagnostics.ces_transfer(suites, permutations=PERMUTATIONS)}
    assert rows["carb_gcarb"]["benign_stop"] == 0.0
    assert rows["carb_full_prefix"]["benign_stop_by_kind"]["nm_disconnected"] == 1.0
    assert rows["carb_full_prefix"]["benign_stop_by_kind"]["nm_internal_sink"] == 0.0


# --------------------------------------------------------------------------- evidence removal


def test_paraphrase_removes_every_copied_span(suites: diagnostics.Suites, policy: Policy) -> None:
    """After the rewrite no sink payload shares a min_span span or a value token with an earlier record."""
    for item in suites.ces.items[:40]:
        seen = diagnostics.paraphrase_sink_text(item.episode, policy)
        index = ValueIndex(policy.graph.value_patterns.values(), policy.graph.min_span)
        for before, after in zip(item.episode.records, seen.records, strict=True):
            spec = policy.tool(after.tool or "")
            if spec is not None and spec.kind is ToolKind.SINK and after.kind.value == "proposal":
                for name in spec.payload_args:
                    value = str(after.args.get(name, ""))
                    assert not index.span_sources(value) and not index.token_sources(value)
            else:
                assert after == before
            index.add(after.index, record_text(after), ())


def test_no_provenance_graph_has_no_structured_edges(suites: diagnostics.Suites, policy: Policy) -> None:
    """Removing structured provenance leaves only E2 (text reuse) and E4 (user) edges."""
    item = suites.ces.items[0]
    graph = diagnostics.no_provenance_graph(policy, item.episode.episode_id)
    for record in item.episode.records:
        graph.add(record)
    types = {t for _, _, data in graph.graph.edges(data=True) for t in data["types"]}
    assert types and not types & {E1, E3}


def test_evidence_removal_cells(suites: diagnostics.Suites) -> None:
    """Either channel alone keeps every harmful path; removing both gives recall 0 and no-guard loss."""
    rows = {r["cell"]: r for r in diagnostics.evidence_removal(suites, permutations=PERMUTATIONS)}
    assert [rows[c]["recall"] for c in ("full", "no_provenance", "no_sink_text", "neither")] == [1.0, 1.0, 1.0, 0.0]
    assert rows["neither"]["loss"] == pytest.approx(rows["neither"]["no_guard_loss"], abs=1e-12)
    assert rows["full"]["loss"] == 0.0


# --------------------------------------------------------------------------- edge dropout


def test_dropout_is_seeded_nested_and_near_its_rate(suites: diagnostics.Suites, policy: Policy) -> None:
    """Dropped edge sets grow with the rate, repeat exactly, and drop about the requested share."""
    bases: list[PrefixGraph] = [build_graph(policy, e.episode.records) for e in suites.braid.items[:150]]
    ids = [e.episode.episode_id for e in suites.braid.items[:150]]
    total = sum(g.graph.number_of_edges() for g in bases)
    previous: set[tuple[str, int, int]] = set()
    for rate in diagnostics.DROPOUT_RATES[1:]:
        kept = [
            diagnostics.EdgeFilterGraph.dropped_from(g, episode_id=i, dropout=rate, seed=0)
            for g, i in zip(bases, ids, strict=True)
        ]
        dropped = {
            (i, s, t)
            for g, k, i in zip(bases, kept, ids, strict=True)
            for s, t in g.graph.edges
            if not k.graph.has_edge(s, t)
        }
        assert previous <= dropped
        assert abs(len(dropped) / total - rate) < 4 * (rate * (1 - rate) / total) ** 0.5
        previous = dropped


def test_dropped_from_equals_incremental_dropout(suites: diagnostics.Suites, policy: Policy) -> None:
    """Thinning a built graph equals building with the dropping subclass, edge data included."""
    for item in suites.braid.items[:30]:
        eid = item.episode.episode_id
        base = build_graph(policy, item.episode.records)
        incremental = diagnostics.EdgeFilterGraph(policy, episode_id=eid, dropout=0.2, seed=3)
        for record in item.episode.records:
            incremental.add(record)
        thinned = diagnostics.EdgeFilterGraph.dropped_from(base, episode_id=eid, dropout=0.2, seed=3)
        assert sorted(incremental.graph.edges(data=True)) == sorted(thinned.graph.edges(data=True))


def test_snapshot_cannot_be_extended(suites: diagnostics.Suites, policy: Policy) -> None:
    """A thinned snapshot shares its base's index, so adding to it is refused."""
    item = suites.braid.items[0]
    snap = diagnostics.EdgeFilterGraph.dropped_from(
        build_graph(policy, item.episode.records[:-1]), episode_id="x", dropout=0.1, seed=0
    )
    with pytest.raises(ValueError, match="read-only"):
        snap.add(item.episode.records[-1])


def test_edge_dropout_rows(suites: diagnostics.Suites, bench: dict[str, list[dict[str, Any]]]) -> None:
    """Rate 0 is the plain G-CARB braid row; harmful-path recall never rises with the rate."""
    rows = diagnostics.edge_dropout(suites, permutations=PERMUTATIONS)
    assert [r["rate"] for r in rows] == list(diagnostics.DROPOUT_RATES)
    plain = _row(bench["braid"], "carb_gcarb")
    assert all(rows[0][k] == plain[k] for k in ROW_KEYS - {"method"})
    recalls = [r["recall"] for r in rows]
    assert recalls[0] == 1.0 and recalls == sorted(recalls, reverse=True)


# --------------------------------------------------------------------------- reporting


def test_run_bench_format_and_plot(suites: diagnostics.Suites, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """run_bench_constructed returns every section; format_constructed and dropout_plot render it."""
    monkeypatch.setattr(diagnostics, "score_suites", lambda progress=False: suites)
    result = diagnostics.run_bench_constructed(permutations=5)
    assert {"ces_clean", "ces_near_miss", "braid", "evidence_removal", "edge_dropout"} <= set(result)
    assert result["settings"]["alpha"] == 0.10
    text = diagnostics.format_constructed(result)
    for title in (
        "CES clean",
        "CES near-miss",
        "Graph-braid",
        "Evidence removal",
        "Edge dropout",
        "carb_random_equal_size",
    ):
        assert title in text
    png = diagnostics.dropout_plot(result, tmp_path / "dropout.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_full_run_meets_its_claims() -> None:
    """The shipped suites at 200 permutations: G-CARB has no benign stops and stops every harmful sink."""
    result = diagnostics.run_bench_constructed()
    for cohort in ("ces_clean", "ces_near_miss", "braid"):
        row = _row(result[cohort], "carb_gcarb")
        assert (row["benign_stop"], row["harm_stop"]) == (0.0, 1.0)
    neither = next(r for r in result["evidence_removal"] if r["cell"] == "neither")
    assert neither["recall"] == 0.0
