"""The decision explorer: one self-contained HTML file that shows why each tool call was allowed or refused.

Two sources, one page layout:

- :func:`render_audit_report` / :func:`write_audit_report` read an audit log (docs/audit.md) and show
  only what it holds: per session, the proposals, the edges into them, the selections, the
  features, score against λ̂, verdict, reason, latency and SafeCommit log.  Hashed argument values
  stay hashed; record texts are not in the log and are not shown.
- :func:`render_episode_report` / :func:`write_episode_report` replay an episode through the same
  code as evaluation (a fresh session fed with :func:`guard.calibration.replay.feed`) and show the
  whole prefix graph with every record.  Argument values are hashed as the audit log would hash
  them (:func:`guard.redaction.redact_args`); record texts come from the run file.

The page has an overview (verdict counts, the score histogram against λ̂, optionally the
risk–utility frontier PNG of ``carbguard evaluate --plot``, links to every episode) and, per
episode, the prefix graph as an SVG DAG (E1–E4 styled apart), a timeline, and the detail of the
decision under the cursor: the records the selector chose are highlighted in the graph, the
private-source → sink path is drawn in red, and the feature table shows value × weight.
The file makes no network request (a Content-Security-Policy forbids it) and opens from disk.
"""

from __future__ import annotations

import difflib
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from guard.audit import StrictJSONError, parse_line, verify
from guard.errors import AuditError, CorpusError, GuardError
from guard.policy import Policy
from guard.records import Episode
from guard.report.model import policy_weights, view_from_replay, views_from_audit
from guard.report.page import document
from guard.runtime import Guard

GuardFor = Guard | Callable[[Episode], Guard]
"""A guard, or a function that gives the guard for an episode (e.g. from its suite's policy)."""

__all__ = [
    "GuardFor",
    "render_audit_report",
    "render_episode_report",
    "render_replay_report",
    "write_audit_report",
    "write_episode_report",
]


def _read_png(path: str | Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise GuardError(f"{path}: cannot read the frontier image: {exc.strerror or exc}") from None
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise GuardError(f"{path}: the frontier image is not a PNG file")
    return data


def _audit_entries(path: Path) -> tuple[list[Mapping[str, Any]], int]:
    """Every entry of an audit log that parses strictly (:func:`guard.audit.parse_line`), and how many lines do not."""
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as exc:
        raise AuditError(f"{path}: cannot read audit log: {exc.strerror or exc}") from None
    entries: list[Mapping[str, Any]] = []
    bad = 0
    for raw in lines:
        if not raw.strip():
            continue
        try:
            entries.append(parse_line(raw))
        except StrictJSONError:
            bad += 1
    return entries, bad


def render_audit_report(
    audit_path: str | Path,
    *,
    policy: Policy | None = None,
    frontier_png: str | Path | None = None,
    key: bytes | None = None,
) -> str:
    """The HTML report of an audit log (``policy``: the scorer weights; ``key``: verify a keyed chain)."""
    path = Path(audit_path)
    entries, bad = _audit_entries(path)
    views = views_from_audit(entries, policy_weights(policy))
    chain = verify(path, key=key).describe()
    notes = [f"Source: audit log {path.name} ({len(entries)} entries). Hash chain: {chain}."]
    if bad:
        notes.append(f"{bad} lines could not be parsed as strict JSON audit entries and are not shown.")
    artifacts = sorted({str(e["artifact"]) for e in entries if e.get("artifact")})
    if artifacts:
        notes.append(f"Calibration artifact(s): {', '.join(artifacts)}.")
    notes.append(
        f"Feature weights from policy {policy.name!r}."
        if policy is not None
        else "Feature weights are not in the audit log; pass the policy to show value × weight."
    )
    return document(f"carbguard decision report: {path.name}", views, notes=notes, frontier=_read_png(frontier_png))


def _guard_for(guard: GuardFor, episode: Episode) -> Guard:
    return guard if isinstance(guard, Guard) else guard(episode)


def render_replay_report(
    guard: GuardFor, episodes: Iterable[Episode], *, frontier_png: str | Path | None = None, title: str | None = None
) -> str:
    """The HTML report of several episodes, each replayed through a fresh session of its guard."""
    views = []
    policies: dict[str, str] = {}
    for episode in episodes:
        chosen = _guard_for(guard, episode)
        views.append(view_from_replay(chosen, episode))
        selector = getattr(chosen.selector, "name", type(chosen.selector).__name__)
        artifact = f", artifact {chosen.artifact_id}" if chosen.artifact_id else ""
        policies[chosen.policy.name] = (
            f"policy {chosen.policy.name!r}, selector {selector}, threshold λ̂ = {chosen.threshold:g}{artifact}"
        )
    notes = ["Replay of logged episodes through the guard's decision code (nothing is executed)."]
    notes += [f"Guard: {text}." for text in policies.values()]
    heading = title or "carbguard decision report: replay"
    return document(heading, views, notes=notes, frontier=_read_png(frontier_png))


def render_episode_report(guard: GuardFor, episode: Episode, *, frontier_png: str | Path | None = None) -> str:
    """The HTML report of one episode replayed through a fresh session of ``guard``."""
    return render_replay_report(
        guard, [episode], frontier_png=frontier_png, title=f"carbguard decision report: {episode.episode_id}"
    )


def _write(text: str, out_path: str | Path) -> Path:
    """Write ``text`` to a temporary file beside ``out_path`` and rename it (permissions follow the umask)."""
    out = Path(out_path)
    if out.is_dir():
        raise GuardError(f"{out} is a folder; give the path of the HTML file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def write_audit_report(
    audit_path: str | Path,
    out_path: str | Path,
    *,
    frontier_png: str | Path | None = None,
    policy: Policy | None = None,
    key: bytes | None = None,
) -> Path:
    """Write :func:`render_audit_report` to ``out_path``; return the path."""
    return _write(render_audit_report(audit_path, policy=policy, frontier_png=frontier_png, key=key), out_path)


def find_episode(episodes: Iterable[Episode], episode_id: str) -> Episode:
    """The episode with ``episode_id``; CorpusError naming the closest ids otherwise."""
    pool = list(episodes)
    for episode in pool:
        if episode.episode_id == episode_id:
            return episode
    close = difflib.get_close_matches(episode_id, [e.episode_id for e in pool], n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f" among {len(pool)} episodes"
    raise CorpusError(f"no episode {episode_id!r}{hint} (ids look like model/suite/user_task/attack/injection_task)")


def write_episode_report(
    episodes: Iterable[Episode],
    episode_id: str,
    guard: GuardFor,
    out_path: str | Path,
    *,
    frontier_png: str | Path | None = None,
) -> Path:
    """Replay the episode ``episode_id`` of ``episodes`` and write its report to ``out_path``."""
    episode = find_episode(episodes, episode_id)
    return _write(render_episode_report(guard, episode, frontier_png=frontier_png), out_path)
