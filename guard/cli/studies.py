"""``carbguard safecommit study|calibrate``: SafeCommit on the embedded AgentDojo episodes, κ on your own."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path
from typing import Any

from guard.cli._common import add_json, add_out, emit
from guard.errors import GuardError


def _study(args: argparse.Namespace) -> int:
    from guard.progress import Progress
    from guard.studies.safecommit_agentdojo import format_study, safecommit_replay_study

    if args.permutations < 1:
        raise GuardError(f"--permutations must be >= 1, got {args.permutations}")
    if args.shift:
        return _shift(args)
    if args.probe_answers != "none" or args.folds is not None:
        raise GuardError("--probe-answers and --folds are options of --shift")
    bars: dict[int, Progress] = {}

    def tick(done: int, total: int) -> None:
        bar = bars.setdefault(total, Progress(total, f"{args.model}: episodes replayed", enabled=not args.json))
        bar.update(done)
        if done == total:
            bar.close()

    result = safecommit_replay_study(
        args.model, tuple(args.alpha or (0.05, 0.10)), permutations=args.permutations, seed=args.seed, progress=tick
    )
    return emit(result, args.json, format_study)


def _shift(args: argparse.Namespace) -> int:
    """``safecommit study --shift``: the score alone beside score + SafeCommit under the shift report's rows."""
    from guard.studies.composed_shift import composed_shift_study, format_composed

    folds = tuple(args.folds or (5, 2))
    if min(folds) < 1:
        raise GuardError(f"--folds must be >= 1, got {min(folds)}")
    answers, name = None, ""
    if args.probe_answers == "agentdojo":
        from guard.adapters._agentdojo_probes import environment_answers
        from guard.calibration.kappa import calibration_episodes

        answers, name = environment_answers(calibration_episodes(args.model)), "AgentDojo's environment"
    result = composed_shift_study(
        args.model,
        tuple(args.alpha or (0.05, 0.10)),
        permutations=args.permutations,
        seed=args.seed,
        folds=folds,
        answers=answers,
        answers_name=name,
        progress=not args.json,
    )
    return emit(result, args.json, format_composed)


def _calibrate(args: argparse.Namespace) -> int:
    from guard.calibration.kappa import Gate, calibrate_kappa
    from guard.calibration.kappa_cli import summary
    from guard.cli._common import check_output

    if args.policy is not None or args.episodes is not None or args.labels is not None:
        return _calibrate_own(args)
    if args.alpha is None:
        args.parser.error("the following arguments are required: --alpha (or --policy and --episodes)")
    if args.out is not None:
        check_output(args.out, [args.gate_artifact])
    command = "carbguard " + " ".join(args.argv)
    gate = Gate.from_artifact(args.gate_artifact) if args.gate_artifact else None
    body = calibrate_kappa(
        args.model, args.alpha, exclude_models=args.exclude_model, out=args.out, command=command, gate=gate
    )
    print(json.dumps(body, indent=1, sort_keys=True) if args.json else summary(body))
    return 0


def _calibrate_own(args: argparse.Namespace) -> int:
    """``--policy P --episodes E [--labels L]``: κ on the deployment's own episodes (guard.calibration.kappa_own)."""
    from guard.calibration.kappa import Gate
    from guard.calibration.kappa_own import calibrate_own_kappa, own_summary
    from guard.cli._common import check_output

    if args.policy is None or args.episodes is None:
        raise GuardError(
            "--policy and --episodes go together (--labels needs both): give both, or neither for AgentDojo"
        )
    if args.model != "all" or args.exclude_model:
        raise GuardError("--model and --exclude-model select embedded AgentDojo episodes, not --episodes")
    inputs = [args.policy, args.episodes, args.labels, args.gate_artifact]
    if args.out is not None:
        check_output(args.out, inputs)
    gate = Gate.from_artifact(args.gate_artifact) if args.gate_artifact else None
    body = calibrate_own_kappa(
        args.policy,
        args.episodes,
        args.labels,
        alpha=args.alpha,
        out=args.out,
        command=shlex.join(["carbguard", *args.argv]),
        gate=gate,
    )
    print(json.dumps(body, indent=1, sort_keys=True) if args.json else own_summary(body))
    if args.out is not None and not args.json:
        print(kappa_hint(args.out, args.policy, body["alpha"]))
    return 0


def kappa_hint(out: str | Path, policy: str | Path, alpha: float) -> str:
    """Where the κ artifact was written and the policy line that names it, its path relative to the policy's
    folder (the policy reads paths relative to itself, not to the working directory)."""
    target, folder = Path(out).resolve(), Path(policy).resolve().parent
    relative = Path(os.path.relpath(target, folder)).as_posix()
    use = f"safecommit: {{alpha: {alpha}, kappa: {{artifact: {relative}}}}}"
    return f"wrote {out}; point {policy} at it (the path is relative to the policy file's folder): {use}"


def register(sub: Any) -> None:
    """``carbguard safecommit study|calibrate``."""
    sc = sub.add_parser("safecommit", help="SafeCommit: AgentDojo replay study, kappa calibration (AgentDojo or yours)")
    cmds = sc.add_subparsers(dest="safecommit_command", required=True)
    study = cmds.add_parser(
        "study",
        help="replay counts and declared-ledger loss of G-CARB with and without SafeCommit",
        description="SafeCommit on the embedded AgentDojo episodes: replay, kappa per permutation, CARB on top.",
    )
    study.add_argument("--model", default="all", help="embedded model name, or 'all' (default)")
    study.add_argument("--alpha", type=float, action="append", help="risk level (repeatable; default .05 and .10)")
    study.add_argument("--permutations", type=int, default=200, help="random calibration/test splits (default 200)")
    study.add_argument("--seed", type=int, default=0, help="seed of the splits (default 0)")
    study.add_argument(
        "--shift",
        action="store_true",
        help="the shift report's rows (as is, every rewording style, leave-one-goal-out, leave-one-model-out) for "
        "the score alone and for score + SafeCommit, with what stopped each test episode",
    )
    study.add_argument(
        "--probe-answers",
        choices=("none", "agentdojo"),
        default="none",
        help="with --shift: also decide again after running each probe in AgentDojo's environment (agentdojo; "
        "needs the agentdojo extra), or only count a probe as a stop, as log replay must (none, default)",
    )
    study.add_argument(
        "--folds",
        type=int,
        action="append",
        help="with --shift: goal folds of a leave-one-goal-out row (repeatable; default 5 and 2: calibrating on half "
        "the goals)",
    )
    add_json(study)
    study.set_defaults(func=_study)
    cal = cmds.add_parser(
        "calibrate",
        help="kappa from ledger-labelled cases (AgentDojo, or your --policy/--episodes); writes a kappa artifact",
        description="Kappa from the ledger-labelled cases of the embedded AgentDojo episodes or, with --policy and "
        "--episodes, of your own recorded episodes, labelled by the policy's ledger: rules and --labels.",
    )
    cal.add_argument(
        "--alpha",
        type=float,
        help="SafeCommit's miss level in (0, 1); required for AgentDojo, default the policy's safecommit.alpha",
    )
    cal.add_argument("--policy", help="your policy file (with a safecommit: section): calibrate on --episodes")
    cal.add_argument("--episodes", help="your carbguard-episodes/1 file (recorded shadow sessions)")
    cal.add_argument("--labels", help="labels file (JSON lines) that add to or override the ledger: rules")
    cal.add_argument("--model", default="all", help="embedded model name, or 'all' (default)")
    cal.add_argument("--exclude-model", action="append", default=[], help="leave a model out (repeatable)")
    cal.add_argument(
        "--gate-artifact",
        help="CARB artifact in front of SafeCommit: calibrate kappa only on proposals with G-CARB score <= its "
        "threshold",
    )
    add_out(cal, "kappa artifact to write (default: print only)")
    add_json(cal, "the artifact body")
    cal.set_defaults(func=_calibrate, parser=cal)
