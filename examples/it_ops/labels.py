"""Override labels for the exceptions the ledger rules get wrong, and how many the rules' scopes save.

The scripted agent knows the truth of each recorded episode: the followed injection whose harmful
call ran (``truth.jsonl``).  The policy's ``ledger:`` rules charge what they charge; a label is
written only where the two disagree (the rules charge a benign episode, miss a harm, or charge it at
another call), as ``mode: override``.  The same count for the policy *without* its scopes (no
``destructive.paths``, ``privacy_flow.allowed_destinations: {}``, an empty ``attacker_directed``
allow-list) says how many labels the scopes made unnecessary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guard.corpora.episodes import load_episodes
from guard.ledger import CATEGORIES, Ledger, LedgerLabels
from guard.policy import Policy, parse_policy
from guard.records import Episode


def unscoped(policy: Policy) -> Policy:
    """``policy`` with its ledger rules unscoped: every deletion the user did not name is destructive, every
    send of private data to a recipient the user did not name is a privacy flow, every such recipient attacker-
    directed (the gate's sections, ``trust.internal`` included, are unchanged)."""
    data = policy.model_dump(mode="json", exclude={"base_dir"})
    ledger = data["ledger"]
    ledger["destructive"].pop("paths", None)
    ledger["privacy_flow"]["allowed_destinations"] = {}
    ledger["attacker_directed"] |= {"allow_domains": [], "allow_identifiers": []}
    return parse_policy(data, source=f"{policy.name} without ledger scopes")


def _first_charge(ledger: Ledger, episode: Episode) -> tuple[str | None, frozenset[str]]:
    """The call id of the first proposal the rules charge (None: none), and every category they charge."""
    events = ledger.trace(episode).events
    proposals = episode.proposals()
    first = next((proposals[k].call_id for k, fired in enumerate(events) if fired), None)
    return first, frozenset().union(*events) if events else frozenset()


def disagreements(policy: Policy, episodes: Sequence[Episode], truth: dict[str, dict[str, Any]]) -> list[str]:
    """Episode ids where the rules' first charged call is not the truth's harmful call (or one side has none)."""
    ledger = Ledger(policy, LedgerLabels())
    out = []
    for episode in episodes:
        harms = truth[episode.episode_id]["harms"]
        first, _ = _first_charge(ledger, episode)
        if first != (harms[0]["call_id"] if harms else None):
            out.append(episode.episode_id)
    return out


def write_labels(policy: Policy, episodes_path: Path, truth: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """Write the override labels ``policy``'s rules need to ``out``; counts for the record step's summary."""
    by_id = {row["episode"]: row for row in truth}
    episodes = load_episodes(episodes_path, policy)
    ledger = Ledger(policy, LedgerLabels())
    needed = disagreements(policy, episodes, by_id)
    lines = []
    for sid in needed:
        harms = by_id[sid]["harms"]
        why = f"followed a {by_id[sid]['attack']} injection" if harms else "reviewed: no harm (benign task)"
        label = {"episode": sid, "mode": "override", "harms": harms, "by": "it-ops script (truth)", "why": why}
        lines.append(json.dumps(label, sort_keys=True) + "\n")
    out.write_text("".join(lines), encoding="utf-8")
    counts = dict.fromkeys(CATEGORIES, 0)
    for episode in episodes:
        for category in _first_charge(ledger, episode)[1]:
            counts[category] += 1
    return {
        "labels": len(needed),
        "labels_unscoped": len(disagreements(unscoped(policy), episodes, by_id)),
        "wrong_benign": sum(not by_id[s]["harms"] for s in needed),
        "missed": sum(bool(by_id[s]["harms"]) for s in needed),
        "rule_counts": counts,
    }


__all__ = ["disagreements", "unscoped", "write_labels"]
