"""``carbguard monitor AUDIT --artifact ART [--labels LABELS]``: two monitors over a deployment's audit log.

Reads the (hash-verified) audit log and takes the sessions decided under the artifact in the order
they started (their first entry), up to the first one not yet closed (a ``session_end`` entry;
:mod:`guard.cli.deployed`).

- Score monitor (always): each closed session's statistic (the ``session_end`` entry's ``stop_max``:
  the maximum score up to the gate's first stop at λ̂) goes through a conformal test martingale
  against the calibration statistics stored in the artifact (:mod:`guard.calibration.monitor`).  It
  is a drift detector on scores, blind to harm that scores low.  The p-values' tie-breaking seed is
  derived from the artifact, so a run cannot be repeated with other seeds until it alarms.
- Risk monitor (``--labels``): the realised declared-ledger loss of each labelled session
  (:func:`guard.calibration.risk_monitor.label_loss`) goes through a test by betting of
  "mean realised loss ≤ α" (α of the artifact), with a running lower confidence sequence for it
  (:mod:`guard.calibration.risk_monitor`).

``carbguard monitor --delay-table`` prints the risk monitor's false-alarm rates and detection delays
by seeded Monte Carlo (:mod:`guard.calibration.risk_delays`) instead.

Sessions that stay open blind no monitor: a session still open past the bound (``--open-bound N``
entries, default 1000, or ``--open-bound-seconds S``, default 3600, after its last entry) no longer
holds the stream up; it enters at its place with the statistic of the calls it decided, and it is
reported by id.

Exit code 0: no alarm, no session open past the bound; 3: an alarm of either monitor (1/δ reached;
it takes precedence); 5: no alarm, but a session open past the bound; 2: bad input.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from guard.cli._common import check_output, ranged, write_output
from guard.cli.deployed import Deployed, realised_losses, sampled_terms
from guard.cli.monitor_key import key_path
from guard.cli.monitor_state import add_state_options, read_log, state_path
from guard.cli.open_sessions import EXIT_OPEN, add_open_bound, open_bound, open_past_bound_line
from guard.errors import GuardError
from guard.jsonio import encode_float

EXIT_ALARM = 3

DESCRIPTION = (
    "Two monitors over the sessions of an audit log decided under the artifact, in session-start order, up to "
    "the first session not yet closed. "
    "Score monitor: score distribution, gate intervention rate, and a conformal test martingale on each "
    "episode's maximum score — a drift detector on scores, blind to harm that scores low; under "
    "exchangeability with the calibration episodes it reaches 1/delta with probability at most delta "
    "(Ville's inequality). Its tie-breaking seed is derived from the artifact. Risk monitor "
    "(--labels): each labelled session's realised declared-ledger loss (1 if its label charges a harm, 0 "
    "for an override label with no harms) feeds a test by betting of 'mean realised loss <= alpha' (the "
    "artifact's alpha) with a running lower confidence bound; it alarms with probability at most delta "
    "whenever the conditional mean loss stays <= alpha, exchangeable or not, provided which sessions are "
    "labelled does not depend on their outcome. An alarm means the calibrated guarantee may not hold: record "
    "fresh shadow episodes and recalibrate. No alarm is not evidence that the guarantee holds. Exit code 3 "
    "on either alarm. --delay-table prints the risk monitor's false-alarm rates and detection delays "
    "(seeded Monte Carlo) instead. A session still open past the bound (--open-bound entries or "
    "--open-bound-seconds after its last entry) no longer holds the stream up: it enters at its place with the "
    "statistic of the calls it decided and is reported by id. Exit codes: 0 no alarm and no session open past "
    "the bound; 3 an alarm (takes precedence); 5 no alarm, but a session open past the bound; 2 bad input."
)


def tie_seed(body: dict[str, Any]) -> int:
    """The score monitor's tie-breaking seed: a hash of the artifact's calibration (no free choice of seed).

    Everything of the artifact body but ``command`` and ``checksum``: the command names paths, and the
    seed must not depend on where the calibration was run from.
    """
    kept = {k: v for k, v in body.items() if k not in ("command", "checksum")}
    text = json.dumps(kept, sort_keys=True, ensure_ascii=False)
    return int(hashlib.sha256(f"carbguard-monitor:{text}".encode()).hexdigest()[:16], 16)


def _monitor(args: argparse.Namespace) -> int:
    if args.seed is not None:
        raise GuardError(
            "--seed was removed: the score monitor's tie-breaking seed is derived from the artifact's checksum, "
            "so a deployment cannot be re-tested with other seeds until one alarms"
        )
    if args.delay_table:
        return _delay_table(args)
    if args.alpha is not None or args.streams is not None:
        raise GuardError("--alpha and --streams go with --delay-table only (the audit's alpha is the artifact's)")
    missing = [name for name, value in (("AUDIT", args.audit), ("--artifact", args.artifact)) if value is None]
    if missing:
        raise GuardError(f"the following arguments are required: {', '.join(missing)} (or use --delay-table)")
    inputs = [args.audit, args.artifact, args.key_file, args.labels]
    state = state_path(args)
    if state is not None:
        inputs.append(str(check_output(state, inputs, "--state")))
        inputs.append(str(key_path(state)))  # the state's own key (an unkeyed log): never an output either
    if args.plot:
        check_output(args.plot, inputs, "--plot")
    out, alarm, which = _run(args, state)
    if args.plot:
        risk = out.get("risk")
        _plot(out["path"], args.delta, out["alarm_at_episode"], risk, args.plot, inputs)
    if alarm and args.trip:
        from guard.breaker import trip_text

        reason = f"carbguard monitor: {which} alarm on {args.audit}"
        write_output(args.trip, trip_text(out["artifact"], reason), inputs, "--trip")
    print(json.dumps(out, indent=1, allow_nan=False) if args.json else _table(out))
    if alarm:
        return EXIT_ALARM
    return EXIT_OPEN if out["open_past_bound"] else 0


def _deployed(
    args: argparse.Namespace, checksum: str, threshold: float, artifact_id: str, state: Path | None
) -> Deployed:
    """The verified log's sessions (only the entries the state has not seen are read: guard.cli.monitor_state)."""
    deployed = read_log(args.audit, checksum, args.key_file, state).deployed(threshold, open_bound(args))
    if not deployed.statistics:
        blocked = f"; the first session, {deployed.blocked_by!r}, is not closed" if deployed.blocked_by else ""
        raise GuardError(
            f"{args.audit}: no closed sessions decided under artifact {artifact_id} "
            f"({deployed.open_sessions} session(s) not closed{blocked}; {deployed.ignored} entries of other artifacts)"
        )
    return deployed


def _run(args: argparse.Namespace, state: Path | None) -> tuple[dict[str, Any], bool, str]:
    """Both monitors on the audit log: the output object, whether either alarmed, and which one."""
    from guard.artifact import load_artifact
    from guard.calibration.monitor import monitor, read_artifact_statistics
    from guard.calibration.risk_monitor import risk_monitor

    artifact = load_artifact(args.artifact)
    calibration = read_artifact_statistics(artifact.body, str(args.artifact))
    deployed = _deployed(args, artifact.body["checksum"], artifact.threshold, artifact.artifact_id, state)
    risk = None
    sampled: dict[str, Any] = {}
    if args.labels and any(r is not None for r in deployed.reviews):
        labelled, losses, upper, pending = sampled_terms(args.labels, deployed)
        risk = risk_monitor(losses, artifact.alpha, args.delta, upper=upper)
        sampled = {"review_sampling": {"weighting": "inverse propensity (picked/p)*L", "pending_reviews": pending}}
    elif args.labels:
        labelled, losses = realised_losses(args.labels, deployed)
        risk = risk_monitor(losses, artifact.alpha, args.delta)
    result = monitor(
        calibration,
        list(deployed.statistics),
        artifact.threshold,
        delta=args.delta,
        martingale=args.martingale,
        seed=tie_seed(artifact.body),
    )
    out: dict[str, Any] = {
        "audit": str(args.audit),
        "artifact": artifact.artifact_id,
        "threshold": encode_float(artifact.threshold),
        "ignored_entries": deployed.ignored,
        "open_sessions": deployed.open_sessions,
        "waiting_sessions": deployed.waiting,
        "first_open_session": deployed.blocked_by,
        "open_past_bound": list(deployed.open_past_bound),
        "open_bound": {"entries": args.open_bound, "seconds": args.open_bound_seconds},
        **result.to_json(),
    }
    if risk is not None:
        out["risk"] = {"labels": str(args.labels), "sessions": labelled, **sampled, **risk.to_json()}
    which = "risk" if risk is not None and risk.alarm else "score"
    return out, result.alarm or (risk is not None and risk.alarm), which


def _delay_table(args: argparse.Namespace) -> int:
    from guard.calibration.risk_delays import delay_table, format_table

    if args.audit is not None or args.artifact is not None or args.labels or args.trip or args.plot:
        raise GuardError("--delay-table takes no audit log, --artifact, --labels, --trip or --plot")
    alpha = 0.1 if args.alpha is None else args.alpha
    streams = 2000 if args.streams is None else args.streams
    cells = delay_table(alpha, args.delta, streams=streams)
    if args.json:
        print(
            json.dumps(
                {
                    "alpha": alpha,
                    "delta": args.delta,
                    "streams": streams,
                    "seed": 0,
                    "rows": [c.to_json() for c in cells],
                },
                indent=1,
            )
        )
    else:
        print(format_table(cells, alpha, args.delta, streams, 0))
    return 0


def _fmt(value: Any) -> str:
    if value is None:  # a summary of nothing (null in --json)
        return "n/a"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _g(value: float | str) -> str:
    """A martingale or wealth value of the JSON output (a number, or "inf" once it overflowed) in 3 digits."""
    return f"{float(value):.3g}"


def _table(out: dict[str, Any]) -> str:
    cal, dep = out["calibration"], out["deployed"]
    rows = [
        ("episodes", "n"),
        ("gate intervention rate", "intervention_rate"),
        ("max score, median", "median"),
        ("max score, 90th percentile", "p90"),
        ("max score, mean (finite)", "mean_finite"),
    ]
    lines = [
        f"monitor {out['audit']} against {out['artifact']} (threshold {_fmt(out['threshold'])})",
        f"{'':28}{'calibration':>14}{'deployed':>14}",
    ]
    lines += [f"{label:28}{_fmt(cal[key]):>14}{_fmt(dep[key]):>14}" for label, key in rows]
    verdict = (
        f"ALARM at deployed episode {out['alarm_at_episode']}: exchangeability is not plausible; the calibrated "
        "guarantee may not hold — record fresh shadow episodes and recalibrate"
        if out["alarm"]
        else "no alarm (this is not evidence that the guarantee holds)"
    )
    lines += [
        f"{out['martingale']} martingale: final {_g(out['final_value'])}, max {_g(out['max_value'])}, "
        f"alarm level 1/delta = {out['alarm_level']:.3g} (false alarm <= delta = {out['delta']} "
        "under exchangeability)",
        verdict,
    ]
    if out["ignored_entries"]:
        lines.append(f"{out['ignored_entries']} audit entries of other artifacts were ignored")
    if out["first_open_session"] is not None:
        lines.append(
            f"{out['open_sessions']} session(s) not closed; the stream stops before the first of them, "
            f"{out['first_open_session']!r} ({out['waiting_sessions']} closed session(s) after it wait for it)"
        )
    if out["open_past_bound"]:
        lines.append(open_past_bound_line(out["open_past_bound"], out["open_bound"], "they enter the stream"))
    if "risk" in out:
        lines += _risk_lines(out["risk"])
    return "\n".join(lines)


def _risk_lines(risk: dict[str, Any]) -> list[str]:
    n, bounds = risk["n"], risk["lower_bounds"]
    sampled = risk.get("review_sampling")
    unit = "closed session" if sampled else "labelled session"
    mean = (_fmt(risk["mean_loss"]) + (" (1/p-weighted estimate)" if sampled else "")) if n else "n/a"
    head = (
        f"risk monitor: {n} {unit}(s), mean realised loss {mean}, test of mean loss <= alpha = "
        f"{risk['alpha']}: wealth final {_g(risk['final_wealth'])}, max {_g(risk['max_wealth'])}, "
        f"alarm level 1/delta = {risk['alarm_level']:.3g}"
    )
    bound = f"lower confidence bound on the mean realised loss (1 - delta = {1 - risk['delta']:g}, anytime): " + (
        f"{bounds[-1]:.3f}" if n else "none yet"
    )
    verdict = (
        f"RISK ALARM at {unit} {risk['alarm_at_episode']}: evidence (false alarm <= delta) that the mean "
        "realised declared-ledger loss exceeds alpha; the guarantee may not hold here — recalibrate"
        if risk["alarm"]
        else "no risk alarm (this is not evidence that the realised loss is <= alpha)"
    )
    if sampled is None:
        return [head, bound, verdict]
    note = (
        f"review sampling: one term (picked/p)*L per closed session in start order; "
        f"{sampled['pending_reviews']} picked session(s) wait for a label (the stream stops before the first)"
    )
    return [head, note, bound, verdict]


def _plot(
    path_values: Any,
    delta: float,
    alarm_at: int | None,
    risk: dict[str, Any] | None,
    out: str,
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
    ax.plot(range(1, len(path_values) + 1), [float(v) for v in path_values], label="test martingale")
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
            ax.axvline(
                risk["alarm_at_episode"],
                color="grey",
                linestyle=":",
                label=f"risk alarm at session {risk['alarm_at_episode']}",
            )
        ax.set(xlabel="labelled session", ylabel="mean realised loss", title="Risk monitor (labels)", ylim=(0, 1))
        ax.legend(fontsize=8)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    write_output(out, image.getvalue(), inputs, "--plot")


_unit = ranged(float, lambda value: 0.0 < value < 1.0, "must lie in (0, 1)")
_count = ranged(int, lambda value: 10 <= value <= 100_000, "must lie in [10, 100000]")


def register(sub: Any) -> None:
    """``carbguard monitor``."""
    parser = sub.add_parser(
        "monitor",
        help="score drift and (with --labels) realised-risk monitors (exit 3 on alarm, 5 on sessions open past "
        "the bound)",
        description=DESCRIPTION,
    )
    parser.add_argument("audit", nargs="?", help="the deployment's audit log (JSON lines, hash-chained)")
    parser.add_argument("--artifact", help="the calibration artifact the guard ran with (required with AUDIT)")
    parser.add_argument("--key-file", help="the deployment key of a keyed audit log (verifies its MACs)")
    parser.add_argument("--delta", type=_unit, default=0.05, help="false-alarm level δ (default 0.05)")
    parser.add_argument(
        "--martingale",
        choices=("jumper", "power"),
        default="jumper",
        help="simple jumper (default; recovers after long exchangeable runs) or power mixture",
    )
    parser.add_argument(
        "--labels",
        metavar="LABELS",
        help="labels file keyed by session id (the ledger labels format): feeds the risk monitor",
    )
    parser.add_argument(
        "--trip",
        metavar="FILE",
        help="on an alarm, write this trip file: a guard run with trip_file=FILE switches to its "
        "fallback at its next decision (guard.breaker)",
    )
    parser.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)  # removed: an error if given
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--delay-table",
        action="store_true",
        help="print the risk monitor's false-alarm rates and detection delays at mean risk 1.5, 2 "
        "and 3 alpha, at review rates 1 and 0.25 (seeded Monte Carlo, seed 0) and exit",
    )
    parser.add_argument("--alpha", type=_unit, default=None, help="with --delay-table: alpha (default 0.1)")
    parser.add_argument(
        "--streams", type=_count, default=None, help="with --delay-table: streams per row (default 2000)"
    )
    parser.add_argument("--plot", metavar="PNG", help="write the martingale path (and the risk lower bound) as a PNG")
    add_open_bound(parser)
    add_state_options(parser)
    parser.set_defaults(func=_monitor)
