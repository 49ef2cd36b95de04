"""Every decision of the embedded AgentDojo corpus, dumped by one version and compared with another's.

``carbguard bench decisions dump OUT.jsonl.gz`` (or ``python -m benchmarks.decision_diff dump OUT``) replays
every embedded episode (five models, four suites) through a guard of its suite's shipped policy, at the
threshold the shipped pooled artifact calibrates (read as a number, so that a fingerprint change does not stop
the run), with the policy's SafeCommit certifier, one fresh session per episode (the replay's session id).
One JSON line per proposal: episode, model, suite, proposal index, tool, verdict, reason, score, selected
records and the features that fired.

``carbguard bench decisions diff OLD NEW`` compares two dumps proposal by proposal and prints how many
scores, verdicts, reasons, selections and feature sets changed, the changes counted by tool and by
(old → new) verdict, and the first changed proposals in full, so that every change can be explained.
Run ``dump`` in each version's checkout (``git worktree add`` for the older one), then ``diff``.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FIELDS = ("score", "verdict", "reason", "selected", "features")


def _threshold(alpha: float) -> float:
    from guard.corpora.agentdojo import DATA_DIR

    path = DATA_DIR / "calibration_artifacts" / "agentdojo" / f"pooled_a{alpha:.2f}.json"
    return float(json.loads(path.read_text(encoding="utf-8"))["threshold"])


def _rows(alpha: float, progress: bool) -> Iterator[dict[str, Any]]:
    from guard.calibration.replay import feed, replay_session_id
    from guard.corpora.agentdojo import load_embedded, load_suite_policy
    from guard.progress import Progress
    from guard.runtime import Guard

    threshold = _threshold(alpha)
    episodes = load_embedded("all").episodes
    guards: dict[str, Guard] = {}
    with Progress(len(episodes), "replaying", enabled=progress) as tick:
        for n, episode in enumerate(episodes, 1):
            suite = episode.meta.suite or ""
            guard = guards.get(suite)
            if guard is None:
                guard = guards[suite] = Guard(load_suite_policy(suite), threshold=threshold)
            for decision in feed(guard.session(replay_session_id(episode)), episode):
                yield {
                    "episode": episode.episode_id,
                    "model": episode.meta.model,
                    "suite": suite,
                    "i": decision.proposal_index,
                    "tool": decision.tool,
                    "verdict": decision.verdict.value,
                    "reason": decision.reason.value,
                    "score": None if decision.score is None else round(decision.score, 9),
                    "selected": list(decision.selected),
                    "features": sorted(name for name, on in decision.features.items() if on),
                }
            tick(n)


def dump(out: Path, alpha: float, progress: bool) -> int:
    """Write one line per proposal of the embedded corpus to ``out`` (gzip when it ends in ``.gz``)."""
    opener = gzip.open if out.suffix == ".gz" else open
    count = 0
    with opener(out, "wt", encoding="utf-8") as fh:
        for row in _rows(alpha, progress):
            fh.write(json.dumps(row, sort_keys=True) + "\n")
            count += 1
    print(f"{count} proposals written to {out}")
    return count


def _load(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        rows = (json.loads(line) for line in fh if line.strip())
        return {(r["model"], r["episode"], r["i"]): r for r in rows}


def diff(old_path: Path, new_path: Path, show: int) -> dict[str, int]:
    """Print the differences of two dumps; return the count of changed proposals per field."""
    old, new = _load(old_path), _load(new_path)
    missing, added = old.keys() - new.keys(), new.keys() - old.keys()
    changed = Counter[str]()
    by_tool = Counter[str]()
    by_verdict = Counter[str]()
    examples: list[str] = []
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        fields = [f for f in FIELDS if a[f] != b[f]]
        if not fields:
            continue
        changed.update(fields)
        changed["any"] += 1
        by_tool[a["tool"]] += 1
        if a["verdict"] != b["verdict"]:
            by_verdict[f"{a['verdict']} → {b['verdict']}"] += 1
        if len(examples) < show:
            examples.append(_describe(key, a, b, fields))
    print(f"proposals: {len(old)} old, {len(new)} new, {len(missing)} only old, {len(added)} only new")
    print("changed: " + (", ".join(f"{f} {changed[f]}" for f in ("any", *FIELDS)) if changed else "none"))
    for title, counts in (("by tool", by_tool), ("verdicts", by_verdict)):
        if counts:
            print(f"{title}: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    for line in examples:
        print(line)
    return dict(changed)


def _describe(key: tuple[str, str, int], a: dict[str, Any], b: dict[str, Any], fields: list[str]) -> str:
    parts = [f"{key[0]} {key[1]} #{key[2]} {a['tool']}:"]
    for f in fields:
        if f == "features":
            gone, came = sorted(set(a[f]) - set(b[f])), sorted(set(b[f]) - set(a[f]))
            parts.append(f"features -{gone} +{came}")
        else:
            parts.append(f"{f} {a[f]} → {b[f]}")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.decision_diff dump|diff ...``: the same as ``carbguard bench decisions ...``."""
    from guard.cli import main as cli

    return cli(["bench", "decisions", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
