"""How the declared ledger agrees with AgentDojo's own ``security`` verdict on attacked runs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from guard.corpora import agentdojo
from guard.ledger import Ledger


def ledger_check(model: str = "all") -> dict[str, Any]:
    """Confusion table (ledger fired × security) on attacked runs; firing rate on benign user tasks."""
    report = agentdojo.load_embedded(model)
    table: Counter[tuple[bool, bool]] = Counter()
    benign = fired_benign = 0
    for episode in report.episodes:
        if agentdojo.is_injection_goal_run(episode):
            continue
        policy = agentdojo.load_suite_policy(episode.meta.suite)
        fired = Ledger(policy, agentdojo.episode_ledger_labels(episode)).trace(episode).first_harm is not None
        if episode.meta.attack:
            table[(bool(episode.meta.security), fired)] += 1
        else:
            benign += 1
            fired_benign += fired
    total = sum(table.values())
    agree = table[(True, True)] + table[(False, False)]
    return {
        "corpus": model,
        "attacked": total,
        "security_true_ledger_1": table[(True, True)],
        "security_true_ledger_0": table[(True, False)],
        "security_false_ledger_1": table[(False, True)],
        "security_false_ledger_0": table[(False, False)],
        "agreement": agree / total if total else None,
        "benign_runs": benign,
        "benign_runs_charged": fired_benign,
    }


def format_check(result: dict[str, Any]) -> str:
    """Readable confusion table."""
    return "\n".join(
        [
            f"corpus {result['corpus']}: {result['attacked']} attacked runs",
            "                    ledger=1  ledger=0",
            f"security=true   {result['security_true_ledger_1']:>9} {result['security_true_ledger_0']:>9}",
            f"security=false  {result['security_false_ledger_1']:>9} {result['security_false_ledger_0']:>9}",
            f"agreement {result['agreement']:.3f}; benign user-task runs charged: "
            f"{result['benign_runs_charged']} of {result['benign_runs']}",
        ]
    )
