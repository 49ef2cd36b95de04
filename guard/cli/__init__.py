"""The ``carbguard`` command line.  Every error is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from guard.cli import _more as cli_more
from guard.errors import GuardError

SCOPE = (
    "Guarantee: for exchangeable episodes and a frozen pipeline, the expected declared-ledger loss of a new "
    "episode is at most alpha (in expectation over calibration and the new episode). It covers the declared "
    "ledger only. Replay counts a probe as a stop; online, probes add records and replay equivalence needs "
    "traces collected with probes."
)


def _policy_validate(args: argparse.Namespace) -> int:
    from guard.policy import load_policy

    policy = load_policy(args.file)
    print(f"OK: policy {policy.name!r} with {len(policy.tools)} tools is valid")
    return 0


def _policy_schema(args: argparse.Namespace) -> int:
    from guard.policy import policy_schema_text

    print(policy_schema_text())
    return 0


def _audit_verify(args: argparse.Namespace) -> int:
    from guard.audit import verify

    report = verify(args.file)
    print(report.describe())
    return 0 if report.ok else 1


def _corpus(args: argparse.Namespace) -> Any:
    from guard.calibration.jobs import load_corpus

    return load_corpus(args.runs, args.corpus, progress=True, exclude_models=args.exclude_model)


def _calibrate(args: argparse.Namespace) -> int:
    from guard.artifact import write_artifact
    from guard.calibration import crc
    from guard.calibration.jobs import calibrate

    crc.alpha_fraction(args.alpha)
    out = Path(args.out)
    if out.exists() and out.is_dir():
        raise GuardError(f"--out {out} is a folder; give a file path")
    corpus = _corpus(args)
    body = calibrate(
        corpus, alpha=args.alpha, selector=args.selector, rule=args.rule, delta=args.delta,
        command=_recorded(args.argv), progress=True, workers=args.workers, dask_scheduler=args.dask_scheduler,
    )
    write_artifact(body, out)
    print(f"wrote {out}: alpha={body['alpha']} n={body['n']} threshold={body['threshold']} "
          f"calibration risk (corrected)={body['calibration_risk']:.4f}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from guard.calibration import crc
    from guard.calibration.evaluate import DEFAULT_ALPHAS, format_summary
    from guard.calibration.jobs import EACH, evaluate, load_corpus

    alphas = tuple(args.alpha) if args.alpha else DEFAULT_ALPHAS
    for alpha in alphas:
        crc.alpha_fraction(alpha)
    if args.permutations < 1:
        raise GuardError(f"--permutations must be >= 1, got {args.permutations}")
    names = [args.corpus] if (args.runs or args.corpus) else list(EACH)
    results = []
    for name in names:
        corpus = load_corpus(args.runs, name, progress=not args.json)
        result = evaluate(
            corpus, alphas=alphas, permutations=args.permutations, seed=args.seed, progress=not args.json,
            workers=args.workers, dask_scheduler=args.dask_scheduler,
        )
        results.append(result)
        if not args.json:
            _print_evaluation(result)
    if args.plot:
        from guard.report.plots import frontier_plot

        frontier_plot(results[-1], args.plot)
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else {"corpora": results}, indent=1))
    elif len(results) > 1:
        print("\nSummary (G-CARB = carb_gcarb; hfree ratio = harm-free success / no-guard harm-free success)")
        print(format_summary(results))
    if not args.json:
        print(SCOPE)
    return 0


def _print_evaluation(result: dict[str, Any]) -> None:
    from guard.calibration.evaluate import format_rows

    print(f"corpus {result['corpus']}: {result['n_episodes']} episodes "
          f"({result['n_dropped']} dropped, {result['n_excluded_injection_goal_runs']} injection-goal runs excluded), "
          f"{result['permutations']} permutations, 50/50 splits")
    print(format_rows(result["results"]))
    print(f"scoring {result['seconds']['scoring']:.1f}s, calibration {result['seconds']['calibration']:.1f}s\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="carbguard", description=__doc__, epilog=SCOPE)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_policy(sub)
    _add_audit(sub)
    _add_calibrate(sub)
    _add_evaluate(sub)
    cli_more.add_report(sub)
    cli_more.add_bench(sub)
    cli_more.add_ledger_check(sub)
    cli_more.add_safecommit(sub)
    cli_more.add_agentdojo(sub)
    return parser


def _add_policy(sub: Any) -> None:
    policy = sub.add_parser("policy", help="validate a policy file or print its JSON Schema").add_subparsers(
        dest="action", required=True
    )
    validate = policy.add_parser("validate", help="report every error of a policy file with its location")
    validate.add_argument("file")
    validate.set_defaults(func=_policy_validate)
    policy.add_parser("schema", help="print the JSON Schema of policy files").set_defaults(func=_policy_schema)


def _add_audit(sub: Any) -> None:
    audit = sub.add_parser("audit", help="audit log tools").add_subparsers(dest="action", required=True)
    verify = audit.add_parser("verify", help="check the hash chain; name the first edited/removed line")
    verify.add_argument("file")
    verify.set_defaults(func=_audit_verify)


def _recorded(argv: Sequence[str]) -> list[str]:
    """The command to record in an artifact: scale-out options do not change it, so they are dropped."""
    out: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token in ("--workers", "--dask-scheduler"):
            skip = True
            continue
        if not token.startswith(("--workers=", "--dask-scheduler=")):
            out.append(token)
    return out


def _add_scale_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=1, help="score episodes in N local processes")
    parser.add_argument("--dask-scheduler", help="score on a running dask.distributed scheduler (extra [dask])")


def _add_corpus_args(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--runs", help="a folder in AgentDojo's runs/ layout (one model or several)")
    source.add_argument("--corpus", default=None, help="embedded corpus: a model name or 'all' (pooled)")


def _add_calibrate(sub: Any) -> None:
    cal = sub.add_parser("calibrate", help="calibrate the threshold (CARB) and write an artifact", epilog=SCOPE)
    _add_corpus_args(cal)
    cal.add_argument("--alpha", type=float, required=True, help="risk level in (0, 1)")
    cal.add_argument("--selector", default="gcarb",
                     choices=["gcarb", "full_prefix", "fixed_window", "ledger_current", "random_equal_size"])
    cal.add_argument("--rule", default="carb", choices=["carb", "ltt"], help="carb (in expectation) or ltt")
    cal.add_argument("--delta", type=float, default=0.1, help="LTT: P(risk > alpha) <= delta")
    cal.add_argument("--out", required=True, help="artifact file to write")
    cal.add_argument("--exclude-model", action="append", default=[], help="leave a model's runs out (repeatable)")
    _add_scale_args(cal)
    cal.set_defaults(func=_calibrate)


def _add_evaluate(sub: Any) -> None:
    ev = sub.add_parser(
        "evaluate",
        help="the replay protocol: permutations, 50/50 splits, all methods "
        "(default: each embedded model, then all pooled)",
        epilog=SCOPE,
    )
    _add_corpus_args(ev)
    ev.add_argument("--alpha", type=float, action="append", help="repeatable; default .025 .05 .10 .15 .20")
    ev.add_argument("--permutations", type=int, default=200)
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ev.add_argument("--plot", help="write the risk–utility frontier as PNG")
    _add_scale_args(ev)
    ev.set_defaults(func=_evaluate)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(args_list)
    args.argv = args_list
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except GuardError as exc:
        print(f"carbguard: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("carbguard: interrupted", file=sys.stderr)
        return 130
