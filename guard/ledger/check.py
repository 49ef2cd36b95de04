"""Rules versus labels: per-category counts, the episodes the rules charge, and every disagreement.

An episode the rules charge but no label covers is listed as *unlabelled*: nobody has confirmed
that harm, and the ledger calibration uses charges it as it stands (a rule that fires on benign
episodes lowers the threshold).  "0 disagreements" therefore never hides charged episodes.

Per rule (category), :func:`rule_overrides` counts what the labels had to correct: ``charged``
episodes the rule charges, ``overridden`` labels that remove or move that category's charge on one
of them (the ledger after labels charges the category at other proposals, or not at all), and
``added`` labels that charge the category on an episode the rule did not charge with it.  A
well-scoped rule needs labels for its exceptions only: ``overridden + added`` small next to ``charged``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from guard.ledger import CATEGORIES, Ledger, LedgerLabels
from guard.ledger.labels import EpisodeLabel, categories_of
from guard.policy import Policy
from guard.records import Episode


def ledger_check(
    episodes: Sequence[Episode],
    policy_of: Mapping[str, Policy],
    labels: Mapping[str, EpisodeLabel],
    attached: Mapping[str, LedgerLabels],
) -> dict[str, Any]:
    """Counts per category (rules alone, labels, the ledger used for calibration) and the disagreements."""
    counts = {name: {"rules": 0, "labels": 0, "ledger": 0} for name in CATEGORIES}
    charged = {"rules": 0, "labels": 0, "ledger": 0}
    per_rule = {name: {"charged": 0, "overridden": 0, "added": 0} for name in CATEGORIES}
    disagreements: list[dict[str, Any]] = []
    by_rules: list[dict[str, Any]] = []
    for episode in episodes:
        ledger = Ledger(policy_of[episode.episode_id], LedgerLabels())
        rule_events = ledger.trace(episode).events
        final_events = ledger.trace(episode, attached.get(episode.episode_id)).events
        rules, final = categories_of(rule_events), categories_of(final_events)
        for name, change in rule_overrides(rule_events, final_events).items():
            per_rule[name]["charged"] += change != "added"
            per_rule[name]["overridden"] += change == "overridden"
            per_rule[name]["added"] += change == "added"
        label = labels.get(episode.episode_id)
        labelled = frozenset(h.category for h in label.harms) if label else frozenset()
        for name in CATEGORIES:
            counts[name]["rules"] += name in rules
            counts[name]["labels"] += name in labelled
            counts[name]["ledger"] += name in final
        charged["rules"] += bool(rules)
        charged["labels"] += bool(labelled)
        charged["ledger"] += bool(final)
        if rules:
            by_rules.append({"episode": episode.episode_id, "rules": sorted(rules), "labelled": label is not None})
        if label is not None and _disagree(label, rules, labelled):
            disagreements.append(
                {
                    "episode": episode.episode_id,
                    "line": label.line,
                    "mode": label.mode,
                    "rules": sorted(rules),
                    "label": sorted(labelled),
                    "ledger": sorted(final),
                    "by": label.by,
                    "why": label.why,
                }
            )
    declared = {name for policy in {id(p): p for p in policy_of.values()}.values() for name in _declared(policy)}
    return {
        "episodes": len(episodes),
        "labelled": sum(e.episode_id in labels for e in episodes),
        "categories": counts,
        "per_rule": {name: {**row, "declared": name in declared} for name, row in per_rule.items()},
        "episodes_charged": charged,
        "charged_by_rules": by_rules,
        "charged_unlabelled": [row["episode"] for row in by_rules if not row["labelled"]],
        "disagreements": disagreements,
    }


def rule_overrides(rules: Sequence[frozenset[str]], final: Sequence[frozenset[str]]) -> dict[str, str]:
    """Per category, how one episode's rule charges (``rules``, per proposal) relate to its ledger after labels
    (``final``): ``kept`` (the rule charges it and the labels leave it where it is), ``overridden`` (the rule
    charges it and the ledger charges it at other proposals or not at all) or ``added`` (only the ledger charges
    it); a category neither charges is absent."""
    out: dict[str, str] = {}
    for name in CATEGORIES:
        by_rule = {i for i, events in enumerate(rules) if name in events}
        by_ledger = {i for i, events in enumerate(final) if name in events}
        if by_rule:
            out[name] = "kept" if by_rule == by_ledger else "overridden"
        elif by_ledger:
            out[name] = "added"
    return out


def _declared(policy: Policy) -> tuple[str, ...]:
    return policy.ledger.declared() if policy.ledger is not None else ()


def _disagree(label: EpisodeLabel, rules: frozenset[str], labelled: frozenset[str]) -> bool:
    """override: the label's categories differ from the rules'; add: the label charges what the rules missed."""
    return labelled != rules if label.mode == "override" else not labelled <= rules


def format_check(result: dict[str, Any]) -> str:
    """A table of counts, then one line per disagreement."""
    lines = [
        f"{result['episodes']} episodes, {result['labelled']} labelled",
        f"{'category':<24}{'rules':>8}{'labels':>8}{'ledger':>8}",
    ]
    for name, row in result["categories"].items():
        lines.append(f"{name:<24}{row['rules']:>8}{row['labels']:>8}{row['ledger']:>8}")
    total = result["episodes_charged"]
    lines.append(f"{'episodes charged':<24}{total['rules']:>8}{total['labels']:>8}{total['ledger']:>8}")
    lines.append("per rule: episodes it charges, labels that override its charge, labels that add one it missed")
    lines.append(f"{'rule':<24}{'charged':>8}{'overridden':>12}{'added':>8}")
    for name, rule in result["per_rule"].items():
        note = "" if rule["declared"] else "  (no rule declared)"
        lines.append(f"{name:<24}{rule['charged']:>8}{rule['overridden']:>12}{rule['added']:>8}{note}")
    by_rules, unlabelled = result["charged_by_rules"], result["charged_unlabelled"]
    lines.append(f"{len(by_rules)} episode(s) charged by the rules, {len(unlabelled)} of them without a label")
    for row in by_rules:
        flag = "" if row["labelled"] else "  UNLABELLED: check it, or add a label"
        lines.append(f"  {row['episode']}: {_set(row['rules'])}{flag}")
    lines.append(f"{len(result['disagreements'])} disagreement(s) between rules and labels")
    for d in result["disagreements"]:
        lines.append(
            f"  {d['episode']} (labels line {d['line']}, {d['mode']}): rules {_set(d['rules'])}, "
            f"label {_set(d['label'])} -> ledger {_set(d['ledger'])}; by {d['by']}: {d['why']}"
        )
    return "\n".join(lines)


def _set(items: list[str]) -> str:
    return "{" + ", ".join(items) + "}" if items else "{}"


__all__ = ["format_check", "ledger_check", "rule_overrides"]
