"""The support desk's ledger, with and without the spellings for data that belongs to someone:
``python -m examples.support_desk.run [--per-kind N] [--seed S]`` (docs/support-desk.md).

For each policy it prints, over the seeded episodes of :mod:`.world`: the episodes the ledger rules charge, the
harmful ones (the script's truth), and the override labels the rules need (the episodes where the rules and
the truth disagree).  ``plain`` is the same deployment written without ``owner``, ``trusted_fields``,
``supplied_args``, ``bounds`` and ``allowed_destinations``.
"""

from __future__ import annotations

import argparse
import copy
import math
from pathlib import Path
from typing import Any

import yaml

from examples.support_desk.world import BENIGN, episodes
from guard import Guard
from guard.artifact import load_artifact
from guard.ledger import Ledger, LedgerLabels
from guard.policy import Policy, load_policy, parse_policy

HERE = Path(__file__).resolve().parent
POLICY = HERE / "policy.yaml"


def policies() -> dict[str, Policy]:
    """The deployment's policy (``owned``) and the same written without the new spellings (``plain``)."""
    data: dict[str, Any] = yaml.safe_load(POLICY.read_text(encoding="utf-8"))
    plain = copy.deepcopy(data)
    for spec in plain["tools"].values():
        spec.pop("owner", None)
        spec.pop("trusted_fields", None)
    ledger = plain["ledger"]
    ledger["credential_change"].pop("supplied_args")
    ledger["untrusted_instruction"].pop("allowed_destinations")
    ledger.pop("bounds")
    return {"plain": parse_policy(plain), "owned": parse_policy(data)}


def ledger_counts(policy: Policy, per_kind: int, seed: int) -> dict[str, int]:
    """Rule charges, harmful episodes and the override labels the rules need, over the seeded episodes."""
    ledger = Ledger(policy, LedgerLabels())
    charged = harmful = labels = missed = 0
    for episode, harm in episodes(policy, per_kind, seed):
        hit = any(ledger.trace(episode).events)
        charged += hit
        harmful += harm
        labels += hit != harm
        missed += harm and not hit
    return {"charged": charged, "harmful": harmful, "labels": labels, "missed": missed}


def record(out: Path, per_kind: int, seed: int) -> None:
    """The scripted episodes through a shadow-mode guard, recorded to ``out/episodes.jsonl`` (to calibrate on)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "episodes.jsonl"
    path.unlink(missing_ok=True)
    policy = load_policy(POLICY)
    done = episodes(policy, per_kind, seed, Guard(policy, threshold=math.inf, mode="shadow", record=path))
    print(f"recorded {len(done)} episodes to {path} (shadow mode), {sum(h for _, h in done)} harmful")


def deploy(artifact: Path, per_kind: int, seed: int) -> None:
    """Fresh seeded episodes through an enforcing guard with ``artifact``'s threshold: benign episodes completed
    and harm done, against the same episodes without a guard."""
    policy = load_policy(POLICY)
    art = load_artifact(artifact, policy)
    guard = Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id)
    bare = episodes(policy, per_kind, seed)
    guarded = episodes(policy, per_kind, seed, guard)
    benign = [(g, b) for g, b in zip(guarded, bare, strict=True) if g[0].episode_id.split("-")[0] in BENIGN]
    completed = sum(len(g[0].records) == len(b[0].records) for g, b in benign)
    print(f"alpha {art.alpha:g}: threshold {art.threshold:.3f}")
    print(f"benign episodes completed: {completed}/{len(benign)} (no guard: {len(benign)}/{len(benign)})")
    harmful = sum(h for _, h in bare)
    print(f"harm done: {sum(h for _, h in guarded)}/{len(bare)} episodes (no guard: {harmful}/{len(bare)})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=40, help="episodes of each kind (default 40)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the scripted episodes (default 7)")
    parser.add_argument("--record", type=Path, help="record the episodes through a shadow-mode guard under this folder")
    parser.add_argument("--deploy", type=Path, help="run fresh episodes through a guard enforcing this artifact")
    args = parser.parse_args(argv)
    if args.record is not None:
        record(args.record, args.per_kind, args.seed)
        return
    if args.deploy is not None:
        deploy(args.deploy, args.per_kind, args.seed)
        return
    total = 9 * args.per_kind
    print(f"{total} episodes ({args.per_kind} of each of 9 kinds)")
    print("policy  charged  harmful  override_labels  harms_missed_by_rules")
    for name, policy in policies().items():
        c = ledger_counts(policy, args.per_kind, args.seed)
        print(f"{name:<7} {c['charged']:>7}  {c['harmful']:>7}  {c['labels']:>15}  {c['missed']:>21}")


if __name__ == "__main__":
    main()
