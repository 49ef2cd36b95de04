"""Options and corpus loading shared by ``carbguard calibrate`` and ``carbguard evaluate``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from guard.errors import GuardError


def corpus_from_args(args: argparse.Namespace) -> Any:
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


def recorded_command(argv: Sequence[str]) -> list[str]:
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


def add_scale_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=1, help="score episodes in N local processes")
    parser.add_argument("--dask-scheduler", help="score on a running dask.distributed scheduler (extra [dask])")


def add_corpus_args(parser: argparse.ArgumentParser) -> None:
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


def add_rule_args(parser: argparse.ArgumentParser) -> None:
    """``--group-by``, ``--group-alpha`` and ``--utility-slack``: how CARB calibrates (the same defaults in every
    command)."""
    from guard.calibration.group_crc import GROUP_BY_HELP
    from guard.calibration.slack import DEFAULT_SLACK
    from guard.calibration.two_level import AUTO, GROUP_ALPHA_HELP
    from guard.cli._common import ranged

    parser.add_argument(
        "--group-by",
        metavar="KEY",
        default=None,
        help=GROUP_BY_HELP + " Default: injection_task for AgentDojo corpora (--corpus, --runs), none for --episodes; "
        "'none' calibrates episodes (plain CRC).",
    )
    parser.add_argument("--group-alpha", metavar="{auto,alpha,VALUE}", default=AUTO, help=GROUP_ALPHA_HELP)
    parser.add_argument(
        "--utility-slack",
        type=ranged(float, lambda v: 0 <= v < 1, "a number in [0, 1)"),
        default=DEFAULT_SLACK,
        metavar="U",
        help="after calibration, lower lambda_hat while the calibration episodes keep at least 1-U of their "
        f"harm-free successes (default {DEFAULT_SLACK}; 0: off). A lower threshold never raises the ledger loss, "
        "so the guarantee is unchanged (docs/calibrate.md#utility-slack)",
    )


def group_alpha(args: argparse.Namespace) -> Any:
    """The parsed ``--group-alpha`` (``auto``, ``alpha`` or a Fraction); CalibrationError naming a bad value."""
    from guard.calibration.two_level import parse_group_alpha

    return parse_group_alpha(args.group_alpha)


def no_groups(args: argparse.Namespace, key: str | None) -> None:
    """A --group-alpha other than auto where no group rule runs (``key`` None: --group-by none, --episodes without
    --group-by, --rule ltt, --fit-scorer) is an error naming the flag and its value, never silently ignored."""
    from guard.calibration.two_level import AUTO, FLAG

    if key is None and args.group_alpha != AUTO:
        raise GuardError(
            f"{FLAG} {args.group_alpha!r} sets the group rule's level, but no group rule runs here: give --group-by "
            "KEY (not none) with --rule carb, or drop --group-alpha"
        )


def group_by(args: argparse.Namespace, agentdojo: bool) -> str | None:
    """The grouping key to use: the option, or the default for the corpus kind (None: plain CRC)."""
    key: str | None = args.group_by
    if key is None:
        return "injection_task" if agentdojo else None
    return None if key == "none" else key
