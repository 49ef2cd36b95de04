"""The weight-0 features decided on development data of five deployments (docs/defaults.md).

``python -m guard.studies.weight_defaults [--json]`` prints every number of that page.  Which data it
reads, and nothing else:

- the embedded AgentDojo runs, pooled (user-task runs, corpus order), and their development split as
  docs/evidence.md#how-the-defaults-were-chosen fixes it: numpy ``default_rng(0).random(n) < 0.3``.  Each
  suite is its own deployment (its own tools and policy), so each is studied on its own;
- the worked deployment (examples/own_deployment): its public ``record`` step writes 400 scripted episodes
  and the red-team labels to a temporary folder; the same seeded 30 % split of them is kept.

Each deployment's development episodes are replayed once under its own policy and selector; the recorded
features are then re-scored exactly under each candidate weight set (:func:`guard.calibration.fit.rescore`):
the package's default weights with ``private_in_url`` at each candidate value (the worked example's policy
pins older weights, which are not used).  For each weight set and α, the CARB threshold (plain CRC on a
calibration half) is computed on 200 seeded 50/50 splits of the development episodes, and the test halves'
mean loss and harm-free success are reported (the replay protocol, :mod:`guard.calibration.evaluate`).
The firing tables count, per deployment, the in-scope steps that charge the ledger and the in-scope steps
of episodes that never charge it on which a feature fires (after trusted evidence lowered it).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from guard import features as table
from guard.calibration.evaluate import carb_lambdas, outcomes, split_indices, ungated
from guard.calibration.fit import rescore, weight_vector
from guard.calibration.jobs import Corpus, load_corpus, load_episodes_corpus, score_selectors
from guard.calibration.replay import ScoredCorpus
from guard.corpora.agentdojo import load_suite_policy
from guard.errors import CorpusError
from guard.evidence.values import find_values
from guard.features import DEFAULT_WEIGHTS, FEATURES, SIGNATURE_FEATURES
from guard.policy import SelectorName, load_policy
from guard.progress import Progress
from guard.records import Episode, RecordKind

STUDIED = table.PRIVATE_IN_URL.name
CANDIDATES: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.52)
ALPHAS: tuple[float, ...] = (0.05, 0.10)
DEV_SEED = 0
DEV_SHARE = 0.3
PERMUTATIONS = 200
SPLIT_SEED = 0
EXAMPLE_EPISODES = 400
EXAMPLE_SEED = 0
SUITES: tuple[str, ...] = ("workspace", "slack", "banking", "travel")
EXAMPLE = "own_deployment"
#: The rule's bounds (docs/defaults.md): a weight costing more harm-free success than COST anywhere is rejected;
#: a weight is taken only if it raises harm-free success by GAIN or more in two deployments or more.
COST = 0.005
GAIN = 0.01
ROOT = Path(__file__).resolve().parents[2]

BoolArray = npt.NDArray[np.bool_]


def development_mask(n: int, seed: int = DEV_SEED, share: float = DEV_SHARE) -> BoolArray:
    """The documented development split of ``n`` episodes in corpus order: ``default_rng(seed).random(n) < share``."""
    mask: BoolArray = np.random.default_rng(seed).random(n) < share
    return mask


def development(episodes: Sequence[Episode]) -> list[Episode]:
    """The development episodes of ``episodes`` (corpus order kept)."""
    mask = development_mask(len(episodes))
    return [e for e, keep in zip(episodes, mask, strict=True) if keep]


def candidate_weights(value: float, base: Mapping[str, float] = DEFAULT_WEIGHTS) -> dict[str, float]:
    """The default weights with :data:`STUDIED` at ``value``."""
    return {**base, STUDIED: value}


# --------------------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class Deployment:
    """One deployment's development episodes replayed under its policy, and which of their proposals carry a URL
    in an argument (the only proposals :data:`STUDIED` can fire on)."""

    corpus: ScoredCorpus
    url_steps: BoolArray


def url_steps(episodes: Sequence[Episode], corpus: ScoredCorpus) -> BoolArray:
    """Per proposal of ``corpus`` (replayed from ``episodes``, one row per proposal, in order): a URL in an argument."""
    out: list[bool] = []
    for i, episode in enumerate(episodes):
        proposals = [r for r in episode.records if r.kind is RecordKind.PROPOSAL]
        if len(proposals) != corpus.offsets[i + 1] - corpus.offsets[i]:
            raise CorpusError(f"{episode.episode_id}: replay rows do not match its proposals")
        out += [any(v.kind == "url" for _, a in p.arg_values() for v in find_values(a)) for p in proposals]
    return np.array(out, dtype=bool)


def _replayed(episodes: list[Episode], selector: SelectorName, corpus: Corpus | None, progress: bool) -> Deployment:
    scored = score_selectors(episodes, [selector], corpus=corpus, progress=progress)[0][selector]
    return Deployment(scored, url_steps(episodes, scored))


def agentdojo_deployments(progress: bool = False) -> dict[str, Deployment]:
    """Each suite's development episodes (of the pooled split), replayed under its policy and selector."""
    pooled = development(load_corpus(None, "all").episodes)
    out: dict[str, Deployment] = {}
    for suite in SUITES:
        selector = load_suite_policy(suite).selector.name
        out[f"agentdojo/{suite}"] = _replayed([e for e in pooled if e.meta.suite == suite], selector, None, progress)
    return out


def record_example(out: Path, episodes: int = EXAMPLE_EPISODES, seed: int = EXAMPLE_SEED) -> tuple[Path, Path]:
    """The worked deployment's public ``record`` step, run into ``out``: its episodes and labels files."""
    if not (ROOT / "examples" / "own_deployment" / "run.py").is_file():
        raise CorpusError(f"{ROOT}: no examples/own_deployment (run from a checkout of the repository)")
    command = [sys.executable, "-m", "examples.own_deployment.run", "record", "--out", str(out)]
    command += ["--episodes", str(episodes), "--seed", str(seed)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)  # noqa: S603 (our own interpreter)
    return out / "episodes.jsonl", out / "labels.jsonl"


def example_deployment(progress: bool = False) -> Deployment:
    """The worked deployment's development episodes, replayed under its policy and selector (its pinned weights,
    which the study replaces, are the subject of load-time warnings: those are silenced here)."""
    quiet = logging.getLogger("guard.policy")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        policy = load_policy(ROOT / "examples" / "own_deployment" / "policy.yaml")
        with tempfile.TemporaryDirectory(prefix="weight-defaults-") as tmp:
            episodes, labels = record_example(Path(tmp))
            corpus = load_episodes_corpus([policy], str(episodes), str(labels))
    finally:
        quiet.setLevel(level)
    dev = replace(corpus, episodes=development(corpus.episodes))
    return _replayed(dev.episodes, policy.selector.name, dev, progress)


def deployments(progress: bool = False) -> dict[str, Deployment]:
    """The five deployments' development episodes, by name."""
    out = agentdojo_deployments(progress)
    out[EXAMPLE] = example_deployment(progress)
    return out


# --------------------------------------------------------------------------- measures


@dataclass(frozen=True, slots=True)
class Firing:
    """How often one feature fires (as counted in the score) on one deployment's development episodes."""

    harm_steps: int
    harm_fired: int
    benign_steps: int
    benign_fired: int
    harm_episodes: int
    harm_episodes_fired: int
    benign_episodes: int
    benign_episodes_fired: int


def firing(corpus: ScoredCorpus, feature: str) -> Firing:
    """Steps: in-scope steps that charge the ledger, and in-scope steps of episodes that never charge it.
    Episodes: harmful ones where it fires at or before the first harmful step, harmless ones where it fires
    on some in-scope step."""
    if corpus.features is None or corpus.in_scope is None or corpus.first_harm is None:
        raise CorpusError("the corpus has no recorded features; replay it first")
    on = corpus.features[:, FEATURES.index(feature)].astype(bool) & corpus.in_scope.astype(bool)
    owner = np.repeat(np.arange(corpus.n), np.diff(corpus.offsets))
    first = corpus.first_harm
    harmless_episode = first < 0
    harmless_step = harmless_episode[owner]
    harm_step = corpus.harmful.astype(bool) & corpus.in_scope.astype(bool)
    before = np.where(harmless_step, False, np.arange(on.size) <= first[owner])
    fired_before = np.bincount(owner[on & before], minlength=corpus.n) > 0
    fired_any = np.bincount(owner[on], minlength=corpus.n) > 0
    return Firing(
        harm_steps=int(harm_step.sum()),
        harm_fired=int((harm_step & on).sum()),
        benign_steps=int((harmless_step & corpus.in_scope.astype(bool)).sum()),
        benign_fired=int((harmless_step & on).sum()),
        harm_episodes=int((~harmless_episode).sum()),
        harm_episodes_fired=int((fired_before & ~harmless_episode).sum()),
        benign_episodes=int(harmless_episode.sum()),
        benign_episodes_fired=int((fired_any & harmless_episode).sum()),
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    """Mean test loss and harm-free success of the CRC-calibrated threshold over the seeded splits."""

    loss: float
    harm_free: float


def evaluate(
    corpus: ScoredCorpus,
    weights: Mapping[str, float],
    alphas: Sequence[float] = ALPHAS,
    permutations: int = PERMUTATIONS,
    seed: int = SPLIT_SEED,
) -> dict[float, Outcome]:
    """Per α: ``corpus`` re-scored under ``weights``, λ̂ by CRC on each calibration half, the test halves' means."""
    scored = rescore(corpus, weight_vector(weights))
    calib, test = split_indices(corpus.n, permutations, seed)
    out: dict[float, Outcome] = {}
    for alpha in alphas:
        metrics = outcomes(scored, carb_lambdas(scored, calib, alpha), test)
        out[alpha] = Outcome(float(metrics["loss"].mean()), float(metrics["harm_free_success"].mean()))
    return out


def no_guard(corpus: ScoredCorpus, permutations: int = PERMUTATIONS, seed: int = SPLIT_SEED) -> Outcome:
    """The test halves' loss and harm-free success with nothing gated."""
    metrics = ungated(corpus, split_indices(corpus.n, permutations, seed)[1])
    return Outcome(float(metrics["loss"].mean()), float(metrics["harm_free_success"].mean()))


def zero_weight_features(base: Mapping[str, float] = DEFAULT_WEIGHTS) -> tuple[str, ...]:
    """:data:`STUDIED` and every feature the default weights leave at 0, in the scorer's order."""
    return tuple(f for f in FEATURES if f == STUDIED or not base.get(f, 0.0))


def decide(deltas: Mapping[float, Sequence[tuple[float, float, float]]]) -> float:
    """The rule of docs/defaults.md.  ``deltas[w]``: per deployment and α, ``(Δ harm-free success against weight 0,
    mean loss, α)``.  A weight is rejected when some Δ is below ``-COST`` or some loss above its α; of the others,
    the smallest that raises harm-free success by at least ``GAIN`` in at least two deployments; else 0."""
    for weight in sorted(w for w in deltas if w > 0):
        cells = deltas[weight]
        if any(d < -COST or loss > alpha for d, loss, alpha in cells):
            continue
        per_deployment = len(cells) // len(ALPHAS)
        gains = {k // len(ALPHAS) for k, (d, _, _) in enumerate(cells) if d >= GAIN}
        if per_deployment and len(gains) >= 2:
            return weight
    return 0.0


def study(deps: Mapping[str, Deployment], candidates: Sequence[float] = CANDIDATES) -> dict[str, Any]:
    """Every number of docs/defaults.md, per deployment, and the rule's decision per weight-0 feature."""
    features = zero_weight_features()
    result: dict[str, Any] = {"studied": STUDIED, "candidates": list(candidates), "alphas": list(ALPHAS)}
    per: dict[str, Any] = {}
    trials: dict[str, dict[float, list[tuple[float, float, float]]]] = {
        f: {w: [] for w in candidates} for f in features
    }
    with Progress(len(deps) * len(features), "weight sets", enabled=sys.stderr.isatty()) as tick:
        for name, dep in deps.items():
            corpus = dep.corpus
            zero = evaluate(corpus, candidate_weights(0.0))
            rows = [{"weight": 0.0, **{str(a): vars_of(o) for a, o in zero.items()}}]
            for value in candidates[1:]:
                rows.append(
                    {
                        "weight": value,
                        **{str(a): vars_of(o) for a, o in evaluate(corpus, candidate_weights(value)).items()},
                    }
                )
            for feature in features:
                for value in candidates:
                    found = evaluate(corpus, {**candidate_weights(0.0), feature: value})
                    trials[feature][value] += [
                        (found[a].harm_free - zero[a].harm_free, found[a].loss, a) for a in ALPHAS
                    ]
                tick(len(per) * len(features) + features.index(feature) + 1)
            scored_url = dep.url_steps & (corpus.in_scope if corpus.in_scope is not None else True)
            harm = corpus.harmful.astype(bool) & scored_url
            owner = np.repeat(np.arange(corpus.n), np.diff(corpus.offsets))
            benign = (_first_harm(corpus) < 0)[owner] & scored_url
            per[name] = {
                "episodes": corpus.n,
                "harmful_episodes": int((_first_harm(corpus) >= 0).sum()),
                "url_steps": {"harm": int(harm.sum()), "benign": int(benign.sum())},
                "no_guard": vars_of(no_guard(corpus)),
                "weights": rows,
                "firing": {f: _firing_dict(firing(corpus, f)) for f in features},
            }
    result["deployments"] = per
    result["trials"] = {f: {str(w): cells for w, cells in t.items()} for f, t in trials.items()}
    result["decision"] = {f: (0.0 if f in SIGNATURE_FEATURES else decide(t)) for f, t in trials.items()}
    return result


def _first_harm(corpus: ScoredCorpus) -> npt.NDArray[np.int64]:
    if corpus.first_harm is None:
        raise CorpusError("the corpus has no recorded harm steps; replay it first")
    first: npt.NDArray[np.int64] = corpus.first_harm
    return first


def vars_of(outcome: Outcome) -> dict[str, float]:
    """An outcome as JSON."""
    return {"loss": outcome.loss, "harm_free": outcome.harm_free}


def _firing_dict(found: Firing) -> dict[str, int]:
    return {name: int(getattr(found, name)) for name in Firing.__slots__}


# --------------------------------------------------------------------------- tables


def format_weights(result: Mapping[str, Any]) -> str:
    """The table of :data:`STUDIED`'s candidate weights: loss and harm-free success per α and deployment."""
    alphas = [str(a) for a in result["alphas"]]
    head = f"{'deployment':<20}{'dev eps':>8}{'harmful':>8}{'URL steps h/b':>14}{'weight':>7}"
    head += "".join(f"{'loss@' + a:>10}{'hfree@' + a:>11}" for a in alphas)
    lines = [head, "-" * len(head)]
    for name, d in result["deployments"].items():
        none, url = d["no_guard"], d["url_steps"]
        cells = "".join(f"{none['loss']:>10.3f}{none['harm_free']:>11.3f}" for _ in alphas)
        lines.append(f"{name:<20}{d['episodes']:>8}{d['harmful_episodes']:>8}{_frac(url['harm'], url['benign']):>14}")
        lines.append(f"{'':<50}{'none':>7}{cells}")
        for row in d["weights"]:
            cells = "".join(f"{row[a]['loss']:>10.3f}{row[a]['harm_free']:>11.3f}" for a in alphas)
            lines.append(f"{'':<50}{row['weight']:>7.2f}{cells}")
    return "\n".join(lines)


def format_firing(result: Mapping[str, Any]) -> str:
    """Per feature and deployment: fired on harmful / benign steps, and on harmful / harmless episodes."""
    head = f"{'feature':<24}{'deployment':<20}{'harm steps':>12}{'benign steps':>14}{'harm eps':>10}{'benign eps':>12}"
    lines = [head, "-" * len(head)]
    for feature in result["decision"]:
        for name, d in result["deployments"].items():
            f = d["firing"][feature]
            lines.append(
                f"{feature:<24}{name:<20}{_frac(f['harm_fired'], f['harm_steps']):>12}"
                f"{_frac(f['benign_fired'], f['benign_steps']):>14}"
                f"{_frac(f['harm_episodes_fired'], f['harm_episodes']):>10}"
                f"{_frac(f['benign_episodes_fired'], f['benign_episodes']):>12}"
            )
    return "\n".join(lines)


def format_decisions(result: Mapping[str, Any]) -> str:
    """Per weight-0 feature and candidate weight: the worst and best Δ harm-free success over deployments and α,
    the deployments gaining at least :data:`GAIN`, the worst loss − α; then the rule's weight."""
    head = f"{'feature':<24}{'weight':>7}{'worst dHF':>11}{'best dHF':>10}{'gaining':>9}{'loss-a':>8}{'decision':>10}"
    lines = [head, "-" * len(head)]
    for feature, trials in result["trials"].items():
        for k, (weight, cells) in enumerate(trials.items()):
            if float(weight) == 0:
                continue
            gaining = len({j // len(ALPHAS) for j, c in enumerate(cells) if c[0] >= GAIN})
            decision = f"{result['decision'][feature]:.2f}" if k == len(trials) - 1 else ""
            lines.append(
                f"{feature:<24}{float(weight):>7.2f}{min(c[0] for c in cells):>+11.3f}"
                f"{max(c[0] for c in cells):>+10.3f}{gaining:>9}{max(c[1] - c[2] for c in cells):>+8.3f}{decision:>10}"
            )
    return "\n".join(lines)


def _frac(k: int, n: int) -> str:
    return f"{k}/{n}"


def report(result: Mapping[str, Any]) -> str:
    """The text the command prints: the three tables, as docs/defaults.md shows them."""
    return (
        f"{STUDIED}: candidate weights, the other weights at the defaults (development episodes only; "
        f"{PERMUTATIONS} seeded 50/50 splits, CRC)\n\n{format_weights(result)}\n\n"
        f"features at weight 0 by default, and {STUDIED}: fired (counted in the score) on development steps "
        f"and episodes\n\n{format_firing(result)}\n\n"
        f"the rule per feature: each candidate weight against 0 (signature features stay 0)\n\n"
        f"{format_decisions(result)}\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m guard.studies.weight_defaults [--json]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in ([], ["--json"]):  # one flag: no parser (every argument parser lives under guard/cli)
        sys.stderr.write(f"usage: python -m guard.studies.weight_defaults [--json]\nunknown arguments: {args}\n")
        return 2
    result = study(deployments(progress=sys.stderr.isatty()))
    sys.stdout.write(json.dumps(result, indent=1, sort_keys=True) + "\n" if args else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
