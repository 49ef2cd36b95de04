"""``carbguard evaluate``: the replay protocol, the three-way fit, transfer, fixed artifacts and the shift report."""

from __future__ import annotations

import argparse
import json
from typing import Any

from guard.cli._common import SCOPE, add_json, ranged
from guard.cli._corpus_args import (
    add_corpus_args,
    add_rule_args,
    add_scale_args,
    corpus_from_args,
    group_alpha,
    group_by,
    no_groups,
)
from guard.errors import GuardError


def _evaluate(args: argparse.Namespace) -> int:
    from guard.calibration import crc
    from guard.calibration.evaluate import DEFAULT_ALPHAS, format_summary
    from guard.calibration.jobs import EACH, evaluate, load_corpus

    level = group_alpha(args)  # a bad --group-alpha fails before any corpus is read
    own = args.episodes is not None or bool(args.policy) or args.labels is not None
    no_groups(args, group_by(args, agentdojo=not own))
    if args.shift:
        return _evaluate_shift(args, level)
    if args.folds != 5:
        raise GuardError("--folds is an option of --shift")
    alphas = tuple(args.alpha) if args.alpha else DEFAULT_ALPHAS
    for alpha in alphas:
        crc.alpha_fraction(alpha)
    if args.permutations < 1:
        raise GuardError(f"--permutations must be >= 1, got {args.permutations}")
    if (args.ablation or args.plot_fit) and not args.fit_scorer:
        raise GuardError("--ablation and --plot-fit need --fit-scorer")
    own = args.episodes is not None or bool(args.policy) or args.labels is not None
    if own and (args.fit_scorer or args.cross_model):
        raise GuardError("--fit-scorer and --cross-model work on AgentDojo corpora only, not --episodes")
    names = [args.corpus] if (args.runs or args.corpus or args.episodes or args.policy) else list(EACH)
    if args.artifact or args.cross_model:
        return _evaluate_fixed_or_transfer(args, names, alphas)
    results = []
    for name in names:
        if args.episodes is not None or args.policy or args.labels is not None:
            from guard.calibration.jobs import check_alpha_feasible

            corpus = corpus_from_args(args)
            check_alpha_feasible(corpus, alphas, split=True)
        else:
            corpus = load_corpus(args.runs, name, progress=not args.json)
        result = evaluate(
            corpus,
            alphas=alphas,
            permutations=args.permutations,
            seed=args.seed,
            progress=not args.json,
            workers=args.workers,
            dask_scheduler=args.dask_scheduler,
            also=_fitted_protocol(args, corpus, alphas),
            group_by=group_by(args, agentdojo=corpus.policy_of is None),
            slack=args.utility_slack,
            group_alpha=level,
        )
        results.append(result)
        if not args.json:
            _print_evaluation(result)
            _print_fitted(result, args.ablation)
    if args.plot:
        from guard.report.plots import frontier_plot

        frontier_plot(results[-1], args.plot)
    if args.plot_fit:
        from guard.report.plots import fitted_frontier_plot

        fitted_frontier_plot(results, args.plot_fit)
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else {"corpora": results}, indent=1))
    elif len(results) > 1:
        print("\nSummary (G-CARB = carb_gcarb; hfree ratio = harm-free success / no-guard harm-free success)")
        print(format_summary(results))
    if not args.json:
        print(SCOPE)
    return 0


def _evaluate_shift(args: argparse.Namespace, level: Any) -> int:
    """``--shift``: the shift report on each embedded model and pooled, or on ``--corpus``/``--runs``."""
    from guard.report.plots import shift_plot
    from guard.studies.shift import SHIFT_ALPHAS, shift_reports

    if args.episodes is not None or args.policy or args.labels or args.artifact or args.cross_model or args.fit_scorer:
        raise GuardError("--shift works on AgentDojo corpora (--corpus, --runs) and takes no other evaluation")
    results = shift_reports(
        args.runs,
        args.corpus,
        alphas=tuple(args.alpha) if args.alpha else SHIFT_ALPHAS,
        permutations=args.permutations,
        seed=args.seed,
        group_by=group_by(args, agentdojo=True),
        slack=args.utility_slack,
        group_alpha=level,
        ablation=args.ablation,
        workers=args.workers,
        progress=not args.json,
        show=None if args.json else print,
        folds=args.folds,
    )
    if args.plot:
        shift_plot(results, args.plot)
    print(json.dumps(results[0] if len(results) == 1 else {"corpora": results}, indent=1) if args.json else SCOPE)
    return 0


def _fitted_protocol(args: argparse.Namespace, corpus: Any, alphas: tuple[float, ...]) -> Any:
    """With ``--fit-scorer``: the three-way protocol on the G-CARB scores of the two-way run."""
    if not args.fit_scorer:
        return None
    from guard.calibration.fit_jobs import fitted_evaluation

    return lambda scored: fitted_evaluation(
        corpus,
        scored["gcarb"],
        alphas=alphas,
        permutations=args.permutations,
        seed=args.seed,
        ablation=args.ablation,
    )


def _print_fitted(result: dict[str, Any], ablation: bool) -> None:
    from guard.calibration.fit_jobs import format_ablation, format_side_by_side

    if "fitted" not in result:
        return
    fitted = result["fitted"]
    split = "/".join(f"{round(100 * f)}" for f in fitted["split"])
    print(
        f"three-way protocol ({split} development/calibration/test): frozen vs fitted weights "
        f"(ratio = harm-free success / no-guard's; floor = share of permutations with lambda_hat = -inf)"
    )
    print(format_side_by_side(result))
    features = {k: v for k, v in fitted["weights_mean"].items() if not k.startswith("tool:")}
    tools = sorted(((v, k[5:]) for k, v in fitted["weights_mean"].items() if k.startswith("tool:") and v), reverse=True)
    print(f"fitted weights (mean over permutations): {', '.join(f'{k}={v:.3f}' for k, v in features.items())}")
    if tools:
        print(f"fitted tool weights (mean, non-zero): {', '.join(f'{k}={v:.3f}' for v, k in tools)}")
    if ablation:
        print(format_ablation(result))
    print(f"fitting protocol {fitted['seconds']:.1f}s\n")


def _evaluate_fixed_or_transfer(args: argparse.Namespace, names: list[str | None], alphas: tuple[float, ...]) -> int:
    from guard.calibration.fit_jobs import artifact_evaluation, cross_model_evaluation
    from guard.calibration.jobs import load_corpus
    from guard.calibration.threeway import format_cross_model

    if args.artifact and args.cross_model:
        raise GuardError("--artifact and --cross-model are separate evaluations; give one")
    name = names[0] if len(names) == 1 else "all"
    own = args.episodes is not None or bool(args.policy) or args.labels is not None
    corpus = corpus_from_args(args) if own else load_corpus(args.runs, name, progress=not args.json)
    if args.artifact:
        out: Any = artifact_evaluation(corpus, args.artifact, workers=args.workers)
        if not args.json:
            print(", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items()))
    else:
        out = cross_model_evaluation(
            corpus, alphas=alphas, permutations=args.cross_model_permutations, seed=args.seed, workers=args.workers
        )
        if not args.json:
            print(
                f"cross-model transfer on {corpus.name}: fit and calibrate on the other models, test on the held-out "
                f"one ({args.cross_model_permutations} permutations; no exchangeability between models is assumed)"
            )
            print(format_cross_model(out))
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(SCOPE)
    return 0


def _print_evaluation(result: dict[str, Any]) -> None:
    from guard.calibration.evaluate import format_rows

    print(
        f"corpus {result['corpus']}: {result['n_episodes']} episodes "
        f"({result['n_dropped']} dropped, {result['n_excluded_injection_goal_runs']} injection-goal runs excluded), "
        f"{result['permutations']} permutations, 50/50 splits"
    )
    print(format_rows(result["results"]))
    print(f"scoring {result['seconds']['scoring']:.1f}s, calibration {result['seconds']['calibration']:.1f}s\n")


def _add_evaluate(sub: Any) -> None:
    ev = sub.add_parser(
        "evaluate",
        help="the replay protocol: permutations, 50/50 splits, all methods "
        "(default: each embedded model, then all pooled)",
        epilog=SCOPE,
    )
    add_corpus_args(ev)
    ev.add_argument("--alpha", type=float, action="append", help="repeatable; default .01 .025 .05 .10 .15 .20")
    ev.add_argument(
        "--fit-scorer",
        action="store_true",
        help="also the three-way protocol: weights fitted on 30%% development episodes, "
        "lambda_hat on 35%% calibration, metrics on 35%% test; printed next to the frozen weights",
    )
    ev.add_argument("--plot-fit", help="with --fit-scorer: write the before/after frontier (every corpus) as PNG")
    ev.add_argument(
        "--ablation",
        action="store_true",
        help="with --fit-scorer: refit without each new feature; with --shift: every row again per feature variant "
        "(each default feature out, the signatures in the score, the signature rule off; pooled corpus)",
    )
    ev.add_argument(
        "--cross-model", action="store_true", help="leave-one-model-out transfer on a multi-model corpus (default: all)"
    )
    ev.add_argument(
        "--cross-model-permutations",
        type=int,
        default=50,
        help="--cross-model: random splits per held-out model (default 50)",
    )
    ev.add_argument("--artifact", help="evaluate this fixed artifact (threshold and weights) on the corpus")
    ev.add_argument("--permutations", type=int, default=200, help="random calibration/test splits (default 200)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the splits (default 0)")
    add_json(ev)
    ev.add_argument("--plot", help="write the risk–utility frontier as PNG")
    add_scale_args(ev)
    ev.add_argument(
        "--shift",
        action="store_true",
        help="the shift report: loss and harm-free ratio at lambda_hat as is, on reworded attacks, "
        "leave-one-goal-out and leave-one-model-out (default alpha .05 .10; --plot: loss per row as PNG)",
    )
    ev.add_argument(
        "--folds",
        type=ranged(int, lambda n: n >= 1, "must be >= 1"),
        default=5,
        help="with --shift: goal folds of leave-one-goal-out (default 5; 2: calibrate on half the goals)",
    )
    add_rule_args(ev)
    ev.set_defaults(func=_evaluate)


def register(sub: Any) -> None:
    """``carbguard evaluate``."""
    _add_evaluate(sub)
