"""``carbguard calibrate`` and ``carbguard evaluate``: CARB on a corpus of episodes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from guard.cli._common import SCOPE, add_json, add_out
from guard.errors import GuardError
from guard.policy import SelectorName


def _corpus(args: argparse.Namespace) -> Any:
    from guard.calibration.jobs import load_corpus

    if args.episodes is not None or args.policy:
        if getattr(args, "exclude_model", None):
            raise GuardError("--exclude-model applies to AgentDojo corpora, not to --episodes")
        return _episodes_corpus(args)
    if args.labels is not None:
        raise GuardError("--labels needs --policy and --episodes")
    return load_corpus(args.runs, args.corpus, progress=True, exclude_models=args.exclude_model)


def _episodes_corpus(args: argparse.Namespace) -> Any:
    """A deployment corpus from ``--policy P [--policy P2 ...] --episodes E [--labels L]``."""
    from guard.calibration.jobs import load_episodes_corpus
    from guard.policy import load_policy

    if not args.policy or args.episodes is None:
        raise GuardError("--policy and --episodes go together: give both (or neither, for AgentDojo corpora)")
    if args.runs is not None or args.corpus is not None:
        raise GuardError("--episodes cannot be combined with --runs or --corpus")
    return load_episodes_corpus([load_policy(p) for p in args.policy], args.episodes, args.labels)


#: α values and attack shares s of :func:`alpha_table`.
TABLE_ALPHAS = (0.01, 0.05, 0.10, 0.20)
TABLE_SHARES = (1.0, 0.5, 0.2, 0.1, 0.05)


def alpha_table(alphas: Sequence[float] = TABLE_ALPHAS, shares: Sequence[float] = TABLE_SHARES) -> str:
    """α against the bound it implies per attacked episode, ``α / s``, for attack shares ``s`` (a Markdown table).

    α bounds the expected declared-ledger loss per episode over ALL traffic.  If a share ``s`` of
    episodes is attacked and only attacked episodes can be harmed, the expected loss per attacked
    episode is at most ``α / s``; at ``α / s >= 1`` there is no bound at all.
    """
    head = "| α (all traffic) | " + " | ".join(f"s = {s:g}" for s in shares) + " |"
    rule = "|---|" + "---|" * len(shares)
    rows = [
        f"| {a:g} | " + " | ".join(f"{a / s:.2f}" if a / s < 1 else "none (≥ 1)" for s in shares) + " |" for a in alphas
    ]
    return "\n".join([head, rule, *rows])


def _calibrate(args: argparse.Namespace) -> int:
    from guard.artifact import artifact_text, risk_summary
    from guard.calibration import crc
    from guard.calibration.jobs import calibrate
    from guard.cli._common import check_output, write_output

    if args.alpha_table:
        print(alpha_table())
        return 0
    missing = [flag for flag, value in (("--alpha", args.alpha), ("--out", args.out)) if value is None]
    if missing:
        args.parser.error(f"the following arguments are required: {', '.join(missing)}")
    crc.alpha_fraction(args.alpha)
    inputs = [*(args.policy or []), args.episodes, args.labels, args.runs]
    out = check_output(args.out, inputs, "--out")
    corpus = _corpus(args)
    if corpus.policy_of is not None:
        from guard.calibration.jobs import check_alpha_feasible

        check_alpha_feasible(corpus, [args.alpha])
    if args.fit_scorer and corpus.policy_of is not None:
        raise GuardError("--fit-scorer works on AgentDojo corpora (--runs, --corpus) only, not on --episodes")
    if args.fit_scorer:
        from guard.calibration.fit_jobs import calibrate_fitted

        if args.selector not in (None, "gcarb"):
            raise GuardError("--fit-scorer fits the G-CARB scorer; drop --selector or use --selector gcarb")

        body = calibrate_fitted(
            corpus,
            alpha=args.alpha,
            rule=args.rule,
            delta=args.delta,
            seed=args.seed,
            dev_fraction=args.dev_fraction,
            command=_recorded(args.argv),
            workers=args.workers,
        )
        write_output(out, artifact_text(body), inputs, "--out")
        print(
            f"wrote {out}: alpha={body['alpha']} n={body['n']} (+{body['fit']['n_dev']} development episodes) "
            f"threshold={body['threshold']} {risk_summary(body)}"
        )
        _warn_small_n(args, body)
        return 0
    body = calibrate(
        corpus,
        alpha=args.alpha,
        selector=args.selector or _policy_selector(corpus),
        rule=args.rule,
        delta=args.delta,
        command=_recorded(args.argv),
        progress=True,
        workers=args.workers,
        dask_scheduler=args.dask_scheduler,
    )
    write_output(out, artifact_text(body), inputs, "--out")
    print(f"wrote {out}: alpha={body['alpha']} n={body['n']} threshold={body['threshold']} {risk_summary(body)}")
    _warn_small_n(args, body)
    return 0


def _warn_small_n(args: argparse.Namespace, body: dict[str, Any]) -> None:
    """At few calibration episodes, say on stderr how far R(λ̂) spreads over calibration draws."""
    from guard.calibration import ltt

    warning = ltt.small_n_warning(args.rule, int(body["n"]), args.alpha, args.delta)
    if warning is not None:
        print(warning, file=sys.stderr)


def _evaluate(args: argparse.Namespace) -> int:
    from guard.calibration import crc
    from guard.calibration.evaluate import DEFAULT_ALPHAS, format_summary
    from guard.calibration.jobs import EACH, evaluate, load_corpus

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

            corpus = _corpus(args)
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
    corpus = _corpus(args) if own else load_corpus(args.runs, name, progress=not args.json)
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
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        help="your deployment's policy file (with --episodes; repeatable when episodes name their policy)",
    )
    parser.add_argument("--episodes", help="a carbguard-episodes/1 JSON-lines file (see `carbguard episodes`)")
    parser.add_argument(
        "--labels", help="a labels file (JSON lines) that adds to or overrides the policy's ledger rules"
    )


def _policy_selector(corpus: Any) -> SelectorName:
    """The selector to calibrate when ``--selector`` is not given: the policy's own (``--policy``), else G-CARB."""
    if corpus.policy_of is None:
        return "gcarb"
    names = sorted({policy.selector.name for policy in corpus.policy_of.values()})
    if len(names) != 1:
        raise GuardError(f"the policies name different selectors ({', '.join(names)}); pass --selector")
    name: SelectorName = names[0]
    return name


def _add_calibrate(sub: Any) -> None:
    cal = sub.add_parser("calibrate", help="calibrate the threshold (CARB) and write an artifact", epilog=SCOPE)
    _add_corpus_args(cal)
    cal.add_argument(
        "--alpha",
        type=float,
        help="risk level in (0, 1), required: it bounds the expected declared-ledger loss per episode over ALL "
        "traffic, not a per-attack rate. If a share s of episodes is attacked and only those can be harmed, the "
        "bound per attacked episode is alpha/s (see --alpha-table). --rule carb holds in expectation over "
        "calibration draws; use --rule ltt where one bad calibration draw matters",
    )
    cal.add_argument(
        "--alpha-table", action="store_true", help="print alpha against the bound alpha/s per attacked episode"
    )
    cal.add_argument(
        "--selector",
        default=None,
        choices=["gcarb", "full_prefix", "fixed_window", "ledger_current", "random_equal_size"],
        help="default: the policy's own selector with --policy, else gcarb",
    )
    cal.add_argument(
        "--rule",
        default="carb",
        choices=["carb", "ltt"],
        help="carb: E[loss] <= alpha in expectation (CRC); ltt: P(R(lambda_hat) <= alpha) >= 1 - delta",
    )
    cal.add_argument("--delta", type=float, default=0.1, help="LTT: P(risk > alpha) <= delta")
    add_out(cal, "artifact file to write (required)")
    cal.add_argument("--exclude-model", action="append", default=[], help="leave a model's runs out (repeatable)")
    cal.add_argument(
        "--fit-scorer",
        action="store_true",
        help="fit the scorer weights on a seeded development split, calibrate on the rest; "
        "the weights go into the artifact",
    )
    cal.add_argument("--dev-fraction", type=float, default=0.30, help="--fit-scorer: development share (default .30)")
    cal.add_argument("--seed", type=int, default=0, help="--fit-scorer: seed of the development split")
    _add_scale_args(cal)
    cal.set_defaults(func=_calibrate, parser=cal)


def _add_evaluate(sub: Any) -> None:
    ev = sub.add_parser(
        "evaluate",
        help="the replay protocol: permutations, 50/50 splits, all methods "
        "(default: each embedded model, then all pooled)",
        epilog=SCOPE,
    )
    _add_corpus_args(ev)
    ev.add_argument("--alpha", type=float, action="append", help="repeatable; default .01 .025 .05 .10 .15 .20")
    ev.add_argument(
        "--fit-scorer",
        action="store_true",
        help="also the three-way protocol: weights fitted on 30%% development episodes, "
        "lambda_hat on 35%% calibration, metrics on 35%% test; printed next to the frozen weights",
    )
    ev.add_argument("--plot-fit", help="with --fit-scorer: write the before/after frontier (every corpus) as PNG")
    ev.add_argument(
        "--ablation", action="store_true", help="with the three-way protocol: refit without each new feature"
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
    _add_scale_args(ev)
    ev.set_defaults(func=_evaluate)


def register(sub: Any) -> None:
    """``carbguard calibrate`` and ``carbguard evaluate``."""
    _add_calibrate(sub)
    _add_evaluate(sub)
