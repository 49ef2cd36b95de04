"""``carbguard monitor AUDIT --artifact ART``: is exchangeability with the calibration set still plausible?

Reads the (hash-verified) audit log, groups the decisions of each session made under the artifact into
one deployed episode, takes its statistic (maximum score up to the gate's first stop at λ̂; the
``session_end`` entry's ``stop_max`` when the session was closed), and runs a conformal test
martingale against the calibration statistics stored in the artifact (:mod:`guard.calibration.monitor`).
Exit code 0: no alarm; 3: alarm (the martingale reached 1/δ); 2: bad input.
"""

from __future__ import annotations

import argparse
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

from guard.cli._common import write_output
from guard.errors import GuardError

EXIT_ALARM = 3

DESCRIPTION = (
    "Compare the deployed episodes in an audit log with the artifact's calibration episodes: score distribution, "
    "gate intervention rate, and a conformal test martingale on each episode's maximum score. Under "
    "exchangeability the martingale reaches 1/delta with probability at most delta (Ville's inequality); an "
    "alarm means the calibrated guarantee may no longer hold: record fresh shadow episodes and recalibrate. "
    "No alarm is not evidence that the guarantee holds. Exit code 3 on alarm."
)


@dataclass
class _Session:
    scores: dict[str, float | None] = field(default_factory=dict)
    end: float | None = None
    last: int = 0


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


def deployed_statistics(entries: list[dict[str, Any]], checksum: str, threshold: float) -> tuple[list[float], int]:
    """Per-session statistics in the order the sessions ended (last entry), and the entries ignored."""
    from guard.recorder import stop_max

    sessions: dict[str, _Session] = {}
    ignored = 0
    for line, entry in enumerate(entries, start=1):
        if _key(entry.get("artifact")) != checksum[:12]:
            ignored += 1
            continue
        record = sessions.setdefault(str(entry.get("session")), _Session())
        record.last = line
        if entry.get("event") == "session_end":
            record.end = _decode(entry.get("stop_max"))
            continue
        score = _decode(entry.get("score"))
        call_id = str(entry.get("call_id"))
        record.scores[call_id] = score  # a re-decision (after probes) replaces the earlier one, in place
    ordered = sorted(sessions.values(), key=lambda s: s.last)
    stats = [s.end if s.end is not None else stop_max(s.scores.values(), threshold) for s in ordered]
    return stats, ignored


def _monitor(args: argparse.Namespace) -> int:
    from guard.artifact import load_artifact
    from guard.audit import read_entries, read_key_file, verify
    from guard.calibration.monitor import monitor, read_artifact_statistics

    if args.plot:
        from guard.cli._common import check_output

        check_output(args.plot, [args.audit, args.artifact, args.key_file], "--plot")
    key = read_key_file(args.key_file) if args.key_file else None
    artifact = load_artifact(args.artifact)
    calibration = read_artifact_statistics(artifact.body, str(args.artifact))
    report = verify(args.audit, key=key)
    if not report.ok:
        raise GuardError(f"{args.audit}: audit log does not verify: {report.describe()}")
    stats, ignored = deployed_statistics(read_entries(args.audit), artifact.body["checksum"], artifact.threshold)
    if not stats:
        raise GuardError(
            f"{args.audit}: no decisions made under artifact {artifact.artifact_id} "
            f"({ignored} entries of other artifacts or none)"
        )
    result = monitor(
        calibration, stats, artifact.threshold, delta=args.delta, martingale=args.martingale, seed=args.seed
    )
    out = {"audit": str(args.audit), "artifact": artifact.artifact_id, "threshold": _enc(artifact.threshold),
           "ignored_entries": ignored, **result.to_json()}
    if args.plot:
        _plot(result.path, result.delta, result.alarm_at, args.plot, [args.audit, args.artifact, args.key_file])
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(_table(out))
    return EXIT_ALARM if result.alarm else 0


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
    return "\n".join(lines)


def _plot(path_values: Any, delta: float, alarm_at: int | None, out: str, inputs: list[str | None]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise GuardError("--plot needs matplotlib: pip install 'carbguard[plot]'") from exc
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.plot(range(1, len(path_values) + 1), path_values, label="test martingale")
    ax.axhline(1.0 / delta, color="red", linestyle="--", label=f"alarm level 1/δ = {1 / delta:g}")
    if alarm_at is not None:
        ax.axvline(alarm_at, color="grey", linestyle=":", label=f"alarm at episode {alarm_at}")
    ax.set_yscale("log")
    ax.set(xlabel="deployed episode", ylabel="martingale value (log)", title="Exchangeability monitor")
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
    parser = sub.add_parser("monitor", help="test exchangeability of deployed episodes (exit 3 on alarm)",
                            description=DESCRIPTION)
    parser.add_argument("audit", help="the deployment's audit log (JSON lines, hash-chained)")
    parser.add_argument("--artifact", required=True, help="the calibration artifact the guard ran with")
    parser.add_argument("--key-file", help="the deployment key of a keyed audit log (verifies its MACs)")
    parser.add_argument("--delta", type=_delta, default=0.05, help="false-alarm level δ (default 0.05)")
    parser.add_argument("--martingale", choices=("jumper", "power"), default="jumper",
                        help="simple jumper (default; recovers after long exchangeable runs) or power mixture")
    parser.add_argument("--seed", type=int, default=0, help="seed of the p-values' tie-breaking (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--plot", metavar="PNG", help="write the martingale path as a PNG")
    parser.set_defaults(func=_monitor)
