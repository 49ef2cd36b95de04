"""``carbguard data constructed|safecommit-bench|agentdojo|background``: regenerate the data files the package ships."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from guard.cli._common import add_out, ranged
from guard.errors import GuardError


def _constructed(args: argparse.Namespace) -> int:
    from guard.studies.constructed import DATA_DIR, SUITES, suite_bytes, write_suites

    if not (args.write or args.check):
        raise GuardError("data constructed needs --write DIR or --check")
    if args.write:
        for path in write_suites(args.write, seed=args.seed):
            print(path)
    if args.check:
        stale = [s for s in SUITES if (DATA_DIR / f"{s}.jsonl.gz").read_bytes() != suite_bytes(s)]
        print("shipped suites regenerate identically" if not stale else f"stale: {', '.join(stale)}")
        return 1 if stale else 0
    return 0


def _safecommit_bench(args: argparse.Namespace) -> int:
    from guard.studies.safecommit_bench import write_splits

    for path in write_splits(args.write):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


def _agentdojo(args: argparse.Namespace) -> int:
    from guard.corpora.agentdojo import convert

    counts = convert(args.runs, args.out, progress=not args.quiet)
    for model, (kept, dropped, failed) in counts.items():
        print(f"{model}: {kept} kept, {dropped} dropped (run error), {failed} failed")
    return 0


def _background(args: argparse.Namespace) -> int:
    from guard.studies.background import AGENTDOJO_PATH, write_background, write_episodes_table, write_generic
    from guard.studies.background_sessions import session_floor

    try:
        session_floor(1, args.min_share, args.min_sessions)  # the bounds, named, before any work
    except ValueError as exc:
        raise GuardError(f"data background: {exc}") from None
    if args.min_groups is not None and not args.agentdojo:
        raise GuardError("data background: --min-groups applies to --agentdojo only (a table counts sessions)")
    if args.episodes:
        if not args.out or not args.policy:
            raise GuardError(
                "data background --episodes needs --out TABLE.json (name it in graph.background) and --policy "
                "FILE (it says which text is private: private-source text never enters a table)"
            )
        try:
            out, episodes, policy = Path(args.out), Path(args.episodes), Path(args.policy)
            print(write_episodes_table(out, episodes, policy, args.min_share, args.min_sessions))
        except (OSError, ValueError) as exc:
            raise GuardError(f"data background --episodes: {exc}") from None
    elif args.agentdojo:
        out = Path(args.out) if args.out else AGENTDOJO_PATH
        groups = 2 if args.min_groups is None else args.min_groups
        print(write_background(out, args.min_share, args.min_sessions, groups, args.seed))
    else:
        print(write_generic(Path(args.out)) if args.out else write_generic())
    return 0


def register(sub: Any) -> None:
    """``carbguard data``."""
    data = sub.add_parser(
        "data", help="regenerate the data files the package ships (constructed suites, splits, AgentDojo corpus)"
    )
    cmds = data.add_subparsers(dest="data_command", required=True)
    con = cmds.add_parser("constructed", help="the constructed CES and graph-braid suites (ces/braid.jsonl.gz)")
    con.add_argument("--write", metavar="DIR", help="write ces.jsonl.gz and braid.jsonl.gz into DIR")
    con.add_argument("--seed", type=int, default=0, help="generator seed (the shipped files use 0)")
    con.add_argument("--check", action="store_true", help="check that the shipped files regenerate byte for byte")
    con.set_defaults(func=_constructed)
    scb = cmds.add_parser("safecommit-bench", help="the frozen SafeCommitBench splits (train/validation/...)")
    scb.add_argument("--write", metavar="DIR", required=True, help="write the frozen JSONL splits into DIR")
    scb.set_defaults(func=_safecommit_bench)
    ad = cmds.add_parser("agentdojo", help="a runs/ folder converted into the compact embedded corpus")
    ad.add_argument("--runs", required=True, help="AgentDojo runs/ folder (parent of the model folders)")
    add_out(ad, "output folder, e.g. guard/data/agentdojo", required=True, metavar="DIR")
    ad.add_argument("--quiet", action="store_true", help="no progress counter")
    ad.set_defaults(func=_agentdojo)
    bg = cmds.add_parser(
        "background",
        help="a background k-gram table of boilerplate: the shipped generic one (default), a deployment's own "
        "(--episodes) or AgentDojo's development split (--agentdojo)",
    )
    add_out(bg, "where to write the table (default: the shipped guard/data/background/kgrams.json)", metavar="FILE")
    which = bg.add_mutually_exclusive_group()
    which.add_argument(
        "--episodes", metavar="FILE", help="a deployment's carbguard-episodes/1 file (needs --out and --policy)"
    )
    which.add_argument("--agentdojo", action="store_true", help="AgentDojo's development split (agentdojo.json)")
    bg.add_argument(
        "--policy", metavar="FILE", help="with --episodes (required): the policy that says which text is private"
    )
    bg.add_argument(
        "--min-share",
        type=ranged(float, lambda x: 0 < x < 1, "must be in (0, 1)"),
        default=0.05,
        help="share of the sessions that must hold a gram (see --min-sessions)",
    )
    bg.add_argument(
        "--min-sessions",
        type=ranged(int, lambda n: n >= 3, "must be at least 3"),
        default=3,
        help="at least this many distinct sessions must hold a gram (3 or more): the floor is "
        "max(min-sessions, ceil(min-share x sessions))",
    )
    bg.add_argument(
        "--min-groups",
        type=ranged(int, lambda n: n >= 1, "must be at least 1"),
        help="with --agentdojo: how many suites a gram is common in (default 2)",
    )
    bg.add_argument("--seed", type=int, default=0, help="with --agentdojo: seed of the three-way development split")
    bg.set_defaults(func=_background)
