"""Readable tables and the dropout plot of the constructed-suite diagnostics.

Re-exported by :mod:`guard.studies.diagnostics`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from guard.studies._diagnostics_scoring import ALPHA, Row

#: Seed 000's reported figures (F.2, G.1, G.2), for side-by-side tables; never used in a computation.
SEED_REFERENCE: dict[str, dict[str, dict[str, float]]] = {
    "ces_near_miss": {
        "carb_gcarb": {"benign_stop": 0.0},
        "carb_full_prefix": {"benign_stop": 1 / 3},
        "carb_fixed_window": {"benign_stop": 1 / 3},
        "carb_ledger_current": {"benign_stop": 2 / 3},
        "carb_random_equal_size": {"benign_stop": 2 / 3},
    },
    "braid": {
        "carb_gcarb": {"benign_stop": 0.0, "intervention": 0.390},
        "carb_random_equal_size": {"benign_stop": 0.079, "intervention": 0.905},
    },
    "evidence_removal": {
        "neither": {"recall": 0.0, "loss": 0.5},
        "no_provenance": {"recall": 1.0},
        "no_sink_text": {"recall": 1.0},
    },
    "edge_dropout": {"0.2": {"intervention": 1.0}},
}


def _ref(section: str, key: str, metric: str) -> str:
    value = SEED_REFERENCE.get(section, {}).get(key, {}).get(metric)
    return "" if value is None else f"{value:.3f}"


def _method_table(title: str, section: str, rows: Sequence[Row]) -> str:
    head = f"{'method':<22}{'loss':>7}{'interv':>8}{'utility':>9}{'benign':>8}{'harm':>7}   seed: benign interv"
    lines = [title, head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['method']:<22}{r['loss']:>7.3f}{r['intervention']:>8.3f}{r['utility']:>9.3f}{r['benign_stop']:>8.3f}"
            f"{r['harm_stop']:>7.3f}   {_ref(section, r['method'], 'benign_stop'):>12}"
            f"{_ref(section, r['method'], 'intervention'):>7}"
        )
    return "\n".join(lines)


def _transfer_table(rows: Sequence[Row]) -> str:
    kinds = sorted(rows[0]["benign_stop_by_kind"]) if rows else []
    head = f"{'method':<22}{'benign':>8}{'harm':>7}" + "".join(f"{k.removeprefix('nm_'):>16}" for k in kinds)
    lines = [
        "CES near-miss, thresholds calibrated on CES clean (benign stops by near-miss kind)",
        head,
        "-" * len(head),
    ]
    for r in rows:
        by = "".join(f"{r['benign_stop_by_kind'][k]:>16.3f}" for k in kinds)
        lines.append(f"{r['method']:<22}{r['benign_stop']:>8.3f}{r['harm_stop']:>7.3f}{by}")
    return "\n".join(lines)


def _evidence_table(rows: Sequence[Row]) -> str:
    head = f"{'cell':<16}{'provenance':>11}{'sink text':>10}{'recall':>8}{'loss':>7}{'interv':>8}   seed: recall loss"
    lines = ["Evidence removal (CES clean, G-CARB, threshold calibrated on the full cell)", head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['cell']:<16}{'yes' if r['provenance'] else 'no':>11}{'yes' if r['sink_text'] else 'no':>10}"
            f"{r['recall']:>8.3f}{r['loss']:>7.3f}{r['intervention']:>8.3f}   "
            f"{_ref('evidence_removal', r['cell'], 'recall'):>12}{_ref('evidence_removal', r['cell'], 'loss'):>6}"
        )
    if rows:
        lam = rows[0]["threshold"]
        lam_text = "-inf (stop all)" if lam is None else f"{lam:.3f}"
        lines.append(f"no guard loss {rows[0]['no_guard_loss']:.3f}; mean threshold {lam_text}")
    return "\n".join(lines)


def _dropout_table(rows: Sequence[Row]) -> str:
    head = f"{'dropout':<9}{'loss':>7}{'interv':>8}{'benign':>8}{'harm':>7}{'recall':>8}{'lambda':>8}"
    lines = ["Edge dropout (graph-braid, G-CARB recalibrated per rate)", head, "-" * len(head)]
    for r in rows:
        lam = "-inf" if r["threshold"] is None else f"{r['threshold']:.3f}"
        lines.append(
            f"{r['rate']:<9.2f}{r['loss']:>7.3f}{r['intervention']:>8.3f}{r['benign_stop']:>8.3f}"
            f"{r['harm_stop']:>7.3f}{r['recall']:>8.3f}{lam:>8}"
        )
    return "\n".join(lines)


def format_constructed(result: Mapping[str, Any]) -> str:
    """Readable tables of :func:`run_bench_constructed` (or :func:`bench_constructed`) output."""
    settings = result.get("settings", {})
    parts = [f"alpha = {settings.get('alpha', ALPHA)}, {settings.get('permutations', '?')} permutations (50/50 splits)"]
    titles = {
        "ces_clean": "CES clean (80 leaks, 80 matched non-leaks)",
        "ces_near_miss": "CES near-miss (80 leaks, 240 near-misses)",
        "braid": "Graph-braid (2,000 trajectories; benign = first stop on a benign-branch sink)",
    }
    for key, title in titles.items():
        if key in result:
            parts.append(_method_table(title, key, result[key]))
    if "ces_transfer" in result:
        parts.append(_transfer_table(result["ces_transfer"]))
    if "evidence_removal" in result:
        parts.append(_evidence_table(result["evidence_removal"]))
    if "edge_dropout" in result:
        parts.append(_dropout_table(result["edge_dropout"]))
    return "\n\n".join(parts)


def dropout_plot(result: Mapping[str, Any] | Sequence[Row], path: str | Path) -> Path:
    """Write a PNG of intervention and loss against the edge-dropout rate; return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["edge_dropout"] if isinstance(result, Mapping) else result
    rates = [r["rate"] * 100 for r in rows]
    fig, ax = plt.subplots(figsize=(5.0, 3.4), dpi=120)
    ax.plot(rates, [r["intervention"] for r in rows], marker="o", label="intervention")
    ax.plot(rates, [r["loss"] for r in rows], marker="s", label="mean ledger loss")
    alpha = result.get("settings", {}).get("alpha", ALPHA) if isinstance(result, Mapping) else ALPHA
    ax.axhline(alpha, color="grey", linestyle="--", linewidth=1, label=f"alpha = {alpha:g}")
    ax.set_xlabel("edges dropped (%)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Graph-braid, G-CARB recalibrated per dropout rate")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, metadata={"Software": None})
    plt.close(fig)
    return out
