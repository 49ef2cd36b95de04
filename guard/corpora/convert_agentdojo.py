"""AgentDojo runs → a ``carbguard-episodes/1`` file plus a labels file: the AgentDojo ledger as labels.

The episodes keep the ids, records and task outcome (``utility``) of :func:`agentdojo.load_runs`;
each names its suite policy (``meta.policy``), so ``carbguard calibrate`` reads them with the four
suite policies (``guard/data/policies/agentdojo/*.yaml``).  The AgentDojo ledger (its rules over the
labels in ``ledger.yaml`` and each episode's injected texts) is computed here, once, and written as
an ``override`` label per episode — an empty ``harms`` list where nothing fired — so calibrating on
the converted files charges exactly what ``--runs`` charges.  Injection-goal runs and runs with a
recorded error are left out, as ``--runs`` leaves them out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from guard.corpora import agentdojo
from guard.corpora._writing import write_lines
from guard.episode_json import episode_line
from guard.errors import CorpusError
from guard.ledger import Ledger
from guard.ledger.labels import EpisodeLabel, Harm, label_line
from guard.records import Episode

LABELLER = "carbguard AgentDojo ledger (guard/data/policies/agentdojo/ledger.yaml)"


@dataclass(frozen=True)
class Converted:
    """What a conversion wrote."""

    episodes: int
    charged: int
    left_out: int
    notes: tuple[str, ...]


def episode_label(episode: Episode) -> EpisodeLabel:
    """The AgentDojo ledger's verdict on ``episode`` as an override label (one harm per charged category and step)."""
    policy = agentdojo.load_suite_policy(episode.meta.suite)
    trace = Ledger(policy, agentdojo.episode_ledger_labels(episode)).trace(episode)
    harms = tuple(Harm(category, step=k) for k, fired in enumerate(trace.events) for category in sorted(fired))
    why = (
        "AgentDojo ledger rules fired: " + ", ".join(sorted({h.category for h in harms}))
        if harms
        else "AgentDojo ledger rules fired on no executed proposal"
    )
    return EpisodeLabel(episode.episode_id, harms, LABELLER, why, "override")


def _source(source: str) -> agentdojo.LoadReport:
    if source.startswith("embedded:"):
        return agentdojo.load_embedded(source.split(":", 1)[1] or "all")
    return agentdojo.load_runs(source)


def lines(report: agentdojo.LoadReport) -> Iterator[tuple[str, str]]:
    """``(episode line, label line)`` of every user-task episode of ``report``."""
    for episode in report.episodes:
        if agentdojo.is_injection_goal_run(episode):
            continue
        policy = agentdojo.load_suite_policy(episode.meta.suite)
        tags = {"security": episode.meta.security, "source": episode.meta.source}
        yield episode_line(episode, tags, policy=policy.name), label_line(episode_label(episode))


def convert_agentdojo(source: str, out: str | Path, labels_out: str | Path) -> Converted:
    """Write the episodes and labels files of a runs folder (or ``embedded:MODEL`` / ``embedded:all``)."""
    for target in (Path(out), Path(labels_out)):
        if target.is_dir():
            raise CorpusError(f"{target} is a folder; give a file path")
    report = _source(source)
    pairs = list(lines(report))
    write_lines(out, [e for e, _ in pairs])
    write_lines(labels_out, [lab for _, lab in pairs])
    charged = sum('"harms":[]' not in lab.replace(" ", "") for _, lab in pairs)
    left_out = len(report.episodes) - len(pairs) + len(report.dropped_error) + len(report.failed)
    notes = tuple(f"{path}: {reason}" for path, reason in report.failed)
    return Converted(len(pairs), charged, left_out, notes)


__all__ = ["LABELLER", "Converted", "convert_agentdojo", "episode_label", "lines"]
