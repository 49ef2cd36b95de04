"""``carbguard report``: the HTML decision explorer."""

from __future__ import annotations

import argparse
from typing import Any

from guard.cli._common import add_out
from guard.errors import GuardError


def register(sub: Any) -> None:
    """``carbguard report``."""
    rep = sub.add_parser("report", help="a self-contained HTML report of why each call was allowed or refused")
    rep.add_argument("audit", nargs="?", help="an audit log (JSON lines) to render")
    rep.add_argument("--runs", help="an AgentDojo runs folder to replay an episode from")
    rep.add_argument("--corpus", help="an embedded corpus to replay an episode from (model name)")
    rep.add_argument("--episodes", help="your own episodes file (carbguard-episodes/1) to replay an episode from")
    rep.add_argument("--episode", help="episode id to replay (AgentDojo: model/suite/user_task/attack/injection_task)")
    rep.add_argument("--threshold", type=float, help="threshold for replay (default: the artifact, else the policy's)")
    rep.add_argument("--artifact", help="replay: calibration artifact for the threshold (default: the policy's)")
    rep.add_argument("--policy", help="policy file (audit mode: for feature weights; --episodes: the episodes' policy)")
    rep.add_argument("--plot", help="a frontier PNG from `evaluate --plot` to embed")
    rep.add_argument("--key-file", help="audit mode: the deployment key of a keyed log (verifies its MACs)")
    add_out(rep, "HTML file to write (never one of the inputs)", required=True)
    rep.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from guard import report
    from guard.cli._common import check_output, write_output

    inputs = [args.audit, args.runs, args.episodes, args.policy, args.plot, args.key_file, args.artifact]
    check_output(args.out, inputs)
    if args.audit:
        from guard.audit import read_key_file

        key = read_key_file(args.key_file) if args.key_file else None
        policy = None
        if args.policy:
            from guard.policy import load_policy

            policy = load_policy(args.policy)
        check_audit_entries(args.audit)
        text = report.render_audit_report(args.audit, frontier_png=args.plot, policy=policy, key=key)
    else:
        if args.key_file:
            raise GuardError("--key-file applies to an AUDIT log only, not to a replay")
        text = _replay_report(args)
    print(f"wrote {write_output(args.out, text, inputs)}")
    return 0


def check_audit_entries(path: str) -> None:
    """GuardError naming file, line and field for the first entry the report cannot show.

    Lines that are not strict JSON are skipped here: the report counts them in its note.
    """
    from pathlib import Path

    from guard.audit import StrictJSONError, parse_line
    from guard.errors import AuditError
    from guard.report.entries import EntryError, check_entry

    try:
        lines = Path(path).read_bytes().split(b"\n")
    except OSError as exc:
        raise AuditError(f"{path}: cannot read audit log: {exc.strerror or exc}") from None
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            entry = parse_line(raw)
        except StrictJSONError:
            continue
        try:
            check_entry(entry)
        except EntryError as exc:
            raise AuditError(f"{path}: line {number}: {exc}") from None


def _replay_report(args: argparse.Namespace) -> str:
    from guard import report
    from guard.corpora import agentdojo
    from guard.runtime import Guard

    sources = [
        flag
        for flag, value in (("--runs", args.runs), ("--corpus", args.corpus), ("--episodes", args.episodes))
        if value
    ]
    if not args.episode or len(sources) != 1:
        raise GuardError(
            "report needs an AUDIT file, or one of --runs PATH/--corpus MODEL/--episodes FILE with --episode ID"
        )
    if args.episodes:
        return _own_episode_report(args)
    if args.artifact:
        raise GuardError("--artifact applies to --episodes; AgentDojo replays take --threshold or the suite's artifact")
    loaded = agentdojo.load_runs(args.runs) if args.runs else agentdojo.load_embedded(args.corpus)

    def guard_for(episode: Any) -> Guard:
        path = agentdojo.suite_policy_path(episode.meta.suite)
        if args.threshold is None:
            return Guard.from_policy(path)
        return Guard(agentdojo.load_suite_policy(episode.meta.suite), threshold=args.threshold)

    episode = report.find_episode(loaded.episodes, args.episode)
    text: str = report.render_episode_report(guard_for, episode, frontier_png=args.plot)
    return text


def _own_episode_report(args: argparse.Namespace) -> str:
    """The replay report of one episode of your own episodes file, under ``--policy`` and its threshold."""
    from guard import report
    from guard.artifact import apply_fitted_weights, load_artifact
    from guard.corpora.episodes import read_episodes
    from guard.policy import load_policy
    from guard.runtime import Guard

    if not args.policy:
        raise GuardError("--episodes needs --policy: the policy the episodes were recorded under")
    if args.threshold is not None and args.artifact:
        raise GuardError("--threshold and --artifact both set the threshold; give one")
    base = load_policy(args.policy)
    episode = report.find_episode(read_episodes(args.episodes, [base]).episodes, args.episode)
    if args.threshold is not None:
        guard = Guard(base, threshold=args.threshold)
    elif args.artifact or base.calibration.artifact:
        path = args.artifact or base.resolve(base.calibration.artifact or "")
        policy = apply_fitted_weights(load_artifact(path).body, base, path)
        art = load_artifact(path, policy)
        guard = Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id)
    else:
        raise GuardError(f"{args.policy}: no threshold: pass --threshold T or --artifact A (the policy names none)")
    text: str = report.render_episode_report(lambda _episode: guard, episode, frontier_png=args.plot)
    return text
