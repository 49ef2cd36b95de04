"""``carbguard ceiling``: the best harm-free success any (monotone) function of the features reaches."""

from __future__ import annotations

import argparse
import json
from typing import Any

from guard.cli._common import SCOPE
from guard.errors import GuardError


def _ceiling(args: argparse.Namespace) -> int:
    from guard.calibration.ceiling_jobs import ceiling_report, columns_of, format_report
    from guard.calibration.evaluate import DEFAULT_ALPHAS
    from guard.calibration.jobs import EACH, load_corpus, score_selectors

    if args.permutations < 0:
        raise GuardError(f"--permutations must be >= 0, got {args.permutations}")
    alphas = tuple(args.alpha) if args.alpha else DEFAULT_ALPHAS[:3]
    names = columns_of(_features(args))
    reports = []
    for corpus_name in [args.corpus] if (args.runs or args.corpus) else list(EACH):
        corpus = load_corpus(args.runs, corpus_name, progress=not args.json)
        scored, _ = score_selectors(corpus.episodes, ["gcarb"], progress=not args.json, workers=args.workers)
        report = ceiling_report(
            corpus,
            scored["gcarb"],
            alphas=alphas,
            features=names,
            permutations=args.permutations,
            seed=args.seed,
            tools=not args.no_tool_identity,
        )
        reports.append(report)
        if not args.json:
            tools = " + tool identity" if report["tool_identity"] else ""
            print(
                f"ceiling of {len(names)} features{tools} on {corpus.name} ({scored['gcarb'].n} episodes): the best "
                "harm-free success ratio to no guard that any monotone function / any function of them reaches, "
                f"in-sample; fitted 3-way = `evaluate --fit-scorer` on the same evidence ({args.permutations} "
                "permutations)"
            )
            print(format_report(report) + "\n")
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else {"corpora": reports}, indent=1))
    else:
        print(SCOPE)
    return 0


def _features(args: argparse.Namespace) -> list[str] | None:
    from guard.features import FEATURE_GROUPS, FEATURES

    if args.features and args.without:
        raise GuardError("--features and --without are alternatives; give one")
    if args.features:
        return [f.strip() for f in args.features.split(",") if f.strip()]
    if args.without:
        drop: set[str] = set()
        for name in (f.strip() for f in args.without.split(",") if f.strip()):
            if name not in FEATURE_GROUPS and name not in FEATURES:
                known = ", ".join([*FEATURE_GROUPS, *FEATURES])
                raise GuardError(f"--without: unknown feature or group {name!r}; known: {known}")
            drop |= set(FEATURE_GROUPS.get(name, (name,)))
        return [f for f in FEATURES if f not in drop]
    return None


def register(sub: Any) -> None:
    """``carbguard ceiling``."""
    ce = sub.add_parser(
        "ceiling",
        help="exact best harm-free success of any monotone / any function of the scorer features",
        epilog=SCOPE,
    )
    source = ce.add_mutually_exclusive_group()
    source.add_argument("--runs", help="a folder in AgentDojo's runs/ layout")
    source.add_argument(
        "--corpus", default=None, help="embedded corpus: a model name or 'all' (pooled); default: each model, then all"
    )
    ce.add_argument("--alpha", type=float, action="append", help="repeatable; default .01 .025 .05")
    ce.add_argument("--features", help="comma-separated feature names to use (default: every scorer feature)")
    ce.add_argument("--without", help="comma-separated feature names or groups (prefix, roles, graded) to leave out")
    ce.add_argument("--no-tool-identity", action="store_true", help="leave the tool identity indicators out")
    ce.add_argument(
        "--permutations",
        type=int,
        default=200,
        help="permutations of the fitted three-way row printed beside (0: ceilings only)",
    )
    ce.add_argument("--seed", type=int, default=0, help="seed of the three-way permutations (default 0)")
    ce.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ce.add_argument("--workers", type=int, default=1, help="score episodes in N local processes")
    ce.set_defaults(func=_ceiling)
