"""The episode recorder: a session's replayable episode as one line of a ``carbguard-episodes/1`` file.

Opt-in with ``Guard(..., record="episodes.jsonl")``, in shadow or enforcing mode.  The recorded episode
is exactly what the session saw, in order: user turns, every proposal that reached the prefix graph
(tool, canonical arguments, call id; probes included), every result (raw text and status) and the
final answer.  **The file holds raw tool results and user turns** — private data by design, since
calibration must replay them; it is created ``0600`` (an existing file with wider permissions is
narrowed to ``0600``) and never follows a symlink.

When a line is written:

- at the session's final answer (:meth:`Session.observe_final`), or at :meth:`Session.close` when
  there was none — whichever comes first; a session's episode is written once;
- an *unfinished* session (closed without a final answer) is written too, tagged
  ``"ended": "close"`` (it is a real episode whose executed prefix the ledger can judge); a session
  that is neither finished nor closed (the process died) is not written;
- records that arrive after the episode was written are not recorded (the ``session_end`` audit
  entry counts them as ``late_records``): one session is one episode.  A closed session that decides
  again continues as a new segment with its own ``session_end`` entry (``<id>#segment-<n>``,
  docs/audit.md); its records are late records of the one episode, and its entry says ``recorded: false``.

Metadata: ``Session.annotate`` sets it from the agent's code; ``EpisodeRecorder(path, annotate=...)``
is asked for it just before each episode is written, whichever adapter drives the session (e.g. the
task, attack and utility an integrator knows from its own bookkeeping).  An episode id the file
already holds is never appended again (the session reports ``recorded: false``).

Each line is appended under an exclusive ``flock``, flushed and ``fsync``'ed, so several threads and
processes can share one file (as :mod:`guard.audit` does).  Proposals the guard refused before they
reached the graph (unknown tool, malformed arguments, reused call id) are not in the episode; their
number is the tag ``unrecorded_proposals``.

Failures: writing never raises into the agent, in either mode.  Enforcing mode: a decision never
depends on the recorder (it runs only at final/close, after every decision).  Shadow mode: the same —
shadow mode must not change what the agent sees, so a failed write is kept in
``Session.recording.error``, logged on the ``guard.recorder`` logger and reported in the session's
``session_end`` audit entry (``recorded: false``) instead of raising.

This module is on the decision floor: it imports :mod:`guard.episode_json`, never :mod:`guard.corpora`.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from guard.decision import Decision, Mode
from guard.episode_json import episode_line
from guard.errors import InputError
from guard.graph import PrefixGraph
from guard.jsonio import encode_float
from guard.policy import Policy
from guard.protocols import AuditSink
from guard.records import Episode, EpisodeMeta, Record, RecordKind
from guard.segments import Segments, segment_id

LOG = logging.getLogger("guard.recorder")
FILE_MODE = 0o600


class _Guard(Protocol):
    @property
    def policy(self) -> Policy: ...
    @property
    def audit(self) -> AuditSink | None: ...

    @property
    def threshold(self) -> float: ...  # read-only: the breaker owns it (guard.breaker)
    @property
    def artifact_id(self) -> str | None: ...
    @property
    def mode(self) -> Mode: ...

    @property
    def recorder(self) -> EpisodeRecorder | None: ...

    @property
    def review(self) -> Any: ...  # a guard.review.ReviewSampler, or None without review sampling


@dataclass
class RecordState:
    """The recorder's own state of one session (``Session.recording``): only this module writes it.

    ``recorded``: the episode was written (or attempted) once; ``records``: how many records it
    held; ``error``: why writing failed; ``meta``: the episode metadata (``Session.annotate``).
    """

    recorded: bool = False
    records: int = 0
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class Session(Protocol):
    """What the recorder reads of a :class:`guard.session.Session` (it never imports the runtime)."""

    session_id: str
    graph: PrefixGraph
    recording: RecordState
    segments: Segments

    @property
    def decisions(self) -> Mapping[str, Decision]: ...
    @property
    def proposals(self) -> Mapping[str, Record]: ...
    @property
    def guard(self) -> _Guard: ...


Annotate = Callable[[Any], Mapping[str, Any]]
"""``annotate(session)``: episode metadata (``model``, ``task``, ``attack``, ``utility``, ``tags``) for a
session, asked for just before its episode is written (see :class:`EpisodeRecorder`)."""


class EpisodeRecorder:
    """Appends one JSON line per episode to a file created ``0600``; safe across threads and processes.

    ``annotate`` (optional) is asked for each session's metadata right before its episode is written,
    whichever adapter drives the session: what it returns is merged over ``Session.annotate``'s.  An
    episode whose id the file already holds is not appended (an id is written once, also across
    processes and earlier runs): the write fails and the session reports ``recorded: false``.
    """

    def __init__(self, path: str | Path, *, fsync: bool = True, annotate: Annotate | None = None) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.annotate = annotate
        self._lock = threading.Lock()
        self._ids: set[str] = set()  # episode ids of the file's first ``_scanned`` bytes
        self._scanned = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(self._open())
        except OSError as exc:
            raise InputError(f"{self.path}: cannot create the episodes file: {exc.strerror or exc}") from None

    def _open(self) -> int:
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path, flags, FILE_MODE)
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, FILE_MODE)
        return fd

    def _scan(self, fd: int) -> None:
        """Read the episode ids of what was appended since the last scan (from the start if the file shrank)."""
        size = os.fstat(fd).st_size
        if size < self._scanned:
            self._ids, self._scanned = set(), 0
        tail = b""
        while self._scanned + len(tail) < size:
            chunk = os.pread(fd, 1 << 20, self._scanned + len(tail))
            if not chunk:
                break
            tail += chunk
            *lines, tail = tail.split(b"\n")
            for raw in lines:
                self._scanned += len(raw) + 1
                episode_id = _line_id(raw)
                if episode_id is not None:
                    self._ids.add(episode_id)

    def write(self, line: str) -> None:
        """Append ``line`` and a newline under an exclusive lock, flushed and synced; raise OSError.

        Raises :class:`~guard.errors.InputError` (nothing written) when the line is an episode whose
        id the file already holds.
        """
        data = line.encode("utf-8") + b"\n"
        episode_id = _line_id(data)
        with self._lock:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    self._scan(fd)
                    if episode_id is not None and episode_id in self._ids:
                        raise InputError(f"{self.path}: episode id {episode_id!r} is already recorded; not appended")
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    if self.fsync:
                        os.fsync(fd)
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def _line_id(raw: bytes) -> str | None:
    """The ``id`` of an episode line (None for a line that is not one)."""
    try:
        found = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    episode_id = found.get("id") if isinstance(found, dict) else None
    return episode_id if isinstance(episode_id, str) else None


def stop_max(scores: Iterable[float | None], threshold: float) -> float:
    """The monitoring statistic of one episode: its maximum score up to the gate's first stop.

    The running maximum of the scores up to and including the first score above ``threshold``
    (the replayed episode at λ̂ of docs/calibrate.md stops there), else the maximum of all; ``None``
    (refused before scoring) counts as +inf, as in replay; ``-inf`` for an episode without proposals.
    Above λ̂ it is the first exceeding score; at or below λ̂ it is the episode's maximum score.
    """
    best = -math.inf
    for value in scores:
        score = math.inf if value is None else float(value)
        best = max(best, score)
        if score > threshold:
            break
    return best


_META_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "task": (str,),
    "attack": (str, type(None)),
    "utility": (bool, type(None)),
    "tags": (dict,),
}


def check_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """Validated episode metadata for :meth:`Session.annotate`; InputError naming the bad key."""
    for key, value in meta.items():
        if key not in _META_TYPES:
            raise InputError(f"unknown episode metadata {key!r}; use {', '.join(_META_TYPES)}")
        if not isinstance(value, _META_TYPES[key]):
            raise InputError(f"episode metadata {key!r} must be {_META_TYPES[key][0].__name__}, got {value!r}")
    return dict(meta)


def recorded_episode(session: Session) -> Episode:
    """The session's records as an :class:`Episode` whose id is the audit id of the session's first segment: the
    session id, or ``<id>#segment-<n>`` for an id the guard had seen (metadata from ``annotate``)."""
    records = tuple(session.graph.records[i] for i in sorted(session.graph.records))
    meta = session.recording.meta
    return Episode(
        segment_id(session.session_id, session.segments.first),
        records,
        EpisodeMeta(
            model=meta.get("model", ""),
            user_task=meta.get("task", ""),
            attack=meta.get("attack"),
            utility=meta.get("utility"),
        ),
    )


def episode_tags(session: Session, ended: str) -> dict[str, Any]:
    """Free tags of a recorded episode (mode, how it ended, artifact, unrecorded proposals)."""
    in_graph = sum(1 for call_id in session.decisions if call_id in session.proposals)
    return {
        **session.recording.meta.get("tags", {}),
        "recorded_by": "carbguard",
        "mode": session.guard.mode,
        "ended": ended,
        "artifact": session.guard.artifact_id,
        "unrecorded_proposals": len(session.decisions) - in_graph,
    }


def write_episode(session: Session, ended: str) -> bool:
    """Write the session's episode once; True when written now.  Never raises (see the module docstring)."""
    recorder, state = session.guard.recorder, session.recording
    if recorder is None or state.recorded:
        return False
    state.recorded = True
    state.records = len(session.graph.records)
    try:
        if recorder.annotate is not None:
            state.meta.update(check_meta(dict(recorder.annotate(session))))
        line = episode_line(recorded_episode(session), episode_tags(session, ended), session.guard.policy.name)
        recorder.write(line)
    except Exception as exc:  # noqa: BLE001 - the recorder must never crash the agent
        state.error = f"{type(exc).__name__}: {exc}"[:500]
        LOG.error("session %r: episode not recorded to %s: %s", session.session_id, recorder.path, state.error)
        return False
    return True


def session_end_entry(session: Session, ended: str) -> dict[str, Any]:
    """The ``session_end`` audit entry of the running segment: what monitoring needs, no raw values.

    ``stop_max`` is :func:`stop_max` of the segment's latest decision per call id, in order;
    ``intervened`` is whether the gate stopped (a score above λ̂ or a refusal before scoring);
    ``review`` (with the policy's ``review`` section) is ``{"picked": bool, "p": p}`` (:mod:`guard.review`),
    picked by the segment's own id.  A session's later segments (a closed session that decided again)
    carry ``session: <id>#segment-<n>`` and ``segment: n``; their records were not in the recorded
    episode (written once per session), so they report ``recorded: false`` when recording.  A session
    opened under an id the guard had seen starts at a later segment number: that is its own first
    segment, recorded under ``<id>#segment-<n>``.
    """
    guard, state = session.guard, session.recording
    segments = session.segments
    decisions = segments.decisions(session.decisions)
    scores = [d.score for d in decisions.values()]
    statistic = stop_max(scores, guard.threshold)
    finite = [s for s in scores if s is not None]
    later = segments.number > segments.first
    entry = {
        "ts": time.time(),
        "event": "session_end",
        **segments.fields(),
        "mode": guard.mode,
        "artifact": guard.artifact_id,
        "threshold": encode_float(guard.threshold),
        "ended": ended,
        "proposals": len(scores),
        "unscored": len(scores) - len(finite),
        "max_score": encode_float(max(finite)) if finite else None,
        "stop_max": encode_float(statistic),
        "intervened": statistic > guard.threshold,
        "verdicts": sorted({d.verdict.value for d in decisions.values()}),
        "recorded": None if guard.recorder is None else state.error is None and state.recorded and not later,
        "late_records": len(session.graph.records) - state.records if state.recorded else 0,
    }
    if guard.review is not None:  # the keyed review pick and its rate: the risk monitor weights by 1/p
        entry["review"] = guard.review.entry(segments.audit_id)
    return entry


def end_session(session: Session) -> None:
    """Write the episode (if recording and not yet written) and the segment's ``session_end`` entry; never raise."""
    records = session.graph.records
    final_seen = any(r.kind is RecordKind.FINAL for i, r in records.items() if i >= session.segments.start)
    ended = "final" if final_seen else "close"
    write_episode(session, "close")
    sink = session.guard.audit
    if sink is None:
        return
    try:
        sink.write(session_end_entry(session, ended))
    except Exception as exc:  # noqa: BLE001 - no tool waits on this entry; report, never crash
        LOG.error("session %r: session_end audit entry not written: %s", session.session_id, exc)


__all__ = [
    "EpisodeRecorder",
    "RecordState",
    "end_session",
    "recorded_episode",
    "session_end_entry",
    "stop_max",
    "write_episode",
]
