"""G-CARB alone versus G-CARB + SafeCommit on AgentDojo traces, in replay (docs/studies.md, docs/concepts.md).

Protocol.

1. Every ``user_task_*`` episode of the chosen embedded model(s) is replayed once through
   ``Session`` with its suite policy (``safecommit:`` included; the signature rule off, :func:`study_guard`)
   at threshold +inf: the G-CARB
   score of every proposal, the SafeCommit support of every side-effectful proposal (kept by the
   certifier in ``session.certifier_state``) and the episode's ledger trace.
2. κ per α is calibrated **leave-one-model-out**: the κ used on a model's episodes comes from the
   ledger-labelled cases (:mod:`guard.calibration.kappa`) of the *other* embedded models, so κ
   is never fitted on the traces it is evaluated on.
3. At that κ each side-effectful proposal gets SafeCommit's first decision (no probe results: in
   replay of a log a probe cannot run, so ``probe`` counts as a stop, like ``defer``, ``escalate``
   and ``abstain``).  The decision does not depend on λ.
4. G-CARB alone: the CARB rule on the G-CARB scores; G-CARB + SafeCommit: the same scores with +inf
   where SafeCommit did not certify.  Both are measured on the same seeded 50/50 permutations and
   at the same λ̂ (calibrated on the G-CARB scores, :func:`guard.calibration.evaluate.carb_lambdas`),
   so the composed gate's executed prefix is contained in G-CARB's and its loss is no larger.

Run: ``carbguard safecommit study [--model M] [--alpha A ...] [--json]``.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from guard.calibration.evaluate import carb_lambdas, outcomes, split_indices
from guard.calibration.kappa import Case, calibration_episodes, collect_cases, kappa_from_cases, proposal_case
from guard.calibration.replay import EpisodeScores, assemble, feed
from guard.decision import Decision, Reason, Verdict
from guard.errors import CalibrationError
from guard.jsonio import encode_float
from guard.ledger import CATEGORIES, Ledger
from guard.records import Episode, Record
from guard.runtime import Guard
from guard.safecommit.conformal import SmallCalibrationWarning
from guard.safecommit.runtime import STATE_KEY, PolicyCertifier, ProposalState
from guard.studies._kappa_gate import format_gate, gated_coverage

STOPS = ("certified", "probe", "alternative", "defer", "escalate", "abstain")


@dataclass(frozen=True)
class Proposal:
    """A side-effectful proposal of the replay: what SafeCommit needs to re-decide it at any κ."""

    ordinal: int
    record: Record
    state: ProposalState
    session_verdict: Verdict


@dataclass(frozen=True)
class Replayed:
    """One episode after the replay."""

    episode: Episode
    scores: EpisodeScores
    proposals: tuple[Proposal, ...]
    cases: tuple[Case, ...]
    errors: int


def replay_episode(guard: Guard, episode: Episode) -> Replayed:
    """Feed the episode through a fresh session; keep scores, supports, ledger trace and cases."""
    from guard.corpora.agentdojo import episode_ledger_labels

    policy = guard.policy
    labels = episode_ledger_labels(episode)
    session = guard.session(episode.episode_id)
    decisions = feed(session, episode)
    ledger = Ledger(policy, labels)
    trace = ledger.trace(episode)
    states: dict[str, ProposalState] = session.certifier_state.get(STATE_KEY, {})
    proposals, cases = [], []
    for ordinal, (decision, record) in enumerate(zip(decisions, episode.proposals(), strict=True)):
        tool = policy.tool(record.tool or "")
        state = states.get(record.call_id or "")
        if tool is None or not tool.certified or state is None:
            continue
        proposals.append(Proposal(ordinal, record, state, decision.verdict))
        cases.append(proposal_case(state.support, episode, labels, ledger, record.index, _score(decision)))
    steps = {name: next((k for k, e in enumerate(trace.events) if name in e), None) for name in CATEGORIES}
    scores = EpisodeScores(
        episode_id=episode.episode_id,
        scores=np.array([_score(d) for d in decisions], dtype=np.float64),
        n_selected=np.array([len(d.selected) for d in decisions], dtype=np.int64),
        n_prefix=np.array([d.proposal_index for d in decisions], dtype=np.int64),
        harm_steps=tuple(k for k, e in enumerate(trace.events) if e),
        category_steps=steps,
        utility=bool(episode.meta.utility),
    )
    errors = sum(d.reason is Reason.INTERNAL_ERROR for d in decisions)
    return Replayed(episode, scores, tuple(proposals), tuple(cases), errors)


def study_guard(suite: str) -> Guard:
    """The guard the study replays a suite's episodes with: its shipped policy at threshold +inf, with the
    signature rule off.  The study, like the published CARB results and κ (:mod:`guard.calibration.kappa`), is
    computed without the signatures: a proposal the rule would escalate at run time reaches SafeCommit here."""
    from guard.corpora.agentdojo import load_suite_policy

    policy = load_suite_policy(suite)
    off = policy.model_copy(update={"scorer": policy.scorer.model_copy(update={"signature_rule": "off"})})
    return Guard(off, threshold=math.inf)


def _score(decision: Decision) -> float:
    return math.inf if decision.score is None else decision.score


def _kappas(alpha: float, models: Sequence[str], cases: Sequence[Case]) -> tuple[dict[str, float], dict[str, int]]:
    """Leave-one-model-out κ per model at α, and the number of calibration cases behind each."""
    kappa, n = {}, {}
    for model in models:
        other = [c for c in cases if c.model != model]
        if not any(c.model != model for c in cases):
            raise CalibrationError(
                f"no calibration cases outside model {model!r}: leave-one-model-out needs another model"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallCalibrationWarning)
            kappa[model] = kappa_from_cases(other, alpha)
        n[model] = sum(c.truth in ("unsafe", "legit") for c in other)
    return kappa, n


def _category(cert_verdict: Verdict, reason: Reason) -> str:
    if cert_verdict is Verdict.EXECUTE:
        return "certified"
    if cert_verdict is Verdict.DEFER and reason is Reason.CERTIFIED:
        return "alternative"
    return cert_verdict.value


def _summary(metrics: dict[str, np.ndarray]) -> dict[str, float]:
    return {
        "mean_loss": float(metrics["loss"].mean()),
        "loss_p05": float(np.percentile(metrics["loss"], 5)),
        "loss_p95": float(np.percentile(metrics["loss"], 95)),
        "intervention": float(metrics["intervention"].mean()),
        "autonomous_success": float(metrics["autonomous_success"].mean()),
        "harm_free_success": float(metrics["harm_free_success"].mean()),
    }


def safecommit_replay_study(
    model: str = "all",
    alphas: Sequence[float] = (0.05, 0.10),
    *,
    permutations: int = 200,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The study of the module docstring; a JSON-ready dict (``format_study`` prints it)."""

    episodes = calibration_episodes(model)
    if len(episodes) < 2:
        raise CalibrationError(f"model {model!r}: {len(episodes)} episodes; the replay study needs at least 2")
    guards: dict[str, Guard] = {}
    replayed: list[Replayed] = []
    for i, episode in enumerate(episodes, start=1):
        suite = episode.meta.suite
        guard = guards.get(suite) or guards.setdefault(suite, study_guard(suite))
        replayed.append(replay_episode(guard, episode))
        if progress is not None:
            progress(i, len(episodes))
    cases = [c for r in replayed for c in r.cases]
    models = sorted({e.meta.model for e in episodes})
    if model != "all":
        cases += collect_cases(calibration_episodes("all", exclude_models=[model]))
    gcarb = assemble([r.scores for r in replayed])
    calib, test = split_indices(gcarb.n, permutations, seed)
    out: dict[str, Any] = {
        "model": model,
        "models": models,
        "episodes": len(episodes),
        "per_suite_episodes": dict(sorted(Counter(e.meta.suite for e in episodes).items())),
        "side_effectful": sum(len(r.proposals) for r in replayed),
        "internal_errors": sum(r.errors for r in replayed),
        "session_agreement": _agreement(replayed, guards),
        "permutations": permutations,
        "seed": seed,
        "no_guard": _summary(outcomes(gcarb, np.full(permutations, np.inf), test)),
        "alphas": [],
    }
    for alpha in alphas:
        kappa, n_cases = _kappas(alpha, models, cases)
        counts: Counter[str] = Counter()
        by_suite: Counter[tuple[str, str]] = Counter()
        reasons: Counter[str] = Counter()
        composed = []
        certifiers: dict[tuple[str, str], PolicyCertifier] = {}
        for r in replayed:
            suite, owner = r.episode.meta.suite, r.episode.meta.model
            certifier = certifiers.get((suite, owner)) or certifiers.setdefault(
                (suite, owner), PolicyCertifier(guards[suite].policy, kappa=kappa[owner])
            )
            scores = r.scores.scores.copy()
            for p in r.proposals:
                cert = certifier.decide_fresh(p.state, p.record, certifier.policy.tools[p.record.tool or ""])
                counts[_category(cert.verdict, cert.reason)] += 1
                by_suite[(suite, _category(cert.verdict, cert.reason))] += 1
                reasons[str((cert.log or {}).get("log", {}).get("reason"))] += 1
                if cert.verdict is not Verdict.EXECUTE:
                    scores[p.ordinal] = math.inf
            composed.append(replace(r.scores, scores=scores))
        both = assemble(composed)
        lam = carb_lambdas(gcarb, calib, alpha)
        gate = gated_coverage([r.cases for r in replayed], cases, models, alpha, lam, test, kappa)
        out["alphas"].append(
            {
                "alpha": alpha,
                "kappa": {m: encode_float(k) for m, k in kappa.items()},
                "kappa_cases": n_cases,
                "counts": {k: counts.get(k, 0) for k in STOPS},
                "counts_per_suite": {s: {k: by_suite.get((s, k), 0) for k in STOPS} for s in sorted(guards)},
                "reasons": dict(sorted(reasons.items())),
                "lambda_mean": float(np.mean(lam[np.isfinite(lam)])) if np.isfinite(lam).any() else None,
                "gcarb": _summary(outcomes(gcarb, lam, test)),
                "gcarb_safecommit": _summary(outcomes(both, lam, test)),
                # λ = the largest float: every finite score runs, every SafeCommit refusal (+inf) stops
                "safecommit_only": _summary(outcomes(both, np.full(permutations, np.finfo(np.float64).max), test)),
                "gate": gate,
            }
        )
    return out


def _agreement(replayed: Sequence[Replayed], guards: dict[str, Guard]) -> float | None:
    """Share of side-effectful proposals whose re-decision at the policy's κ equals the Session's verdict."""
    same = total = 0
    for r in replayed:
        guard = guards[r.episode.meta.suite]
        certifier = guard.certifier
        if not isinstance(certifier, PolicyCertifier):
            continue
        for p in r.proposals:
            cert = certifier.decide_fresh(p.state, p.record, guard.policy.tools[p.record.tool or ""])
            same += cert.verdict is p.session_verdict
            total += 1
    return same / total if total else None


def format_study(result: dict[str, Any]) -> str:
    """The study as text: decision counts per α, then loss and autonomous success per method."""
    lines = [
        f"AgentDojo replay, model {result['model']}: {result['episodes']} episodes "
        f"({', '.join(f'{k} {v}' for k, v in result['per_suite_episodes'].items())}), "
        f"{result['side_effectful']} side-effectful proposals; "
        f"{result['permutations']} permutations, seed {result['seed']}",
        "kappa: leave-one-model-out; a probe counts as a stop in replay (docs/concepts.md)",
        "",
        f"{'alpha':>6} {'kappa':>14} " + " ".join(f"{k:>11}" for k in STOPS),
    ]
    for row in result["alphas"]:
        kappas = sorted({str(k) for k in row["kappa"].values()})
        lines.append(
            f"{row['alpha']:>6.2f} {'/'.join(kappas):>14} " + " ".join(f"{row['counts'][k]:>11}" for k in STOPS)
        )
        for suite, counts in row.get("counts_per_suite", {}).items():
            lines.append(f"{'':>6} {suite:>14} " + " ".join(f"{counts[k]:>11}" for k in STOPS))
    head = f"{'method':<22}{'alpha':>7}{'loss':>8}{'p05':>7}{'p95':>7}{'interv':>8}{'auto':>7}{'hfree':>7}"
    lines += ["", head, "-" * len(head)]

    def fmt(name: str, alpha: str, m: dict[str, float]) -> str:
        return (
            f"{name:<22}{alpha:>7}{m['mean_loss']:>8.3f}{m['loss_p05']:>7.3f}{m['loss_p95']:>7.3f}"
            f"{m['intervention']:>8.3f}{m['autonomous_success']:>7.3f}{m['harm_free_success']:>7.3f}"
        )

    lines.append(fmt("no_guard", "-", result["no_guard"]))
    for row in result["alphas"]:
        a = f"{row['alpha']:.2f}"
        lines.append(fmt("gcarb", a, row["gcarb"]))
        lines.append(fmt("gcarb+safecommit", a, row["gcarb_safecommit"]))
        lines.append(fmt("safecommit_only", a, row["safecommit_only"]))
    lines += format_gate([row for row in result["alphas"] if "gate" in row])
    lines.append(
        f"\nsession agreement (re-decision = Session verdict at the policy's kappa): {result['session_agreement']}; "
        f"internal errors: {result['internal_errors']}"
    )
    return "\n".join(lines)


__all__ = ["Proposal", "Replayed", "format_study", "replay_episode", "safecommit_replay_study", "study_guard"]
