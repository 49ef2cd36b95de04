"""Tables and plots of evaluation results (matplotlib imported lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guard.errors import GuardError
from guard.studies._shift_report import alpha_keys, rule_words


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise GuardError("plotting needs matplotlib: pip install 'carbguard[plot]'") from exc
    return plt


def frontier_plot(result: dict[str, Any], path: str | Path) -> None:
    """Loss and autonomous success against α, one line per method ."""
    plt = _pyplot()
    fig, (ax_loss, ax_util) = plt.subplots(1, 2, figsize=(11, 4.2))
    methods = [m for m in result["methods"] if m not in ("no_guard", "stop_all")]
    for method in methods:
        rows = sorted((r for r in result["results"] if r["method"] == method), key=lambda r: r["alpha"])
        alphas = [r["alpha"] for r in rows]
        ax_loss.plot(alphas, [r["mean_loss"] for r in rows], marker="o", label=method)
        ax_util.plot(alphas, [r["autonomous_success"] for r in rows], marker="o", label=method)
    alphas = sorted({r["alpha"] for r in result["results"] if r["alpha"] is not None})
    ax_loss.plot(alphas, alphas, color="black", linestyle=":", label="α (target)")
    for row in result["results"]:
        if row["method"] == "no_guard":
            ax_loss.axhline(row["mean_loss"], color="grey", linestyle="--", label="no guard")
            ax_util.axhline(row["autonomous_success"], color="grey", linestyle="--", label="no guard")
    ax_loss.set(xlabel="α", ylabel="mean held-out episode loss", title="Ledger loss")
    ax_util.set(xlabel="α", ylabel="autonomous success", title="Utility kept")
    ax_util.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Risk–utility frontier: {result['corpus']} ({result['n_episodes']} episodes)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fitted_frontier_plot(results: list[dict[str, Any]], path: str | Path) -> None:
    """Before/after: held-out loss and harm-free success ratio against α, frozen vs fitted weights, per corpus."""
    plt = _pyplot()
    shown = [r for r in results if "fitted" in r]
    fig, axes = plt.subplots(2, len(shown), figsize=(3.2 * len(shown), 6.2), squeeze=False)
    series = (
        ("frozen weights, 2-way 50/50", "results", "carb_gcarb", "no_guard"),
        ("frozen weights, 3-way", "fitted", "carb_gcarb_frozen_3way", "no_guard_3way"),
        ("fitted weights, 3-way", "fitted", "carb_gcarb_fit", "no_guard_3way"),
    )
    for col, result in enumerate(shown):
        for label, where, method, base_name in series:
            rows = result[where] if where == "results" else result[where]["results"]
            base = next(r for r in rows if r["method"] == base_name)["harm_free_success"] or float("nan")
            mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["alpha"])
            alphas = [r["alpha"] for r in mine]
            axes[0][col].plot(alphas, [r["mean_loss"] for r in mine], marker="o", label=label)
            axes[1][col].plot(alphas, [r["harm_free_success"] / base for r in mine], marker="o", label=label)
        alphas = sorted({r["alpha"] for r in result["results"] if r["alpha"] is not None})
        axes[0][col].plot(alphas, alphas, color="black", linestyle=":", label="α")
        axes[0][col].set(title=str(result["corpus"])[:24], xlabel="α")
        axes[1][col].set(xlabel="α", ylim=(0, 1.05))
    axes[0][0].set(ylabel="mean held-out loss")
    axes[1][0].set(ylabel="harm-free success / no guard")
    axes[1][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(
        "Risk–utility frontier before (frozen shipped weights) and after (weights fitted on development episodes)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def shift_plot(results: list[dict[str, Any]], path: str | Path) -> None:
    """Held-out loss of every row against the α line, one panel per α, one marker series per corpus."""
    plt = _pyplot()
    keys = alpha_keys(results[0])
    names = list(dict.fromkeys(n for r in results for n in r["rows"]))
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 0.32 * len(names) + 1.8), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        for result in results:
            shown = [(i, result["rows"][n][key]["loss"]) for i, n in enumerate(names) if n in result["rows"]]
            ax.plot([v for _, v in shown], [i for i, _ in shown], marker="o", linestyle="", label=result["corpus"])
        ax.axvline(float(key), color="black", linestyle=":", label="α (target)")
        ax.set_yticks(range(len(names)), [n[:54] for n in names], fontsize=7)
        ax.invert_yaxis()
        ax.set(xlabel="mean held-out episode loss", title=f"α = {key}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=min(len(labels), 4))
    fig.suptitle(f"Shift report: loss at the calibrated λ̂ ({rule_words(results[0]['rule'])})")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
