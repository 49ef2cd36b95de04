"""``carbguard monitor AUDIT --artifact ART [--labels LABELS]``: two monitors over a deployment's audit log.

Reads the (hash-verified) audit log and takes the sessions decided under the artifact that were
closed (a ``session_end`` entry), in the order they started (their first entry).

- Score monitor (always): each closed session's statistic (the ``session_end`` entry's ``stop_max``:
  the maximum score up to the gate's first stop at λ̂) goes through a conformal test martingale
  against the calibration statistics stored in the artifact (:mod:`guard.calibration.monitor`).  It
  is a drift detector on scores, blind to harm that scores low.  The p-values' tie-breaking seed is
  derived from the artifact's checksum, so a run cannot be repeated with other seeds until it alarms.
- Risk monitor (``--labels``): the realised declared-ledger loss of each labelled session
  (:func:`guard.calibration.risk_monitor.label_loss`) goes through a test by betting of
  "mean realised loss ≤ α" (α of the artifact), with a running lower confidence sequence for it
  (:mod:`guard.calibration.risk_monitor`).

Exit code 0: no alarm; 3: an alarm of either monitor (1/δ reached); 2: bad input.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

from guard.cli._common import write_output
from guard.errors import GuardError

EXIT_ALARM = 3

DESCRIPTION = (
    "Two monitors over the closed sessions of an audit log decided under the artifact, in session-start order. "
    "Score monitor: score distribution, gate intervention rate, and a conformal test martingale on each "
    "episode's maximum score — a drift detector on scores, blind to harm that scores low; under "
    "exchangeability with the calibration episodes it reaches 1/delta with probability at most delta "
    "(Ville's inequality). Its tie-breaking seed is derived from the artifact's checksum. Risk monitor "
    "(--labels): each labelled session's realised declared-ledger loss (1 if its label charges a harm, 0 "
    "for an override label with no harms) feeds a test by betting of 'mean realised loss <= alpha' (the "
    "artifact's alpha) with a running lower confidence bound; it alarms with probability at most delta "
    "whenever the conditional mean loss stays <= alpha, exchangeable or not, provided which sessions are "
    "labelled does not depend on their outcome. An alarm means the calibrated guarantee may not hold: record "
    "fresh shadow episodes and recalibrate. No alarm is not evidence that the guarantee holds. Exit code 3 "
    "on either alarm."
)


@dataclass
class _Session:
    scores: dict[str, float | None] = field(default_factory=dict)
    end: float | None = None
    closed: bool = False
    first: int = 0
    review: tuple[bool, float] | None = None


@dataclass(frozen=True, slots=True)
class Deployed:
    """The closed sessions of an audit log under one artifact, in session-start order."""

    sessions: tuple[str, ...]
    statistics: tuple[float, ...]
    call_ids: tuple[frozenset[str], ...]
    ignored: int
    open_sessions: int
    reviews: tuple[tuple[bool, float] | None, ...] = ()


def _decode(value: Any) -> float | None:
    if value is None:
        return None
    if value in ("inf", "-inf"):
        return float(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise GuardError(f"audit score {value!r} is not a number")


def _key(artifact_id: Any) -> str | None:
    return artifact_id.rsplit("#", 1)[-1] if isinstance(artifact_id, str) else None


def deployed_sessions(entries: list[dict[str, Any]], checksum: str, threshold: float) -> Deployed:
    """Closed sessions under the artifact, ordered by their first entry; their statistics and call ids."""
    from guard.recorder import stop_max

    sessions: dict[str, _Session] = {}
    ignored = 0
    for line, entry in enumerate(entries, start=1):
        if entry.get("kind") in ("review", "breaker"):  # a human's answer, a breaker switch: no new score
            continue
        if _key(entry.get("artifact")) != checksum[:12]:
            ignored += 1
            continue
        record = sessions.setdefault(str(entry.get("session")), _Session(first=line))
        if entry.get("event") == "session_end":
            record.closed = True
            record.end = _decode(entry.get("stop_max"))
            record.review = _review(entry.get("review"))
            continue
        score = _decode(entry.get("score"))
        call_id = str(entry.get("call_id"))
        record.scores[call_id] = score  # a re-decision (after probes) replaces the earlier one, in place
    closed = sorted(((sid, s) for sid, s in sessions.items() if s.closed), key=lambda item: item[1].first)
    stats = tuple(s.end if s.end is not None else stop_max(s.scores.values(), threshold) for _, s in closed)
    return Deployed(
        sessions=tuple(sid for sid, _ in closed),
        statistics=stats,
        call_ids=tuple(frozenset(s.scores) for _, s in closed),
        ignored=ignored,
        open_sessions=len(sessions) - len(closed),
        reviews=tuple(s.review for _, s in closed),
    )


def _review(value: Any) -> tuple[bool, float] | None:
    """A ``session_end`` entry's ``review`` member (guard.review); GuardError if malformed."""
    if value is None:
        return None
    picked, p = (value.get("picked"), value.get("p")) if isinstance(value, dict) else (None, None)
    if not isinstance(picked, bool) or isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
        raise GuardError(f"audit session_end review {value!r}: expected {{'picked': bool, 'p': p in (0, 1]}}")
    return picked, float(p)


def sampled_terms(labels_path: str, deployed: Deployed) -> tuple[list[str], list[float], float, int]:
    """Inverse-propensity terms under review sampling: ``(picked/p)·L`` per closed session in session order.

    Unpicked sessions are 0 terms; the stream stops before the first picked session without a label
    (returned: how many picked sessions wait for one).  A label of an unpicked session, or a log
    mixing sampled and unsampled sessions, is refused (fail closed: either would bias the test).
    """
    from guard.calibration.risk_monitor import label_loss
    from guard.ledger.labels import read_labels

    if any(r is None for r in deployed.reviews):
        raise GuardError("audit log mixes sessions with and without review sampling; monitor them separately")
    labels = read_labels(labels_path)
    picked = {sid for sid, r in zip(deployed.sessions, deployed.reviews, strict=True) if r is not None and r[0]}
    stray = sorted((lab for sid, lab in labels.items() if sid not in picked), key=lambda lab: lab.line)
    if stray:
        raise GuardError(
            f"{labels_path}:{stray[0].line}: episode: {stray[0].episode!r} is not a closed session picked for "
            f"review ({len(stray)} such label(s)); labels of unpicked sessions would bias the risk monitor"
        )
    order: list[str] = []
    terms: list[float] = []
    upper = 1.0
    for k, (sid, review) in enumerate(zip(deployed.sessions, deployed.reviews, strict=True)):
        assert review is not None
        if review[0] and sid not in labels:
            return order, terms, upper, sum(1 for s in deployed.sessions[k:] if s in picked)
        upper = max(upper, 1.0 / review[1])
        loss = label_loss(labels[sid], deployed.call_ids[k], len(deployed.call_ids[k]),
                          f"{labels_path}:{labels[sid].line}") if review[0] else 0.0
        order.append(sid)
        terms.append(loss / review[1] if review[0] else 0.0)
    return order, terms, upper, 0


def deployed_statistics(entries: list[dict[str, Any]], checksum: str, threshold: float) -> tuple[list[float], int]:
    """Per closed session, its statistic in session-start order; and the entries of other artifacts."""
    deployed = deployed_sessions(entries, checksum, threshold)
    return list(deployed.statistics), deployed.ignored


def tie_seed(body: dict[str, Any]) -> int:
    """The score monitor's tie-breaking seed: a hash of the artifact's calibration (no free choice of seed).

    Everything of the artifact body but ``command`` and ``checksum``: the command names paths, and the
    seed must not depend on where the calibration was run from.
    """
    kept = {k: v for k, v in body.items() if k not in ("command", "checksum")}
    text = json.dumps(kept, sort_keys=True, ensure_ascii=False)
    return int(hashlib.sha256(f"carbguard-monitor:{text}".encode()).hexdigest()[:16], 16)


def realised_losses(labels_path: str, deployed: Deployed) -> tuple[list[str], list[float]]:
    """The labelled closed sessions in session-start order and each one's realised loss (GuardError on bad labels)."""
    from guard.calibration.risk_monitor import label_loss
    from guard.ledger.labels import read_labels

    labels = read_labels(labels_path)
    known = {sid: k for k, sid in enumerate(deployed.sessions)}
    unknown = sorted((lab for sid, lab in labels.items() if sid not in known), key=lambda lab: lab.line)
    if unknown:
        raise GuardError(
            f"{labels_path}:{unknown[0].line}: episode: {unknown[0].episode!r} is not a closed session decided under "
            f"the artifact ({len(unknown)} label(s) name no such session)"
        )
    order = sorted(labels, key=lambda sid: known[sid])
    losses = [
        label_loss(labels[sid], deployed.call_ids[known[sid]], len(deployed.call_ids[known[sid]]),
                   f"{labels_path}:{labels[sid].line}")
        for sid in order
    ]
    return order, losses


def _monitor(args: argparse.Namespace) -> int:
    from guard.artifact import load_artifact
    from guard.audit import read_entries, read_key_file, verify
    from guard.calibration.monitor import monitor, read_artifact_statistics
    from guard.calibration.risk_monitor import risk_monitor

    if args.seed is not None:
        raise GuardError(
            "--seed was removed: the score monitor's tie-breaking seed is derived from the artifact's checksum, "
            "so a deployment cannot be re-tested with other seeds until one alarms"
        )
    inputs = [args.audit, args.artifact, args.key_file, args.labels]
    if args.plot:
        from guard.cli._common import check_output

        check_output(args.plot, inputs, "--plot")
    key = read_key_file(args.key_file) if args.key_file else None
    artifact = load_artifact(args.artifact)
    calibration = read_artifact_statistics(artifact.body, str(args.artifact))
    report = verify(args.audit, key=key)
    if not report.ok:
        raise GuardError(f"{args.audit}: audit log does not verify: {report.describe()}")
    checksum = artifact.body["checksum"]
    deployed = deployed_sessions(read_entries(args.audit), checksum, artifact.threshold)
    if not deployed.statistics:
        raise GuardError(
            f"{args.audit}: no closed sessions decided under artifact {artifact.artifact_id} "
            f"({deployed.open_sessions} session(s) never closed; {deployed.ignored} entries of other artifacts)"
        )
    risk = None
    sampled: dict[str, Any] = {}
    if args.labels and any(r is not None for r in deployed.reviews):
        labelled, losses, upper, pending = sampled_terms(args.labels, deployed)
        risk = risk_monitor(losses, artifact.alpha, args.delta, upper=upper)
        sampled = {"review_sampling": {"weighting": "inverse propensity (picked/p)*L", "pending_reviews": pending}}
    elif args.labels:
        labelled, losses = realised_losses(args.labels, deployed)
        risk = risk_monitor(losses, artifact.alpha, args.delta)
    result = monitor(calibration, list(deployed.statistics), artifact.threshold, delta=args.delta,
                     martingale=args.martingale, seed=tie_seed(artifact.body))
    out: dict[str, Any] = {
        "audit": str(args.audit), "artifact": artifact.artifact_id, "threshold": _enc(artifact.threshold),
        "ignored_entries": deployed.ignored, "open_sessions": deployed.open_sessions, **result.to_json(),
    }
    if risk is not None:
        out["risk"] = {"labels": str(args.labels), "sessions": labelled, **sampled, **risk.to_json()}
    if args.plot:
        _plot(result.path, result.delta, result.alarm_at, out.get("risk"), args.plot, inputs)
    alarm = result.alarm or (risk is not None and risk.alarm)
    if alarm and args.trip:
        from guard.breaker import trip_text

        which = "risk" if risk is not None and risk.alarm else "score"
        reason = f"carbguard monitor: {which} alarm on {args.audit}"
        write_output(args.trip, trip_text(artifact.artifact_id, reason), inputs, "--trip")
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(_table(out))
    return EXIT_ALARM if alarm else 0


def _enc(value: float) -> float | str:
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _table(out: dict[str, Any]) -> str:
    cal, dep = out["calibration"], out["deployed"]
    rows = [
        ("episodes", "n"),
        ("gate intervention rate", "intervention_rate"),
        ("max score, median", "median"),
        ("max score, 90th percentile", "p90"),
        ("max score, mean (finite)", "mean_finite"),
    ]
    lines = [f"monitor {out['audit']} against {out['artifact']} (threshold {_fmt(out['threshold'])})",
             f"{'':28}{'calibration':>14}{'deployed':>14}"]
    lines += [f"{label:28}{_fmt(cal[key]):>14}{_fmt(dep[key]):>14}" for label, key in rows]
    verdict = (
        f"ALARM at deployed episode {out['alarm_at_episode']}: exchangeability is not plausible; the calibrated "
        "guarantee may not hold — record fresh shadow episodes and recalibrate"
        if out["alarm"]
        else "no alarm (this is not evidence that the guarantee holds)"
    )
    lines += [
        f"{out['martingale']} martingale: final {out['final_value']:.3g}, max {out['max_value']:.3g}, "
        f"alarm level 1/delta = {out['alarm_level']:.3g} (false alarm <= delta = {out['delta']} "
        "under exchangeability)",
        verdict,
    ]
    if out["ignored_entries"]:
        lines.append(f"{out['ignored_entries']} audit entries of other artifacts were ignored")
    if out["open_sessions"]:
        lines.append(f"{out['open_sessions']} session(s) never closed were left out")
    if "risk" in out:
        lines += _risk_lines(out["risk"])
    return "\n".join(lines)


def _risk_lines(risk: dict[str, Any]) -> list[str]:
    n, bounds = risk["n"], risk["lower_bounds"]
    head = (f"risk monitor: {n} labelled session(s), mean realised loss "
            f"{_fmt(risk['mean_loss']) if n else 'n/a'}, test of mean loss <= alpha = {risk['alpha']}: wealth final "
            f"{risk['final_wealth']:.3g}, max {risk['max_wealth']:.3g}, "
            f"alarm level 1/delta = {risk['alarm_level']:.3g}")
    bound = f"lower confidence bound on the mean realised loss (1 - delta = {1 - risk['delta']:g}, anytime): " + (
        f"{bounds[-1]:.3f}" if n else "none yet")
    verdict = (
        f"RISK ALARM at labelled session {risk['alarm_at_episode']}: evidence (false alarm <= delta) that the mean "
        "realised declared-ledger loss exceeds alpha; the guarantee may not hold here — recalibrate"
        if risk["alarm"]
        else "no risk alarm (this is not evidence that the realised loss is <= alpha)"
    )
    return [head, bound, verdict]


def _plot(
    path_values: Any, delta: float, alarm_at: int | None, risk: dict[str, Any] | None, out: str,
    inputs: list[str | None],
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise GuardError("--plot needs matplotlib: pip install 'carbguard[plot]'") from exc
    fig, axes = plt.subplots(2 if risk else 1, 1, figsize=(7, 6.4 if risk else 3.6), squeeze=False)
    ax = axes[0][0]
    ax.plot(range(1, len(path_values) + 1), path_values, label="test martingale")
    ax.axhline(1.0 / delta, color="red", linestyle="--", label=f"alarm level 1/δ = {1 / delta:g}")
    if alarm_at is not None:
        ax.axvline(alarm_at, color="grey", linestyle=":", label=f"alarm at episode {alarm_at}")
    ax.set_yscale("log")
    ax.set(xlabel="deployed episode", ylabel="martingale value (log)", title="Exchangeability monitor (scores)")
    ax.legend(fontsize=8)
    if risk:
        ax = axes[1][0]
        steps = range(1, risk["n"] + 1)
        ax.step(steps, risk["lower_bounds"], where="post", label=f"lower confidence bound (1 − δ = {1 - delta:g})")
        ax.axhline(risk["alpha"], color="red", linestyle="--", label=f"α = {risk['alpha']:g}")
        if risk["alarm_at_episode"] is not None:
            ax.axvline(risk["alarm_at_episode"], color="grey", linestyle=":",
                       label=f"risk alarm at session {risk['alarm_at_episode']}")
        ax.set(xlabel="labelled session", ylabel="mean realised loss", title="Risk monitor (labels)", ylim=(0, 1))
        ax.legend(fontsize=8)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    write_output(out, image.getvalue(), inputs, "--plot")


def _delta(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"delta must lie in (0, 1), got {text}")
    return value


def register(sub: Any) -> None:
    """``carbguard monitor``."""
    parser = sub.add_parser("monitor", help="score drift and (with --labels) realised-risk monitors (exit 3 on alarm)",
                            description=DESCRIPTION)
    parser.add_argument("audit", help="the deployment's audit log (JSON lines, hash-chained)")
    parser.add_argument("--artifact", required=True, help="the calibration artifact the guard ran with")
    parser.add_argument("--key-file", help="the deployment key of a keyed audit log (verifies its MACs)")
    parser.add_argument("--delta", type=_delta, default=0.05, help="false-alarm level δ (default 0.05)")
    parser.add_argument("--martingale", choices=("jumper", "power"), default="jumper",
                        help="simple jumper (default; recovers after long exchangeable runs) or power mixture")
    parser.add_argument("--labels", metavar="LABELS",
                        help="labels file keyed by session id (the ledger labels format): feeds the risk monitor")
    parser.add_argument("--trip", metavar="FILE",
                        help="on an alarm, write this trip file: a guard run with trip_file=FILE switches to its "
                        "fallback at its next decision (guard.breaker)")
    parser.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)  # removed: an error if given
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--plot", metavar="PNG", help="write the martingale path (and the risk lower bound) as a PNG")
    parser.set_defaults(func=_monitor)
