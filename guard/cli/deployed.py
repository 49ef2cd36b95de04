"""The deployed sessions of an audit log, as both monitors of ``carbguard monitor`` take them.

A session starts at its first audit entry (its first decided call) and ends at its ``session_end``
entry.  The monitors take the sessions decided under one artifact in start order, up to the first
session not yet closed (:func:`deployed_sessions`): a session's length or outcome never decides its
place, and each run's stream is a prefix of the next run's.  A session still open past the bound
(:class:`OpenBound`: so many entries, or seconds, after its last entry) no longer holds the stream up:
it enters at its place with the statistic of the calls it decided, and is reported as open past
the bound (``carbguard monitor`` exits 5, docs/monitoring.md).  A closed session that decided again
is a new unit: its later segment's entries carry ``<id>#segment-<n>`` (docs/audit.md).  An entry whose
``session`` already had its ``session_end`` (one id used by two runs that did not share a guard, e.g.
two processes writing one log) starts a new unit too, ``<id>#run-<k>`` (:class:`UnitIds`): a second
``session_end`` never overwrites the first.  With labels,
each session's realised loss (:func:`realised_losses`), or under review sampling its
inverse-propensity term (:func:`sampled_terms`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from guard.errors import GuardError
from guard.jsonio import decode_float

OPEN_BOUND_ENTRIES = 1000
OPEN_BOUND_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class OpenBound:
    """When an open session counts as open past the bound: ``entries`` audit entries, or ``seconds`` of wall
    time (against ``now``), after its last entry; None leaves that bound out."""

    entries: int | None = OPEN_BOUND_ENTRIES
    seconds: float | None = OPEN_BOUND_SECONDS
    now: float | None = None

    def past(self, after: int, last_ts: float | None) -> bool:
        """Whether a session ``after`` entries and ``now - last_ts`` seconds past its last entry is past the bound."""
        if self.entries is not None and after >= self.entries:
            return True
        return (
            self.seconds is not None
            and self.now is not None
            and last_ts is not None
            and (self.now - last_ts >= self.seconds)
        )


@dataclass
class UnitIds:
    """The unit each audit entry belongs to: its ``session`` value until that value's ``session_end``, then a new one.

    The first unit of an audit id is the id itself; an entry of an id whose unit already ended starts
    the id's next unit, ``<id>#run-<k>`` (k = 2, 3, …; an id some other unit already holds is skipped, so
    two units never share one).  The guard never writes such entries itself (a reused id starts its next
    segment, :mod:`guard.segments`), but runs that do not share a guard write them.  Two such runs at
    the same time interleave under one id: their entries up to the first ``session_end`` are one unit.
    """

    open: dict[str, str] = field(default_factory=dict)
    """Audit id -> its unit not yet ended."""
    runs: dict[str, int] = field(default_factory=dict)
    """Audit id -> the k of its latest unit (2 and above only: a cache, :meth:`of` finds the same k without it)."""
    used: set[str] = field(default_factory=set)
    """Every unit id given out."""

    def of(self, sid: str, *, ending: bool = False) -> str:
        """The unit of an entry of audit id ``sid``; ``ending``: the entry is its ``session_end``."""
        unit = self.open.get(sid)
        if unit is None:
            k = self.runs.get(sid, 1)
            unit = sid if k == 1 else f"{sid}#run-{k}"
            while unit in self.used:
                k += 1
                unit = f"{sid}#run-{k}"
            if k > 1:
                self.runs[sid] = k
            self.used.add(unit)
            self.open[sid] = unit
        if ending:
            del self.open[sid]
        return unit


@dataclass
class SessionRecord:
    """What the monitors keep of one session: its decided calls' scores in order (a re-decision replaces the
    earlier score in place), its ``session_end`` statistic and review pick, its first and last entry (1-based)
    and latest timestamp."""

    scores: dict[str, float | None] = field(default_factory=dict)
    end: float | None = None
    closed: bool = False
    first: int = 0
    last: int = 0
    last_ts: float | None = None
    review: tuple[bool, float] | None = None


@dataclass(frozen=True, slots=True)
class Deployed:
    """The sessions of an audit log under one artifact, in start order, up to the first one not yet closed."""

    sessions: tuple[str, ...]
    statistics: tuple[float, ...]
    call_ids: tuple[frozenset[str], ...]
    ignored: int
    open_sessions: int
    reviews: tuple[tuple[bool, float] | None, ...] = ()
    waiting: int = 0
    """Closed sessions that started after the first open one: left out until it closes."""
    blocked_by: str | None = None
    """The first session (in start order) not yet closed, if any."""
    waiting_ids: frozenset[str] = frozenset()
    """The closed sessions that wait behind it; their labels are kept for later, not read now."""
    waiting_picked: frozenset[str] = frozenset()
    """Those of them that review sampling picked."""
    other_ids: frozenset[str] = frozenset()
    """Sessions decided under other artifacts: their labels belong to another stream and are not read."""
    open_past_bound: tuple[str, ...] = ()
    """Sessions still open past the bound (in start order); those before the cut are in the stream."""
    bound: OpenBound | None = None
    """The bound they were judged by (None: every open session holds the stream up)."""


def _decode(value: Any) -> float | None:
    if value is None:
        return None
    return decode_float(value, "audit score", GuardError)


def _key(artifact_id: Any) -> str | None:
    return artifact_id.rsplit("#", 1)[-1] if isinstance(artifact_id, str) else None


def deployed_sessions(
    entries: list[dict[str, Any]], checksum: str, threshold: float, bound: OpenBound | None = None
) -> Deployed:
    """The sessions under the artifact in start order (their first entry), up to the first one not yet closed.

    Every session that started before the first open one is closed, so the stream is a prefix of the
    start-ordered sequence of all sessions: a later run of the monitor extends it and never inserts a
    session into it.  Skipping the open sessions instead would drop the longest-running ones, and when
    a session's length depends on its outcome that drop is not random.  With ``bound``, a session open
    past it does not hold the stream up: it is not skipped either, but enters at its place with the
    statistic of the calls it decided (:func:`guard.recorder.stop_max` of their scores), and is listed
    in ``open_past_bound`` so the caller says so.
    """
    tally = SessionTally(checksum)
    tally.add(entries)
    return tally.deployed(threshold, bound)


@dataclass
class SessionTally:
    """:func:`deployed_sessions` as a resumable pass: :meth:`add` the entries of a log in order, in any number of
    pieces, and :meth:`deployed` gives the same result as one pass over all of them (``carbguard monitor``'s
    state file keeps a tally between runs, :mod:`guard.cli.monitor_state`)."""

    checksum: str
    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    """The artifact's sessions in start order (the order of their first entry)."""
    others: set[str] = field(default_factory=set)
    ignored: int = 0
    total: int = 0
    """Entries added so far (every kind): the 1-based line of the last one."""
    units: UnitIds = field(default_factory=UnitIds)
    """The unit of each entry (keys of ``sessions`` and members of ``others`` are unit ids)."""

    def add(self, entries: list[dict[str, Any]]) -> None:
        """Take the next entries of the log (GuardError on a malformed score or review)."""
        sessions, key = self.sessions, self.checksum[:12]
        for line, entry in enumerate(entries, start=self.total + 1):
            self.total = line
            if entry.get("kind") in ("review", "breaker", "vouch"):  # an answer, a switch, a vouch: no new score
                continue
            ending = entry.get("event") == "session_end"
            unit = self.units.of(str(entry.get("session")), ending=ending)
            if _key(entry.get("artifact")) != key:
                self.ignored += 1
                self.others.add(unit)
                continue
            record = sessions.setdefault(unit, SessionRecord(first=line))
            record.last = line
            ts = entry.get("ts")
            if isinstance(ts, int | float) and not isinstance(ts, bool):
                record.last_ts = float(ts) if record.last_ts is None else max(record.last_ts, float(ts))
            if ending:
                record.closed = True
                record.end = _decode(entry.get("stop_max"))
                record.review = _review(entry.get("review"))
                continue
            score = _decode(entry.get("score"))
            call_id = str(entry.get("call_id"))
            record.scores[call_id] = score  # a re-decision (after probes) replaces the earlier one, in place

    def deployed(self, threshold: float, bound: OpenBound | None = None) -> Deployed:
        """The sessions so far, as :func:`deployed_sessions` takes them."""
        from guard.recorder import stop_max

        started = sorted(self.sessions.items(), key=lambda item: item[1].first)
        total = self.total
        stale = {
            sid for sid, s in started if not s.closed and bound is not None and bound.past(total - s.last, s.last_ts)
        }
        cut = next((k for k, (sid, s) in enumerate(started) if not s.closed and sid not in stale), len(started))
        closed = started[:cut]
        stats = tuple(s.end if s.end is not None else stop_max(s.scores.values(), threshold) for _, s in closed)
        return Deployed(
            sessions=tuple(sid for sid, _ in closed),
            statistics=stats,
            call_ids=tuple(frozenset(s.scores) for _, s in closed),
            ignored=self.ignored,
            open_sessions=sum(1 for _, s in started if not s.closed),
            reviews=tuple(s.review for _, s in closed),
            waiting=sum(1 for _, s in started[cut:] if s.closed),
            blocked_by=started[cut][0] if cut < len(started) else None,
            waiting_ids=frozenset(sid for sid, s in started[cut:] if s.closed),
            waiting_picked=frozenset(sid for sid, s in started[cut:] if s.closed and s.review and s.review[0]),
            other_ids=frozenset(self.others - self.sessions.keys()),
            open_past_bound=tuple(sid for sid, _ in started if sid in stale),
            bound=bound,
        )


def _review(value: Any) -> tuple[bool, float] | None:
    """A ``session_end`` entry's ``review`` member (guard.review); GuardError if malformed."""
    if value is None:
        return None
    picked, p = (value.get("picked"), value.get("p")) if isinstance(value, dict) else (None, None)
    if not isinstance(picked, bool) or isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
        raise GuardError(f"audit session_end review {value!r}: expected {{'picked': bool, 'p': p in (0, 1]}}")
    return picked, float(p)


def sampled_terms(labels_path: str, deployed: Deployed) -> tuple[list[str], list[float], float, int]:
    """Inverse-propensity terms under review sampling: ``(picked/p)·L`` per closed session in session order.

    Unpicked sessions are 0 terms; the stream stops before the first picked session without a label
    (returned: how many picked sessions wait for one).  A label of an unpicked session, or a log
    mixing sampled and unsampled sessions, is refused (fail closed: either would bias the test).
    Labels of picked sessions that wait behind an open one are kept for a later run, not read now, and
    labels of sessions decided under other artifacts belong to their own streams.
    """
    from guard.calibration.risk_monitor import label_loss
    from guard.ledger.labels import read_labels

    stale = set(deployed.open_past_bound)
    if any(r is None for sid, r in zip(deployed.sessions, deployed.reviews, strict=True) if sid not in stale):
        raise GuardError("audit log mixes sessions with and without review sampling; monitor them separately")
    labels = read_labels(labels_path)
    picked = {sid for sid, r in zip(deployed.sessions, deployed.reviews, strict=True) if r is not None and r[0]}
    stray = sorted(
        (lab for sid, lab in labels.items() if sid not in picked | deployed.waiting_picked | deployed.other_ids),
        key=lambda lab: lab.line,
    )
    if stray:
        raise GuardError(
            f"{labels_path}:{stray[0].line}: episode: {stray[0].episode!r} is not a closed session picked for "
            f"review ({len(stray)} such label(s)); labels of unpicked sessions would bias the risk monitor"
        )
    order: list[str] = []
    terms: list[float] = []
    upper = 1.0
    for k, (sid, review) in enumerate(zip(deployed.sessions, deployed.reviews, strict=True)):
        if review is None:  # open past the bound: no session_end, so no recorded pick; the stream stops here
            return order, terms, upper, sum(1 for s in deployed.sessions[k:] if s in picked)
        if review[0] and sid not in labels:
            return order, terms, upper, sum(1 for s in deployed.sessions[k:] if s in picked)
        upper = max(upper, 1.0 / review[1])
        loss = (
            label_loss(
                labels[sid], deployed.call_ids[k], len(deployed.call_ids[k]), f"{labels_path}:{labels[sid].line}"
            )
            if review[0]
            else 0.0
        )
        order.append(sid)
        terms.append(loss / review[1] if review[0] else 0.0)
    return order, terms, upper, 0


def deployed_statistics(entries: list[dict[str, Any]], checksum: str, threshold: float) -> tuple[list[float], int]:
    """Per closed session, its statistic in session-start order; and the entries of other artifacts."""
    deployed = deployed_sessions(entries, checksum, threshold)
    return list(deployed.statistics), deployed.ignored


def realised_losses(labels_path: str, deployed: Deployed) -> tuple[list[str], list[float]]:
    """The labelled closed sessions in session-start order and each one's realised loss (GuardError on bad labels).

    Labels of closed sessions that wait behind an open one are kept for a later run, not read now, and
    labels of sessions decided under other artifacts belong to their own streams.
    """
    from guard.calibration.risk_monitor import label_loss
    from guard.ledger.labels import read_labels

    labels = read_labels(labels_path)
    known = {sid: k for k, sid in enumerate(deployed.sessions)}
    unknown = sorted(
        (
            lab
            for sid, lab in labels.items()
            if sid not in known and sid not in deployed.waiting_ids | deployed.other_ids
        ),
        key=lambda lab: lab.line,
    )
    if unknown:
        raise GuardError(
            f"{labels_path}:{unknown[0].line}: episode: {unknown[0].episode!r} is not a closed session decided under "
            f"the artifact ({len(unknown)} label(s) name no such session)"
        )
    order = sorted((sid for sid in labels if sid in known), key=lambda sid: known[sid])
    losses = [
        label_loss(
            labels[sid],
            deployed.call_ids[known[sid]],
            len(deployed.call_ids[known[sid]]),
            f"{labels_path}:{labels[sid].line}",
        )
        for sid in order
    ]
    return order, losses


__all__ = [
    "OPEN_BOUND_ENTRIES",
    "OPEN_BOUND_SECONDS",
    "Deployed",
    "OpenBound",
    "SessionRecord",
    "SessionTally",
    "UnitIds",
    "deployed_sessions",
    "deployed_statistics",
    "realised_losses",
    "sampled_terms",
]
