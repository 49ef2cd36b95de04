"""The shift report as a table and as a plot (matplotlib imported lazily, the style of guard/report/plots.py)."""

from __future__ import annotations

from typing import Any

from guard.calibration.two_level import TWO_LEVEL_RULE


def alpha_keys(result: dict[str, Any]) -> list[str]:
    return [f"{a:g}" for a in result["alphas"]]


def format_shift(result: dict[str, Any]) -> str:
    """One corpus: loss and harm-free ratio per α for every row, then the worst row and the rewording counts."""
    keys = alpha_keys(result)
    head = f"{'row':<56}{'n_test':>7}{'noguard':>9}" + "".join(f" | a={k:<5}{'loss':>6}{'hfree':>7}" for k in keys)
    lines = [
        f"corpus {result['corpus']}: {result['n_episodes']} episodes, rule {rule_words(result['rule'])} (G-CARB), "
        f"{result['permutations']} permutations (50/50), {result['folds']} goal folds x {result['repeats']} repeats",
        head,
        "-" * len(head),
    ]
    for name, row in result["rows"].items():
        first = row[keys[0]]
        label = f"{name} = {'/'.join(dict.fromkeys(_short(row['of'][k]) for k in keys))}" if "of" in row else name
        cells = "".join(f" | {'':<7}{row[k]['loss']:>6.3f}{row[k]['harm_free_ratio']:>7.3f}" for k in keys)
        lines.append(f"{label[:55]:<56}{first['n_test']:>7.0f}{first['noguard_loss']:>9.3f}{cells}")
    worst = "; ".join(
        f"a={k}: {result['worst'][k]} (loss {result['rows'][result['worst'][k]][k]['loss']:.3f})" for k in keys
    )
    lines.append(f"worst row: {worst}")
    lines.append(_counts_line(result["reworded"]))
    if "ablation" in result:
        from guard.studies._shift_ablation import format_ablation

        alphas = [float(k) for k in keys]
        lines += ["ablation: the worst row of every variant (loss / harm-free ratio, which row)"]
        lines.append(format_ablation(result["ablation"], alphas))
    return "\n".join(lines)


def _short(name: str) -> str:
    """A row name without its kind (``reworded: plain_note`` → ``plain_note``)."""
    return name.split(": ", 1)[-1]


def _counts_line(counts: dict[str, dict[str, Any]]) -> str:
    if not counts:
        return "reworded: no style"
    texts = {c["injected_texts"] for c in counts.values()}
    left = {c["left_unchanged"] for c in counts.values()}
    occ = {c["occurrences_reworded"] for c in counts.values()}
    return (
        f"rewording ({len(counts)} styles): injected texts {'/'.join(map(str, sorted(texts)))}, "
        f"left unchanged {'/'.join(map(str, sorted(left)))}, "
        f"template occurrences reworded in tool results {'/'.join(map(str, sorted(occ)))}"
    )


def rule_words(rule: dict[str, Any]) -> str:
    """The calibration rule in a few words: per α, the two-level rule (with α_g), the group rule or plain CRC, and
    the utility slack."""
    levels = rule.get("group_alpha") or {}
    per = ", ".join(
        f"α {a}: {r}" + (f" (α_g {levels[a]:.4g})" if r == TWO_LEVEL_RULE and a in levels else "")
        for a, r in rule["per_alpha"].items()
    )
    groups = f", G={rule['groups']}" if rule.get("groups") else ""
    return f"{per}{groups}, utility slack {rule['utility_slack']}"
