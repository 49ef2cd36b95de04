"""The stages of one decision (METHOD §1), each a small function; :func:`run_pipeline` reads top down."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from guard.decision import Decision, ProbeCall, Reason, Verdict
from guard.policy import Effect, Policy, ToolKind, ToolSpec
from guard.records import Record, RecordKind, Trust, proposal

if TYPE_CHECKING:
    from guard.runtime import Session

MAX_ARG_CHARS = 200_000
MAX_DEPTH = 32
_TRUST = {
    ToolKind.PRIVATE_SOURCE: Trust.TOOL_PRIVATE,
    ToolKind.PUBLIC_SOURCE: Trust.TOOL_PUBLIC,
    ToolKind.UNTRUSTED_SOURCE: Trust.TOOL_UNTRUSTED,
}


@dataclass(frozen=True, slots=True)
class Certification:
    """What the certify stage says about a side-effectful proposal under the threshold."""

    verdict: Verdict
    reason: Reason
    message: str
    probes: tuple[ProbeCall, ...] = ()
    log: Mapping[str, Any] | None = None


class Certifier(Protocol):
    """The SafeCommit stage (METHOD §10) as the runtime sees it."""

    def certify(self, session: Session, node: int, spec: ToolSpec) -> Certification:
        """Certify the proposal at ``node`` or refuse it."""
        ...


class PassThroughCertifier:
    """Used when a policy configures no SafeCommit: side-effectful proposals under λ̂ execute."""

    def certify(self, session: Session, node: int, spec: ToolSpec) -> Certification:
        """Always ``execute``."""
        return Certification(Verdict.EXECUTE, Reason.UNDER_THRESHOLD, "score under the threshold")


def default_certifier(policy: Policy) -> Certifier:
    """The certifier a policy configures."""
    if policy.safecommit is None:
        return PassThroughCertifier()
    from guard.safecommit.runtime import PolicyCertifier  # type: ignore[import-not-found,unused-ignore]

    certifier: Certifier = PolicyCertifier(policy)
    return certifier


def result_trust(policy: Policy, tool: str) -> Trust:
    """Trust of a tool's results, from the policy (unknown tools count as untrusted)."""
    spec = policy.tool(tool)
    if spec is None:
        return Trust.TOOL_UNTRUSTED
    return _TRUST.get(spec.source_kind, Trust.TOOL_PUBLIC)


# --------------------------------------------------------------------------- pipeline


class StageError(RuntimeError):
    """An exception inside a stage, re-raised with private values redacted from its message.

    ``kind`` is the original exception's class name; ``detail`` its message after
    :func:`redact_text`.  The original is kept as ``__cause__`` (never written anywhere).
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail


def run_pipeline(session: Session, tool: Any, args: Any, call_id: Any) -> Decision:
    """normalize → extend → select → score → gate → certify; one short loop of stages.

    An exception in a stage is re-raised as :class:`StageError`, whose message has the proposal's
    argument values, private-source spans and canary matches redacted (the runtime puts that message
    into the decision and the audit entry).
    """
    try:
        return _run_stages(session, tool, args, call_id)
    except Exception as exc:
        raise StageError(type(exc).__name__, redact_text(str(exc)[:_MAX_ERROR_CHARS], session, args)) from exc


def _run_stages(session: Session, tool: Any, args: Any, call_id: Any) -> Decision:
    guard = session.guard
    refusal = normalize(session, tool, args, call_id)
    if refusal is not None:
        return refusal
    node = extend(session, tool, args, call_id)
    selected = select(session, node)
    score, features = score_proposal(session, node, selected)
    base = Decision(
        verdict=Verdict.EXECUTE,
        reason=Reason.UNDER_THRESHOLD,
        message="score under the threshold",
        score=score,
        threshold=guard.threshold,
        features=features,
        selected=tuple(sorted(selected)),
        proposal_index=node,
        tool=tool,
        call_id=call_id,
    )
    if score > guard.threshold:
        return dataclasses.replace(
            base,
            verdict=Verdict.ESCALATE,
            reason=Reason.RISK_BUDGET,
            message=f"risk score {score:.3f} exceeds the calibrated threshold {guard.threshold:.3f}",
        )
    return certify(session, node, base)


def normalize(session: Session, tool: Any, args: Any, call_id: Any) -> Decision | None:
    """Refuse what the guard does not understand; None when the proposal is well-formed."""
    policy = session.guard.policy
    if not isinstance(call_id, str) or not call_id or not _is_text(call_id):
        message = "call id must be a non-empty string of valid Unicode"
        return _refusal(Verdict.ESCALATE, Reason.BAD_ARGUMENTS, message, tool, call_id)
    if not isinstance(tool, str) or policy.tool(tool) is None:
        message = f"tool {redact_text(_clip(tool), session, args)} is not in policy {policy.name!r}"
        return _refusal(policy.on_unknown, Reason.UNKNOWN_TOOL, message, tool, call_id)
    problem = _args_problem(args)
    if problem is not None:
        return _refusal(Verdict.ESCALATE, Reason.BAD_ARGUMENTS, problem, tool, call_id)
    seen = session._proposals.get(call_id)
    if seen is not None and (seen.tool != tool or dict(seen.args) != json.loads(json.dumps(args))):
        message = f"call id {redact_text(_clip(call_id), session, args)} reused for another call"
        return _refusal(Verdict.ESCALATE, Reason.BAD_ARGUMENTS, message, tool, call_id)
    return None


def _is_text(value: str) -> bool:
    """False when ``value`` holds a lone surrogate (not valid Unicode, cannot be audited as UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _clip(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _args_problem(args: Any) -> str | None:
    if not isinstance(args, Mapping):
        return f"arguments must be a JSON object, got {type(args).__name__}"
    try:
        text = json.dumps(args, allow_nan=False, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"arguments are not valid JSON: {str(exc)[:200]}"
    if not _is_text(text):
        return "arguments hold invalid Unicode (a lone surrogate)"
    if len(text) > MAX_ARG_CHARS:
        return f"arguments are {len(text)} characters of JSON; the limit is {MAX_ARG_CHARS}"
    if _depth(args) > MAX_DEPTH:
        return f"arguments nest deeper than {MAX_DEPTH} levels"
    return None


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, Mapping):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def extend(session: Session, tool: str, args: Mapping[str, Any], call_id: str) -> int:
    """Add the proposal as a node (once per call id; a re-decision after probes reuses it)."""
    seen = session._proposals.get(call_id)
    if seen is not None:
        return seen.index
    record = proposal(session.next_index, tool, args, call_id)
    session.graph.add(record)
    session._proposals[call_id] = record
    return record.index


def select(session: Session, node: int) -> frozenset[int]:
    """The selector's evidence, checked: a subset of the earlier records."""
    selected = session.guard.selector.select(session.graph, node, session.session_id)
    if not isinstance(selected, frozenset | set) or any(
        not isinstance(n, int) or n >= node or n not in session.graph.records for n in selected
    ):
        raise TypeError(f"selector returned {type(selected).__name__} that is not a subset of the prefix")
    return frozenset(selected)


def score_proposal(session: Session, node: int, selected: frozenset[int]) -> tuple[float, Mapping[str, bool]]:
    """The scorer's number, checked to be finite."""
    out = session.guard.scorer.score(session.graph, node, selected)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], int | float)):
        raise TypeError(f"scorer returned {type(out).__name__}, expected (float, features)")
    score, features = out
    if not math.isfinite(score):
        raise ValueError(f"scorer returned a non-finite score {score!r}")
    return float(score), features


def certify(session: Session, node: int, base: Decision) -> Decision:
    """SafeCommit for side-effectful tools; read-only tools execute."""
    spec = session.guard.policy.tools[base.tool]
    if spec.effect is Effect.NONE:
        return base
    cert = session.guard.certifier.certify(session, node, spec)
    if not isinstance(cert, Certification):
        raise TypeError(f"certifier returned {type(cert).__name__}, expected Certification")
    return dataclasses.replace(
        base, verdict=cert.verdict, reason=cert.reason, message=cert.message, probes=cert.probes, safecommit=cert.log
    )


# --------------------------------------------------------------------------- refusals and audit


def _refusal(verdict: Verdict, reason: Reason, message: str, tool: Any, call_id: Any) -> Decision:
    return Decision(
        verdict=verdict,
        reason=reason,
        message=message,
        score=None,
        threshold=None,
        tool=tool if isinstance(tool, str) else repr(tool)[:200],
        call_id=call_id if isinstance(call_id, str) else repr(call_id)[:200],
    )


def internal_error(tool: Any, call_id: Any, exc: BaseException, threshold: float | None) -> Decision:
    """The fail-closed decision for any error inside the pipeline."""
    kind, detail = (exc.kind, exc.detail) if isinstance(exc, StageError) else (type(exc).__name__, str(exc))
    message = f"internal error, failing closed: {kind}: {detail[:500]}"
    return dataclasses.replace(
        _refusal(Verdict.ESCALATE, Reason.INTERNAL_ERROR, message, tool, call_id), threshold=threshold
    )


def with_latency(decision: Decision, latency_us: float) -> Decision:
    """The decision with its measured latency."""
    return dataclasses.replace(decision, latency_us=latency_us)


def hash_value(value: Any) -> str:
    """A short, stable hash of a value for the audit log."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):  # mixed key types, cycles, deep nesting
        try:
            text = repr(value)
        except RecursionError:
            text = f"<{type(value).__name__} nested too deeply to hash>"
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def redact_args(args: Any, raw_names: tuple[str, ...]) -> Any:
    """Argument values hashed, except for names the policy allows raw (and that can be written as JSON text)."""
    if not isinstance(args, Mapping):
        return hash_value(repr(args))
    return {_safe_text(str(k)): (v if k in raw_names and _writable(v) else hash_value(v)) for k, v in args.items()}


def _writable(value: Any) -> bool:
    """Whether ``value`` can go into the audit line as it is (JSON, finite, valid UTF-8)."""
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def audit_entry(session: Session, decision: Decision, args: Any, error: str | None) -> dict[str, Any]:
    """The audit entry of METHOD §12 (argument values hashed unless allowed raw)."""
    guard = session.guard
    raw_names = guard.policy.audit.raw_args
    known_tool = isinstance(decision.tool, str) and guard.policy.tool(decision.tool) is not None
    redact = Redactor(session, args, decision.proposal_index).redact
    return {
        "ts": time.time(),
        "session": _safe_text(session.session_id),
        "proposal_index": decision.proposal_index,
        "call_id": _safe_text(redact(decision.call_id)),
        "tool": _safe_text(decision.tool if known_tool else redact(decision.tool)),
        "args": redact_args(args, raw_names),
        "verdict": decision.verdict.value,
        "reason": decision.reason.value,
        "message": _safe_text(redact(decision.message)),
        "score": decision.score,
        "threshold": _finite_or_text(decision.threshold),
        "artifact": guard.artifact_id,
        "selected": list(decision.selected),
        "edges_in": _edges_in(session, decision.proposal_index),
        "features": dict(decision.features),
        "safecommit": _redact_safecommit(decision.safecommit, raw_names),
        "probes": [p.name or p.tool for p in decision.probes],
        "latency_us": round(decision.latency_us, 1),
        "error": _safe_text(redact(error)) if error is not None else None,
    }


# --------------------------------------------------------------------------- redaction

_REDACTED = "[redacted]"
_MAX_ERROR_CHARS = 1000
_MIN_VALUE_CHARS = 4
_MAX_LEAVES = 10_000
_MAX_GRAM_CHARS = MAX_ARG_CHARS


def redact_text(text: str, session: Session, args: Any) -> str:
    """``text`` with private values replaced by ``[redacted]``, for messages and errors that may echo them.

    Redacted: every occurrence of a proposal argument value (not allowed raw by the policy) of at
    least 4 characters (values shorter than ``min_span`` only as whole words), and every
    ``min_span``-character window of such a value (for the first ``MAX_ARG_CHARS`` characters of
    argument values; longer arguments are refused unread); every ``min_span``-character window and
    value token of a private-source record of the session; every match of the policy's canary
    patterns.  Texts longer than 1,000 characters are clipped first.  If redaction itself fails,
    the whole text is dropped.
    """
    return Redactor(session, args).redact(text)


class Redactor:
    """:func:`redact_text` for several texts of one decision (the argument values are read once).

    ``node`` is the proposal's index when it is in the graph: its k-grams are then already indexed
    and are not built again (they include raw-allowed arguments, which are then redacted too).
    """

    def __init__(self, session: Session, args: Any, node: int | None = None) -> None:
        self.session = session
        self.args = args
        records = session.graph.records
        self.node = node if node is not None and node in records and is_proposal(records[node]) else None
        self._values: list[str] | None = None
        self._grams: set[str] = set()

    def redact(self, text: str) -> str:
        """See :func:`redact_text`."""
        if not isinstance(text, str) or not text:
            return text
        if len(text) > _MAX_ERROR_CHARS:  # value-token regexes backtrack on long runs: scan a bounded text
            text = text[:_MAX_ERROR_CHARS] + "...[clipped]"
        try:
            spans = self._spans(text)
        except Exception:  # noqa: BLE001 - never let redaction fail a decision; drop the text instead
            return _REDACTED
        out, last = [], 0
        for start, end in _merged(spans):
            out += [text[last:start], _REDACTED]
            last = end
        return "".join([*out, text[last:]])

    def _read_values(self, k: int) -> list[str]:
        if self._values is None:
            self._values = []
            budget = _MAX_GRAM_CHARS
            for value in _secret_leaves(self.args, self.session.guard.policy.audit.raw_args):
                for variant in {value, repr(value)[1:-1]}:
                    if len(variant) < _MIN_VALUE_CHARS:
                        continue
                    self._values.append(variant)
                    if self.node is None and k <= len(variant) <= budget:
                        budget -= len(variant)
                        self._grams.update(variant[i : i + k] for i in range(len(variant) - k + 1))
        return self._values

    def _spans(self, text: str) -> list[tuple[int, int]]:
        policy = self.session.guard.policy
        graph = self.session.graph
        k = policy.graph.min_span
        spans: list[tuple[int, int]] = []
        for variant in self._read_values(k):
            spans.extend(_occurrences(text, variant, whole_word=len(variant) < k))
        grams, kgrams, facts, own = self._grams, graph.index.kgrams, graph.facts, self.node
        for i in range(len(text) - k + 1):
            window = text[i : i + k]
            nodes = kgrams.get(window, ())
            if window in grams or own in nodes or any(facts[n].private for n in nodes if n in facts):
                spans.append((i, i + k))
        for token in graph.index.tokens_in(text):
            if any(facts[n].private for n in graph.index.tokens.get(token, ()) if n in facts):
                spans.extend(_occurrences(text, token))
        for pattern in policy.scorer.canary_patterns:
            spans.extend((m.start(), m.end()) for m in re.finditer(pattern, text))
        return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching spans joined, in order."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _occurrences(text: str, value: str, whole_word: bool = False) -> Iterator[tuple[int, int]]:
    """Spans of ``value`` in ``text``; with ``whole_word``, not inside a longer word (short values)."""
    start = text.find(value)
    while start >= 0:
        end = start + len(value)
        inside = whole_word and (
            (start > 0 and text[start - 1].isalnum() and value[0].isalnum())
            or (end < len(text) and text[end].isalnum() and value[-1].isalnum())
        )
        if not inside:
            yield start, end
        start = text.find(value, start + 1)


def _secret_leaves(args: Any, raw_names: tuple[str, ...]) -> Iterator[str]:
    """Text of every argument leaf value whose argument the policy does not allow raw (bounded)."""
    if not isinstance(args, Mapping):
        if isinstance(args, str):
            yield args
        return
    stack: list[tuple[Any, int]] = [(v, 0) for k, v in args.items() if k not in raw_names]
    seen = 0
    while stack and seen < _MAX_LEAVES:
        value, depth = stack.pop()
        seen += 1
        if isinstance(value, Mapping) and depth < MAX_DEPTH:
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list | tuple) and depth < MAX_DEPTH:
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, str):
            yield value
        elif isinstance(value, int | float) and not isinstance(value, bool):
            yield str(value)


def _redact_safecommit(log: Mapping[str, Any] | None, raw_names: tuple[str, ...]) -> dict[str, Any] | None:
    """SafeCommit's log for the audit: the replacement call's arguments hashed like the proposal's."""
    if log is None:
        return None
    out = dict(log)
    replacement = out.get("replacement")
    if isinstance(replacement, Mapping) and "args" in replacement:
        out["replacement"] = {**replacement, "args": redact_args(replacement["args"], raw_names)}
    return out


def _edges_in(session: Session, node: int) -> list[list[Any]]:
    """``[source index, edge type]`` of every edge into the proposal (for reports)."""
    if node < 0 or node not in session.graph.records:
        return []
    return sorted([source, etype] for source, etype, _, _ in session.graph.edges_into(node))


def _safe_text(value: str) -> str:
    """``value`` with lone surrogates escaped, so the entry encodes as UTF-8."""
    return value if _is_text(value) else value.encode("utf-8", "backslashreplace").decode("utf-8")


def _finite_or_text(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return "inf" if value > 0 else "-inf"


def is_proposal(record: Record) -> bool:
    """Whether ``record`` is a proposal."""
    return record.kind is RecordKind.PROPOSAL
