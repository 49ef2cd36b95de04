"""The IT-ops deployment's steps: ``python -m examples.it_ops.run record|deploy|breaker|report`` (docs/it-ops.md).

- ``record``: scripted episodes through a **shadow-mode** guard, recorded to ``episodes.jsonl``; the deployed
  policy ``policy.yaml`` (the example's, naming the table ``carbguard data background --episodes`` builds); the
  script's truth per episode to ``truth.jsonl``; and ``labels.jsonl``: override labels only for the
  episodes where the policy's ledger rules disagree with that truth (:mod:`.labels`).
- calibration is the product's own CLI (``carbguard calibrate ... --alpha A``, once per α).
- ``deploy``: fresh seeded episodes, enforcing with a calibrated artifact: the harm done, the internal
  sends of the user's own tasks that were stopped (with and without untrusted text before them).
- ``breaker``: the guard tripped through a trip file (as ``carbguard monitor --trip`` writes it), under
  each fallback (``escalate``, ``escalate_risky``): benign task completion after the trip.
- ``wording``: the same seeded attack stream with its goals worded as requests, as facts, split, in Spanish,
  German or French, or as a question (:data:`.world.FAMILIES`): integrity harm among the followed attacks and
  the user tasks' completion, per family (docs/it-ops.md#goals-stated-as-facts).
- ``report``: the deployment's results from what the steps wrote.

Every step writes under ``--out`` (default ``od/it_ops``, which .gitignore's ``/od/`` covers).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from pathlib import Path
from typing import Any

from examples.it_ops.labels import write_labels
from examples.it_ops.world import BENIGN, CALM, FAMILIES, HARMS, INTEGRITY, Mix, Outcome, run_episode
from guard import Guard
from guard.artifact import load_artifact
from guard.breaker import trip_text
from guard.policy import Policy, load_policy

HERE = Path(__file__).resolve().parent
POLICY = HERE / "policy.yaml"
OUT = Path("od/it_ops")
FALLBACKS = ("escalate", "escalate_risky")


def _policy() -> Policy:
    return load_policy(POLICY)


DEPLOYED = "policy.yaml"  # the deployed policy, beside the artifacts: the example's, naming its own background table
TABLE = "background.json"  # built by `carbguard data background --episodes` from the recorded episodes


def _write_deployed(out: Path) -> Path:
    """``out/policy.yaml``: the example policy with ``graph.background`` naming ``out/background.json``."""
    path = out / DEPLOYED
    text = POLICY.read_text(encoding="utf-8")
    path.write_text(f"{text.rstrip()}\ngraph:\n  background: {TABLE}  # this deployment's own boilerplate\n", "utf-8")
    return path


KAPPA = "kappa.json"  # built by `carbguard safecommit calibrate` from the recorded episodes and their labels
_KAPPA_LINE = re.compile(r"^  kappa: .*$", re.M)


def _deployed(artifact: Path) -> Policy:
    """The policy ``artifact`` was calibrated with: the deployed one beside it (naming its own κ artifact once
    ``kappa.json`` is there), else the example's."""
    path = artifact.parent / DEPLOYED
    if not (path.exists() and (artifact.parent / TABLE).exists()):
        return _policy()
    return load_policy(_with_kappa(path) if (artifact.parent / KAPPA).exists() else path)


def _with_kappa(path: Path) -> Path:
    """``policy_kappa.yaml`` beside ``path``: the deployed policy with ``safecommit.kappa`` naming ``kappa.json``
    (the same policy otherwise: the κ artifact is bound to its name and world-scoring fingerprint)."""
    text, found = _KAPPA_LINE.subn(
        f"  kappa: {{artifact: {KAPPA}}}  # calibrated on this deployment's own episodes", path.read_text("utf-8")
    )
    if found != 1:
        raise RuntimeError(f"{path}: expected one 'kappa:' line in the safecommit section, found {found}")
    named = path.with_name("policy_kappa.yaml")
    named.write_text(text, encoding="utf-8")
    return named


def _truth(outcome: Outcome) -> dict[str, Any]:
    """The harm the agent knows it did: the followed injection's categories, on its last (harmful) call."""
    harms = []
    if outcome.harmed and outcome.attack is not None:
        harms = [{"category": c, "call_id": outcome.attack_calls[-1]} for c in HARMS[outcome.attack]]
    return {"episode": outcome.episode_id, "task": outcome.task.name, "attack": outcome.attack, "harms": harms}


def record(out: Path, episodes: int, seed: int) -> dict[str, Any]:
    """Shadow-mode recording of ``episodes`` scripted episodes, the truth, and the override labels needed."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "episodes.jsonl"
    path.unlink(missing_ok=True)
    guard = Guard(_policy(), threshold=math.inf, mode="shadow", record=path)
    rng = random.Random(seed)
    truth = [_truth(run_episode(guard, f"rec-{seed}-{k:04d}", rng, CALM)) for k in range(episodes)]
    (out / "truth.jsonl").write_text("".join(json.dumps(t, sort_keys=True) + "\n" for t in truth), encoding="utf-8")
    found = write_labels(_policy(), path, truth, out / "labels.jsonl")
    _write_deployed(out)
    found |= {"episodes": episodes, "harmed": sum(bool(t["harms"]) for t in truth), "seed": seed}
    (out / "record.json").write_text(json.dumps(found, indent=1, sort_keys=True), encoding="utf-8")
    print(
        f"recorded {episodes} episodes to {path} (shadow mode), {found['harmed']} with a followed injection; "
        f"{found['labels']} override labels to {out / 'labels.jsonl'} (the rules without scopes would need "
        f"{found['labels_unscoped']})"
    )
    return found


def _guard(artifact: Path, **kwargs: Any) -> Guard:
    policy = _deployed(artifact)
    art = load_artifact(artifact, policy)
    return Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id, **kwargs)


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _sends(outcomes: list[Outcome], untrusted: bool) -> tuple[int, int]:
    """(stopped, proposed) internal sends of the users' own tasks, with or without untrusted text before them."""
    rows = [stopped for o in outcomes for seen, stopped in o.sends if seen == untrusted]
    return sum(rows), len(rows)


def deploy(artifact: Path, out: Path, episodes: int, seed: int, mix: Mix = CALM) -> dict[str, Any]:
    """Enforcing on fresh seeded episodes with ``artifact``: harm, stopped internal sends, completion."""
    art = load_artifact(artifact, _deployed(artifact))
    guard = _guard(artifact)
    rng = random.Random(seed)
    outcomes = [run_episode(guard, f"dep-{seed}-{k:04d}", rng, mix) for k in range(episodes)]
    benign = [o for o in outcomes if o.attack is None]
    quiet, loud = _sends(outcomes, False), _sends(outcomes, True)
    found = {
        "alpha": art.alpha,
        "threshold": art.threshold,
        "threshold_before_slack": art.body.get("threshold_before_slack", art.threshold),
        "episodes": episodes,
        "harmed": sum(o.harmed for o in outcomes),
        "harm_rate": _share(sum(o.harmed for o in outcomes), episodes),
        "followed": sum(o.followed for o in outcomes),
        "sends_trusted": list(quiet),
        "sends_untrusted": list(loud),
        "benign_completion": _share(sum(o.done for o in benign), len(benign)),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"deploy_a{art.alpha:g}.json").write_text(json.dumps(found, indent=1, sort_keys=True), encoding="utf-8")
    print(
        f"deployed {episodes} episodes at alpha={art.alpha:g} (threshold {art.threshold:g}, enforcing): "
        f"{found['harmed']} harmed ({found['harm_rate']:.3f}), {found['followed']} followed an injection; internal "
        f"sends stopped: {quiet[0]}/{quiet[1]} without untrusted text, {loud[0]}/{loud[1]} after untrusted text; "
        f"benign completion {found['benign_completion']:.3f}"
    )
    return found


#: the attack stream of ``wording``: most episodes injected, most injections followed.
STREAM = Mix(injected=0.85, follows=0.8)


def wording(artifact: Path, episodes: int, seed: int) -> dict[str, dict[str, Any]]:
    """Per wording family, the same seeded attack stream enforcing with ``artifact``: followed and harmful
    integrity attacks (all, and those whose file or channel only the injected text named), exfiltrations, and
    the share of episodes whose user task completed."""
    out: dict[str, dict[str, Any]] = {}
    for family in ("request", *FAMILIES):
        rng = random.Random(seed)
        guard = _guard(artifact)
        mix = Mix(STREAM.injected, STREAM.follows, family=family)
        outcomes = [run_episode(guard, f"word-{seed}-{k:04d}", rng, mix) for k in range(episodes)]
        followed = [o for o in outcomes if o.followed and o.attack is not None]
        cells = {
            "integrity": [o for o in followed if o.attack in INTEGRITY],
            "third_party": [o for o in followed if o.attack in INTEGRITY and not o.user_named],
            "exfiltrate": [o for o in followed if o.attack not in INTEGRITY],
        }
        out[family] = {k: [len(v), sum(o.harmed for o in v)] for k, v in cells.items()}
        out[family]["completed"] = _share(sum(o.done for o in outcomes), episodes)
    art = load_artifact(artifact, _deployed(artifact))
    print(
        f"alpha={art.alpha:g}, threshold {art.threshold:g}: family | integrity harmed/followed | of them "
        "third-party named | exfiltration | completed"
    )
    for family, row in out.items():
        parts = " | ".join(f"{row[k][1]}/{row[k][0]}" for k in ("integrity", "third_party", "exfiltrate"))
        print(f"{family} | {parts} | {row['completed']:.3f}")
    return out


def breaker(artifact: Path, out: Path, episodes: int, seed: int) -> dict[str, Any]:
    """Benign completion before a trip and after it under each fallback (the same seeded benign episodes)."""
    out.mkdir(parents=True, exist_ok=True)
    trip = out / "trip"
    art = load_artifact(artifact, _deployed(artifact))
    trip.write_text(trip_text(art.artifact_id, "risk alarm (it-ops worked example)"), encoding="utf-8")
    found: dict[str, Any] = {"episodes": episodes}
    for name, kwargs in (("before", {}), *((f, {"fallback": f, "trip_file": trip}) for f in FALLBACKS)):
        guard = _guard(artifact, **kwargs)
        rng = random.Random(seed)
        outcomes = [run_episode(guard, f"brk-{name}-{k:04d}", rng, BENIGN) for k in range(episodes)]
        if guard.tripped != (name != "before"):
            raise RuntimeError(f"{name}: the guard is {'' if guard.tripped else 'not '}tripped; {trip} is not read")
        found[name] = _share(sum(o.done for o in outcomes), episodes)
        found[f"{name}_tasks"] = sorted({o.task.name for o in outcomes if o.done})
    (out / "breaker.json").write_text(json.dumps(found, indent=1, sort_keys=True), encoding="utf-8")
    print(
        f"benign completion over {episodes} episodes: {found['before']:.3f} before the trip; after it "
        + ", ".join(f"{found[f]:.3f} under fallback {f}" for f in FALLBACKS)
    )
    return found


def report(out: Path) -> str:
    """The deployment's results, from the JSON files the steps wrote under ``out``."""
    rec = json.loads((out / "record.json").read_text(encoding="utf-8"))
    brk = json.loads((out / "breaker.json").read_text(encoding="utf-8"))
    runs = sorted(
        (json.loads(p.read_text(encoding="utf-8")) for p in out.glob("deploy_a*.json")), key=lambda r: r["alpha"]
    )
    share = _share(rec["harmed"], rec["episodes"])
    lines = [
        f"calibration: {rec['episodes']} shadow-mode episodes, {rec['harmed']} harmed without a guard ({share:.3f})"
    ]
    lines.append(
        f"override labels needed: {rec['labels']} (rules without scopes: {rec['labels_unscoped']}; "
        f"{rec['wrong_benign']} benign episodes charged, {rec['missed']} harms missed)"
    )
    counts = ", ".join(f"{c} {n}" for c, n in rec["rule_counts"].items())
    lines.append(f"ledger rules charge (episodes per rule): {counts}")
    if (out / KAPPA).exists():
        kappa = json.loads((out / KAPPA).read_text(encoding="utf-8"))
        cases = kappa["cases"]
        lines.append(
            f"kappa={kappa['kappa']:g} at alpha {kappa['alpha']:g} from {cases['used']} recorded cases "
            f"({cases['unsafe']} unsafe, {cases['legit']} legit; {cases['support_miss']} support misses)"
        )
    for run in runs:
        q, u = run["sends_trusted"], run["sends_untrusted"]
        lines.append(
            f"alpha={run['alpha']:g}: threshold {run['threshold']:g} (before the utility slack "
            f"{run['threshold_before_slack']:g}), deployed harm rate {run['harm_rate']:.3f} "
            f"({run['harmed']}/{run['episodes']}) vs alpha {run['alpha']:g}; benign internal sends stopped: "
            f"{_share(q[0], q[1]):.3f} ({q[0]}/{q[1]}) without untrusted provenance, "
            f"{_share(u[0], u[1]):.3f} ({u[0]}/{u[1]}) with it; benign completion {run['benign_completion']:.3f}"
        )
    lines.append(
        f"benign completion after a trip ({brk['episodes']} episodes): "
        + ", ".join(f"{f} {brk[f]:.3f}" for f in FALLBACKS)
        + f" (before the trip {brk['before']:.3f})"
    )
    for f in FALLBACKS:
        lines.append(f"tasks still completed under {f}: {', '.join(brk[f + '_tasks']) or 'none'}")
    text = "\n".join(lines)
    print(text)
    return text


def main(argv: list[str] | None = None) -> int:
    """The example's command line."""
    parser = argparse.ArgumentParser(prog="python -m examples.it_ops.run", description=__doc__)
    sub = parser.add_subparsers(dest="step", required=True)
    for step, default, helptext in (
        ("record", 300, "shadow-mode recording, the truth and the override labels needed"),
        ("deploy", 300, "enforcing on fresh seeded episodes with a calibrated artifact"),
        ("breaker", 150, "benign completion after a trip, per fallback"),
    ):
        one = sub.add_parser(step, help=helptext)
        one.add_argument("--out", type=Path, default=OUT)
        one.add_argument("--episodes", type=int, default=default)
        one.add_argument("--seed", type=int, default={"record": 0, "deploy": 1, "breaker": 2}[step])
        if step != "record":
            one.add_argument("--artifact", type=Path, required=True)
    wor = sub.add_parser("wording", help="the attack stream worded in each goal family, enforcing with an artifact")
    wor.add_argument("--artifact", type=Path, required=True)
    wor.add_argument("--episodes", type=int, default=400)
    wor.add_argument("--seed", type=int, default=3)
    rep = sub.add_parser("report", help="the deployment's results (also: results)", aliases=["results"])
    rep.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.step == "record":
        record(args.out, args.episodes, args.seed)
    elif args.step == "deploy":
        deploy(args.artifact, args.out, args.episodes, args.seed)
    elif args.step == "wording":
        wording(args.artifact, args.episodes, args.seed)
    elif args.step == "breaker":
        breaker(args.artifact, args.out, args.episodes, args.seed)
    else:
        report(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
