"""``carbguard calibrate``: CARB on a corpus of episodes, written as an artifact."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from guard.cli._common import SCOPE, add_out
from guard.cli._corpus_args import (
    add_corpus_args,
    add_rule_args,
    add_scale_args,
    corpus_from_args,
    group_alpha,
    group_by,
    no_groups,
    recorded_command,
)
from guard.errors import GuardError
from guard.policy import SelectorName

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
    from guard.calibration.group_crc import check_group_by
    from guard.calibration.jobs import calibrate
    from guard.cli._common import check_output, write_output

    if args.alpha_table:
        print(alpha_table())
        return 0
    missing = [flag for flag, value in (("--alpha", args.alpha), ("--out", args.out)) if value is None]
    if missing:
        args.parser.error(f"the following arguments are required: {', '.join(missing)}")
    crc.alpha_fraction(args.alpha)
    level = group_alpha(args)  # a bad --group-alpha fails before any corpus is read
    inputs = [*(args.policy or []), args.episodes, args.labels, args.runs]
    out = check_output(args.out, inputs, "--out")
    own = args.episodes is not None or bool(args.policy)
    key = group_by(args, agentdojo=not own)
    if key is not None and args.group_by is None and (args.rule != "carb" or args.fit_scorer):
        key = None  # the default grouping is for the CRC rule of the frozen scorer only
    if key is not None:
        check_group_by(key, agentdojo=not own, rule=args.rule, fit_scorer=args.fit_scorer)
    no_groups(args, key)
    corpus = corpus_from_args(args)
    key = _feasible_key(corpus, key, args.alpha, level, explicit=args.group_by is not None)
    from guard.calibration.jobs import check_alpha_feasible

    check_alpha_feasible(corpus, [args.alpha])  # before any scoring: a too-small α fails in a second, not minutes
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
            command=recorded_command(args.argv),
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
        command=recorded_command(args.argv),
        progress=True,
        workers=args.workers,
        dask_scheduler=args.dask_scheduler,
        group_by=key,
        slack=args.utility_slack,
        group_alpha=level,
    )
    write_output(out, artifact_text(body), inputs, "--out")
    print(f"wrote {out}: alpha={body['alpha']} n={body['n']} threshold={body['threshold']} {risk_summary(body)}")
    if key is not None:
        print(f"rule={body['rule']} group_by={body['group_by']} G={body['groups']} (docs/calibrate.md: the group rule)")
        _print_statements(body)
    if "threshold_before_slack" in body:
        print(f"utility slack {args.utility_slack}: threshold {body['threshold_before_slack']} -> {body['threshold']}")
    _warn_small_n(args, body)
    return 0


def _feasible_key(corpus: Any, key: str | None, alpha: float, level: Any, *, explicit: bool) -> str | None:
    """``key``, or None (plain CRC) when the default grouping leaves no group rule (``auto``: G < 2; ``--group-alpha
    alpha``: α under the floor 1/(G+1); said on stderr); an explicit ``--group-by`` fails in the calibration."""
    from guard.calibration.group_crc import episode_group_keys
    from guard.calibration.two_level import AUTO, group_rule_applies

    if key is None or explicit:
        return key
    groups = len(set(episode_group_keys(corpus.episodes, key, corpus.policy_of, corpus.tags_of)))
    if group_rule_applies(alpha, groups, level):
        return key
    why = "the two-level rule needs G >= 2" if level == AUTO else "alpha is under the group rule's floor 1/(G+1)"
    print(f"note: alpha={alpha}, G={groups}: {why}; plain CRC", file=sys.stderr)
    return None


def _print_statements(body: dict[str, Any]) -> None:
    """The two-level rule's two statements on stderr, in the artifact's exact words, and which rule bound λ̂."""
    from guard.artifact import two_level_statements
    from guard.calibration.two_level import TWO_LEVEL_RULE, format_level

    if body["rule"] != TWO_LEVEL_RULE:
        return
    exact = Fraction(body["group_alpha_exact"])
    episode, group = two_level_statements(repr(body["alpha"]), format_level(exact), int(body["groups"]))
    print(f"episode statement: {episode}", file=sys.stderr)
    print(f"group statement: {group}", file=sys.stderr)
    print(
        f"lambda_hat = min(CRC over episodes at alpha: {body['threshold_episode_rule']}, group rule at alpha_g: "
        f"{body['threshold_group_rule']}); bound by {body['bound_by']}",
        file=sys.stderr,
    )


def _warn_small_n(args: argparse.Namespace, body: dict[str, Any]) -> None:
    """At few calibration episodes, say on stderr how far R(λ̂) spreads over calibration draws."""
    from guard.calibration import ltt

    warning = ltt.small_n_warning(args.rule, int(body["n"]), args.alpha, args.delta)
    if warning is not None and "group_by" not in body:  # the group rule's units are groups
        print(warning, file=sys.stderr)


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
    add_corpus_args(cal)
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
    add_rule_args(cal)
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
    add_scale_args(cal)
    cal.set_defaults(func=_calibrate, parser=cal)


def register(sub: Any) -> None:
    """``carbguard calibrate``."""
    _add_calibrate(sub)
