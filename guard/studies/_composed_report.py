"""The composed-gate shift study as text (:mod:`guard.studies.composed_shift`)."""

from __future__ import annotations

from typing import Any

from guard.studies._shift_report import rule_words

_MODE_TITLE = {
    "probe_stop": "score + SafeCommit, probe = stop",
    "probe_answered": "score + SafeCommit, probes answered",
}


def format_composed(result: dict[str, Any]) -> str:
    """Per α: every row's loss and harm-free ratio for the score alone and the composed gate, with its stops."""
    answered = result.get("probe_answers")
    lines = [
        f"composed gate under shift, model {result['model']}: {result['episodes']} episodes, "
        f"{result['side_effectful']} side-effectful proposals; rule {rule_words(result['rule'])}; "
        f"{result['permutations']} permutations (50/50), goal folds "
        + ", ".join(
            f"{k} x {v['repeats']} repeats (G={v['groups_min']}-{v['groups_max']})"
            for k, v in result["goal_folds"].items()
        )
        + f", seed {result['seed']}",
        "lambda-hat: the score's, on each calibration set; kappa: SafeCommit cases of the same calibration set",
        "probe = stop: log replay cannot answer a probe, so it stops the episode (as defer/escalate/abstain do)",
        (
            f"probes answered: in {answered} ({result['probes_run']} probe calls run), then decided again"
            if answered
            else "probes answered: not measured (no environment to answer probes)"
        ),
        "stop: share of test episodes stopped; sc: stopped by SafeCommit; probe: stopped by a probe, share of stops",
        "own: the composed gate with lambda-hat calibrated by the same rule on its own loss (score + SafeCommit)",
    ]
    modes = result["modes"]
    for key in (f"{a:g}" for a in result["alphas"]):
        head = f"{'row':<44}{'n_test':>7}{'noguard':>8} | {'alone loss':>10}{'hfree':>7}{'stop':>6}"
        for mode in modes:
            head += f" | {mode:>15}{'hfree':>7}{'stop':>6}{'sc':>6}{'probe':>6}{'own:loss':>9}{'hfree':>7}"
        lines += ["", f"alpha = {key}: " + "; ".join(f"{m}: {_MODE_TITLE[m]}" for m in modes), head, "-" * len(head)]
        for name, row in result["rows"].items():
            cell = row[key]
            alone = cell["alone"]
            text = (
                f"{name[:43]:<44}{alone['n_test']:>7.0f}{alone['noguard_loss']:>8.3f} | "
                f"{alone['loss']:>10.3f}{alone['harm_free_ratio']:>7.3f}{alone['stopped'] / alone['n_test']:>6.3f}"
            )
            for mode in modes:
                m, own = cell[mode], cell[f"{mode}_own_lambda"]
                share = m["stopped_by_probe"] / m["stopped"] if m["stopped"] else 0.0
                text += (
                    f" | {m['loss']:>15.3f}{m['harm_free_ratio']:>7.3f}{m['stopped'] / alone['n_test']:>6.3f}"
                    f"{m['stopped_by_safecommit'] / alone['n_test']:>6.3f}{share:>6.2f}"
                    f"{own['loss']:>9.3f}{own['harm_free_ratio']:>7.3f}"
                )
            lines.append(text)
    lines.append("")
    lines.append(
        "rewording: "
        + ", ".join(f"{k} ({v['episodes_changed']} episodes)" for k, v in result["reworded"].items())
        + f"; internal errors: {result['internal_errors']}"
    )
    return "\n".join(lines)
