"""The circuit breaker: on a monitor's alarm a running guard switches to its fallback, audited.

The breaker owns the gate's state (docs/monitoring.md#the-circuit-breaker): the calibrated threshold,
the fallback, and whether, when and why it tripped, as one immutable :class:`GateState` snapshot that
it replaces under its lock.  :attr:`guard.runtime.Guard.threshold` reads it (it cannot be assigned),
so every view of a guard (:meth:`guard.runtime.Guard.view`) sees the same effective threshold, and a
trip seen by any view switches them all.

:meth:`Breaker.trip` (thread-safe, idempotent) switches to the fallback and writes one audit entry
``{"event": "breaker", "kind": "breaker", "reason", "from", "to"}`` *before* the switch is reported;
if that write fails the breaker trips anyway (fail closed) and the failure is logged.  The fallback is
one of:

- ``escalate`` (policy ``calibration.fallback: escalate``, the default; ``fallback=-inf`` or
  ``"escalate"``): every call of a sink or of a tool with a side effect (every call the ledger can
  charge; a tool the policy does not know counts as one) escalates, :meth:`Breaker.escalation`; reads
  keep the calibrated threshold, so the agent can still look things up while a human decides each
  action.  ``to`` is ``{"threshold": <unchanged>, "artifact": null, "escalate": "sinks and side effects"}``;
- ``escalate_risky`` (``calibration.fallback: escalate_risky``; ``fallback="escalate_risky"``): only a
  call of a tool the policy does not know, of an irreversible tool, or a sink or side effect with
  private or untrusted provenance (the gate's ``risky`` test, :func:`guard.provenance.risky_provenance`:
  an ancestor in the prefix graph, a selected record, or a record sharing a value with the call even
  where an edge rule dropped the edge) escalates, and so does a sink or side effect whose provenance
  cannot be determined (fail closed).  A read keeps the calibrated threshold whatever its provenance,
  so escalate_risky never escalates a call ``escalate`` would let run; every other call keeps the
  calibrated threshold and SafeCommit.  ``to.escalate`` is
  ``"calls with private or untrusted provenance, irreversible effects or unknown tools"``;
- a stricter artifact's threshold, which replaces the guard's (never a looser one).

A running process trips on an alarm without a restart through a *trip file*: ``carbguard monitor
... --trip FILE`` writes :func:`trip_text` there on an alarm, and a guard built with
``trip_file=FILE`` checks the file's ``os.stat`` at each decision (one syscall; the file is read only
when its identity, mtime, ctime or size changed, or it changed too recently for the stat to tell).
The file's format is exact (:func:`parse_trip`): the UTF-8 bytes of ``json.dumps({"artifact": ID,
"reason": TEXT}) + "\\n"`` with ``ID`` a non-empty string (or ``null``: every artifact) and ``TEXT`` a
string.  Only a file in exactly that form naming *another* artifact id is ignored; one naming the
guard's artifact (or ``null``) trips it, and so does every other file that exists at the path (not a
regular file, unreadable, too large, not UTF-8, a BOM, not that JSON, another key set or order,
duplicate keys, other types, other spacing, trailing bytes).  The guard stays tripped for its
lifetime; a guard started with the same artifact and the same trip file trips again at its first
decision, so only a new calibration (a different artifact id) lifts it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard.decision import threshold_words
from guard.jsonio import encode_float, loads_strict
from guard.policy import FALLBACK_WORDS, Effect, ToolSpec
from guard.protocols import AuditSink

LOG = logging.getLogger("guard.breaker")

MAX_TRIP_BYTES = 64 * 1024
"""A trip file larger than this is not one :func:`trip_text` writes: it trips without being read."""

MAX_REASON_CHARS = 1000
""":func:`trip_text` keeps this much of the reason (the audit entry keeps 400 characters of it)."""

RACY_NS = 2_000_000_000
"""A trip file changed less than this before it was read is read again at the next decision: a
rewrite within the file system's timestamp granularity can leave mtime, ctime and size unchanged."""


ESCALATE = "escalate"
"""The default fallback: every sink and side-effectful call escalates after a trip."""

ESCALATE_RISKY = "escalate_risky"
"""The fallback that keeps the safe part of the work going: only risky calls escalate after a trip."""

_ALL_ACTIONS = "circuit breaker tripped: every sink and side-effectful call escalates until recalibration"


class TripFileError(ValueError):
    """A trip file that is not exactly in the format :func:`trip_text` writes."""


@dataclass(frozen=True, slots=True)
class GateState:
    """One immutable snapshot of the gate's threshold and the circuit breaker.

    ``threshold`` is the effective threshold the gate compares scores with (``calibrated`` until a
    trip to a stricter artifact); ``fallback_word`` is ``"escalate"`` or ``"escalate_risky"`` when the
    fallback is one of those words (``fallback`` is then ``-inf``), None for a stricter artifact's
    threshold; ``tripped``, ``when`` (``time.time()`` of the trip), ``reason`` and ``escalate_actions``
    (the ``escalate`` or ``escalate_risky`` fallback is in force) describe the trip.
    """

    threshold: float
    calibrated: float
    artifact_id: str | None
    fallback: float
    fallback_id: str | None
    tripped: bool = False
    escalate_actions: bool = False
    reason: str | None = None
    when: float | None = None
    fallback_word: str | None = None


@dataclass(frozen=True, slots=True)
class TripAlarm:
    """A well-formed trip file: the artifact it names (None: every artifact) and the alarm's reason."""

    artifact: str | None
    reason: str


class Breaker:
    """The owner of one guard's gate state: its threshold, fallback, trip file and whether it has tripped.

    Every view of a guard shares its breaker (docs/monitoring.md#the-circuit-breaker); the breaker
    never holds a guard.  :attr:`state` is the current :class:`GateState` (replaced, never mutated).
    ``fallback`` is a stricter artifact's threshold, ``-inf`` (the same as ``"escalate"``) or one of the
    words ``"escalate"`` and ``"escalate_risky"`` (:data:`guard.policy.FALLBACK_WORDS`).
    """

    def __init__(
        self,
        threshold: float,
        artifact_id: str | None,
        fallback: float | str,
        fallback_id: str | None,
        trip_file: str | Path | None,
    ) -> None:
        if math.isnan(threshold):
            raise ValueError("threshold must be a number or ±inf, not NaN")
        word: str | None
        if isinstance(fallback, str):
            if fallback not in FALLBACK_WORDS:
                words = " or ".join(repr(w) for w in FALLBACK_WORDS)
                raise ValueError(f"unknown fallback {fallback!r}: use {words}, or a stricter artifact's threshold")
            word, fallback = fallback, -math.inf
        elif math.isnan(fallback):
            raise ValueError("fallback threshold must be a number or -inf, not NaN")
        else:
            word = ESCALATE if math.isinf(fallback) and fallback < 0 else None
        self._state = GateState(
            threshold=float(threshold),
            calibrated=float(threshold),
            artifact_id=artifact_id,
            fallback=float(fallback),
            fallback_id=fallback_id,
            fallback_word=word,
        )
        self._trip_file = None if trip_file is None else Path(trip_file)
        self._seen: tuple[int, ...] | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ read-only state

    @property
    def state(self) -> GateState:
        """The current gate state (an immutable snapshot)."""
        return self._state

    @property
    def threshold(self) -> float:
        """The effective threshold."""
        return self._state.threshold

    def threshold_in_force(self) -> tuple[float, str]:
        """The effective threshold and how a refusal names it (:func:`guard.decision.threshold_words`)."""
        s = self._state  # one snapshot
        return s.threshold, threshold_words(s.tripped, s.fallback_id if s.tripped else s.artifact_id)

    @property
    def tripped(self) -> bool:
        """Whether the breaker has tripped."""
        return self._state.tripped

    @property
    def reason(self) -> str | None:
        """Why it tripped (None before a trip)."""
        return self._state.reason

    @property
    def fallback(self) -> float:
        """The fallback threshold (``-inf``: one of the escalate fallbacks, :attr:`fallback_word`)."""
        return self._state.fallback

    @property
    def fallback_word(self) -> str | None:
        """``"escalate"`` or ``"escalate_risky"``, None for a stricter artifact's threshold."""
        return self._state.fallback_word

    @property
    def fallback_id(self) -> str | None:
        """The fallback artifact's id (None for ``escalate``)."""
        return self._state.fallback_id

    @property
    def escalate_actions(self) -> bool:
        """Whether the tripped ``escalate`` or ``escalate_risky`` fallback is in force."""
        return self._state.escalate_actions

    @property
    def trip_file(self) -> Path | None:
        """The trip file this breaker polls (None: none)."""
        return self._trip_file

    # ------------------------------------------------------------------ switching

    def trip(self, reason: str, audit: AuditSink | None) -> bool:
        """Switch to the fallback and audit it to ``audit``; False if it had already tripped."""
        with self._lock:
            before = self._state
            if before.tripped:
                return False
            text = str(reason)[:500]
            word = before.fallback_word
            actions = word is not None
            after = before.threshold if actions else min(before.fallback, before.threshold)  # never looser
            to: dict[str, Any] = {"threshold": encode_float(after), "artifact": before.fallback_id}
            if word is not None:
                to["escalate"] = FALLBACK_WORDS[word]  # says which fallback applies
            entry: dict[str, Any] = {
                "event": "breaker",
                "kind": "breaker",
                "reason": text,
                "from": {"threshold": encode_float(before.threshold), "artifact": before.artifact_id},
                "to": to,
            }
            self._state = dataclasses.replace(
                before, threshold=after, tripped=True, escalate_actions=actions, reason=text, when=time.time()
            )
            if audit is not None:
                try:
                    audit.write(entry)
                except Exception as exc:  # noqa: BLE001 - tripped anyway: the stricter side
                    LOG.error("breaker entry not written: %s", exc)
            return True

    def escalation(self, spec: ToolSpec | None, risky: Callable[[], bool] | None = None) -> str | None:
        """Why the tripped fallback escalates a call of this tool (the decision's message), None if it does not.

        ``escalate``: a sink or a side effect (a tool the policy does not know counts as one); the
        message is the one it always was.  ``escalate_risky``: a tool the policy does not know, an
        irreversible effect, or a sink or side effect with private or untrusted provenance: ``risky()``
        (the gate's test, :func:`guard.provenance.risky_provenance`) is not exactly ``False``; a read (a
        tool that is neither a sink nor has a side effect) never escalates here, whatever its provenance,
        and ``risky`` is not asked for it.  Fail closed: no ``risky``, or one that raises, escalates a sink
        or side effect; the message names the fallback and the cause.
        """
        state = self._state
        if not state.escalate_actions:
            return None
        if state.fallback_word != ESCALATE_RISKY:
            return _ALL_ACTIONS if spec is None or acts(spec) else None
        if spec is None:
            cause = "a call of a tool the policy does not know"
        elif spec.effect is Effect.IRREVERSIBLE:
            cause = "an irreversible call"
        elif not acts(spec):
            return None  # a read keeps the calibrated threshold whatever its provenance: look things up
        else:
            try:
                found = None if risky is None else risky()
            except Exception as exc:  # noqa: BLE001 - provenance that cannot be determined escalates (fail closed)
                LOG.warning("provenance not determined, escalating: %s", type(exc).__name__)
                found = None
            if found is False:
                return None
            if found is True:
                cause = "a call with private or untrusted provenance"
            else:
                cause = "a call whose provenance cannot be determined"
        return f"circuit breaker tripped (fallback {ESCALATE_RISKY}): {cause} escalates until recalibration"

    def escalates(self, spec: ToolSpec | None, risky: Callable[[], bool] | None = None) -> bool:
        """Whether the tripped fallback escalates a call of this tool (:meth:`escalation` is not None)."""
        return self.escalation(spec, risky) is not None

    def poll(self, audit: AuditSink | None) -> None:
        """Trip (audited to ``audit``) if the trip file, changed since the last look, is not exactly a
        well-formed alarm naming another artifact; never raises."""
        path = self._trip_file
        if path is None or self._state.tripped:
            return
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return
        except Exception as exc:  # noqa: BLE001 - a trip file that cannot be checked trips (fail closed)
            self.trip(f"trip file {path} cannot be checked: {type(exc).__name__}", audit)
            return
        if _identity(st) == self._seen:
            return
        try:
            data, seen = _read(path)
            alarm = parse_trip(data)
        except Exception as exc:  # noqa: BLE001 - anything not read exactly trips (fail closed)
            detail = str(exc) if isinstance(exc, TripFileError) else type(exc).__name__
            self.trip(f"trip file {path} unreadable: {detail}", audit)
            return
        if alarm.artifact is None or alarm.artifact == self._state.artifact_id:
            self.trip(f"trip file {path}: {alarm.reason[:400]}", audit)
            return
        self._seen = seen  # another artifact's alarm: not read again until the file changes


def acts(spec: ToolSpec) -> bool:
    """Whether a call of ``spec``'s tool is one the ledger can charge: a sink or a side effect (not a read)."""
    return spec.is_sink or spec.effect is not Effect.NONE


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def _read(path: Path) -> tuple[bytes, tuple[int, ...] | None]:
    """The bytes of the regular file at ``path`` (at most one more than :data:`MAX_TRIP_BYTES`) and its
    identity to remember, None when the file changed during the read or too recently to trust its stat."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise TripFileError("not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_TRIP_BYTES:
            chunk = os.read(fd, MAX_TRIP_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    seen = _identity(after)
    racy = time.time_ns() - max(after.st_mtime_ns, after.st_ctime_ns) < RACY_NS
    return b"".join(chunks), None if racy or seen != _identity(before) else seen


def _render(artifact: str | None, reason: str) -> str:
    return json.dumps({"artifact": artifact, "reason": reason}) + "\n"


def parse_trip(data: bytes) -> TripAlarm:
    """The alarm of a trip file's bytes; :class:`TripFileError` unless they are exactly what
    :func:`trip_text` writes (docs/monitoring.md#the-circuit-breaker): the UTF-8 (no BOM) bytes of
    ``json.dumps({"artifact": ID, "reason": TEXT}) + "\\n"``, ``ID`` a non-empty string or null."""
    if len(data) > MAX_TRIP_BYTES:
        raise TripFileError(f"larger than {MAX_TRIP_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TripFileError("not UTF-8") from None
    try:
        value = loads_strict(text, "trip file")
    except Exception:  # noqa: BLE001 - every parse failure is the same verdict
        raise TripFileError("not strict JSON") from None
    if type(value) is not dict or list(value) != ["artifact", "reason"]:
        raise TripFileError('not a JSON object with exactly the keys "artifact" and "reason"')
    artifact, reason = value["artifact"], value["reason"]
    if not (artifact is None or (type(artifact) is str and artifact)):
        raise TripFileError('"artifact" is not a non-empty string or null')
    if type(reason) is not str:
        raise TripFileError('"reason" is not a string')
    if text != _render(artifact, reason):
        raise TripFileError("not in the exact form carbguard monitor writes")
    return TripAlarm(artifact, reason)


def trip_text(artifact_id: str, reason: str) -> str:
    """The content of a trip file naming ``artifact_id`` (the CLI writes it with its atomic output helper).

    ``reason`` is cut to :data:`MAX_REASON_CHARS` characters and a lone surrogate in it (a path that
    is not UTF-8) is written as its escape, so the file always parses (:func:`parse_trip`).
    """
    if type(artifact_id) is not str or not artifact_id:
        raise ValueError("a trip file names an artifact id: a non-empty string")
    if type(reason) is not str:
        raise ValueError("a trip file's reason is a string")
    text = reason[:MAX_REASON_CHARS].encode("utf-8", "backslashreplace").decode("utf-8")
    return _render(artifact_id, text)


__all__ = ["ESCALATE", "ESCALATE_RISKY", "Breaker", "GateState", "TripAlarm", "TripFileError", "acts", "parse_trip"]
__all__ += ["trip_text"]
