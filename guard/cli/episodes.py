"""``carbguard episodes schema|validate|convert``: the product's episode format (``carbguard-episodes/1``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from guard.cli._common import SCOPE, add_out
from guard.errors import GuardError

DESCRIPTION = (
    "Episodes are the calibration data: JSON lines, one episode a line (user turns, proposals, results, final "
    "answer), replayed through the same code as online use. The threshold they calibrate carries the guarantee "
    "below only if they are exchangeable with the deployment's episodes, e.g. recorded from the deployment itself."
)
SOURCES = ("agentdojo", "langchain", "openai", "otel")


def _schema(args: argparse.Namespace) -> int:
    from guard.corpora.episodes import episodes_json_schema

    print(json.dumps(episodes_json_schema(), indent=2, sort_keys=True))
    return 0


def _validate(args: argparse.Namespace) -> int:
    from collections import Counter

    from guard.corpora.episodes import read_episodes
    from guard.policy import load_policy

    read = read_episodes(args.file, [load_policy(p) for p in args.policy])
    labels_note = ""
    if args.labels:
        from guard.ledger.labels import attach, read_labels

        labels_note = f", {len(attach(read_labels(args.labels), read.episodes, args.labels))} labels"
    proposals = sum(len(e.proposals()) for e in read.episodes)
    per_policy = Counter(p.name for p in read.policy_of.values())
    by_policy = ", ".join(f"{name}: {count}" for name, count in sorted(per_policy.items()))
    print(f"{args.file}: valid: {len(read.episodes)} episodes, {proposals} proposals ({by_policy}){labels_note}")
    return 0


def _converter(source: str) -> Callable[[str], Iterator[dict[str, Any]]]:
    if source == "langchain":
        from guard.corpora.convert_langchain import convert_langchain

        return convert_langchain
    if source == "openai":
        from guard.corpora.convert_openai import convert_openai

        return convert_openai
    from guard.corpora.convert_otel import convert_otel

    return convert_otel


def _convert(args: argparse.Namespace) -> int:
    from guard.cli._common import check_output, write_output
    from guard.corpora._writing import episode_lines

    out = check_output(args.out, [args.input])
    if args.source == "agentdojo":
        from guard.corpora.convert_agentdojo import convert_agentdojo

        labels = Path(args.labels_out) if args.labels_out else out.with_name(out.stem + ".labels.jsonl")
        check_output(labels, [args.input, out], "--labels-out")
        done = convert_agentdojo(args.input, out, labels)
        print(
            f"wrote {out}: {done.episodes} episodes ({done.left_out} runs left out: injection-goal runs, "
            f"run errors, unreadable files); wrote {labels}: {done.charged} episodes charged by the AgentDojo ledger"
        )
        for note in done.notes:
            print(f"  unreadable: {note}")
        return 0
    if args.labels_out:
        raise GuardError(f"--labels-out applies to --from agentdojo only (a {args.source} export has no labels)")
    lines = episode_lines(_converter(args.source)(args.input))
    write_output(out, "".join(line + "\n" for line in lines), [args.input])
    print(f"wrote {out}: {len(lines)} episodes (check them with `carbguard episodes validate {out} --policy P`)")
    return 0


def register(sub: Any) -> None:
    """``carbguard episodes``."""
    eps = sub.add_parser(
        "episodes", help="the episode format: schema, validate, convert", description=DESCRIPTION, epilog=SCOPE
    )
    cmds = eps.add_subparsers(dest="episodes_command", required=True)
    schema = cmds.add_parser("schema", help="print the JSON Schema of one episodes line")
    schema.set_defaults(func=_schema)
    val = cmds.add_parser("validate", help="read an episodes file under its policy; errors name line and field")
    val.add_argument("file", help="a carbguard-episodes/1 JSON-lines file")
    val.add_argument(
        "--policy",
        action="append",
        required=True,
        help="policy file (repeatable; then each episode names its policy in meta.policy)",
    )
    val.add_argument("--labels", help="also check a labels file against the episodes")
    val.set_defaults(func=_validate)
    conv = cmds.add_parser(
        "convert",
        help="convert AgentDojo runs, LangChain/OpenAI message lists or OpenTelemetry GenAI spans",
        description="Convert what you already have into carbguard-episodes/1. Trust is not stored: "
        "`episodes validate --policy` and `calibrate --policy` derive it from the policy.",
    )
    conv.add_argument("--from", dest="source", required=True, choices=SOURCES, help="input kind")
    conv.add_argument(
        "input", help="AgentDojo runs/ folder (or embedded:MODEL, embedded:all); otherwise a JSON or JSON-lines file"
    )
    add_out(conv, "episodes file to write", required=True)
    conv.add_argument("--labels-out", help="agentdojo: where to write the ledger labels (default: <out>.labels.jsonl)")
    conv.set_defaults(func=_convert)
