"""Redaction for the audit log and decision messages: hashed argument values, scrubbed texts.

Argument values are hashed unless the policy lists the argument in ``audit.raw_args`` — with an
HMAC under the audit key when the sink has one (``AuditLog(path, key=...)``), so that short values
(PINs, codes) cannot be found by hashing guesses; without a key, with SHA-256.  Every other string
of an entry (call ids, messages, errors, SafeCommit's log down to its probe calls' ids) goes
through the same :class:`Redactor`; the name of a tool the policy does not know is replaced by its
hash everywhere in the entry.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from guard.evidence.bitset import members
from guard.limits import MAX_ARG_CHARS, MAX_DEPTH
from guard.records import RecordKind

if TYPE_CHECKING:
    from guard.protocols import SessionState as Session


def is_text(value: str) -> bool:
    """False when ``value`` holds a lone surrogate (not valid Unicode, cannot be audited as UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def hash_value(value: Any, key: bytes | None = None) -> str:
    """A short, stable hash of a value for the audit log (``hmac-sha256:`` under ``key``, else ``sha256:``)."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):  # mixed key types, cycles, deep nesting
        try:
            text = repr(value)
        except RecursionError:
            text = f"<{type(value).__name__} nested too deeply to hash>"
    data = text.encode("utf-8", "surrogatepass")
    if key is not None:
        return "hmac-sha256:" + hmac.new(key, data, hashlib.sha256).hexdigest()[:32]
    return "sha256:" + hashlib.sha256(data).hexdigest()[:32]


def redact_args(args: Any, raw_names: tuple[str, ...], key: bytes | None = None) -> Any:
    """Argument values hashed, except for names the policy allows raw (and that can be written as JSON text)."""
    if not isinstance(args, Mapping):
        return hash_value(repr(args), key)
    return {safe_text(str(k)): (v if k in raw_names and _writable(v) else hash_value(v, key)) for k, v in args.items()}


def _writable(value: Any) -> bool:
    """Whether ``value`` can go into the audit line as it is (JSON, finite, valid UTF-8)."""
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return False
    return True


# --------------------------------------------------------------------------- redaction

_REDACTED = "[redacted]"
MAX_ERROR_CHARS = 1000
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
        self.node = node if node is not None and node in records and records[node].kind is RecordKind.PROPOSAL else None
        self._values: list[str] | None = None
        self._grams: set[str] = set()

    def redact(self, text: str) -> str:
        """See :func:`redact_text`."""
        if not isinstance(text, str) or not text:
            return text
        if len(text) > MAX_ERROR_CHARS:  # value-token regexes backtrack on long runs: scan a bounded text
            text = text[:MAX_ERROR_CHARS] + "...[clipped]"
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
        grams, index, facts = self._grams, graph.index, graph.facts
        marked = graph.flagged_bits("private") | (1 << self.node if self.node is not None else 0)
        for i in range(len(text) - k + 1):
            window = text[i : i + k]
            if window in grams or index.gram_bits(window) & marked:
                spans.append((i, i + k))
        for token in graph.index.tokens_in(text):
            if any(facts[n].private for n in members(graph.index.tokens.get(token, 0)) if n in facts):
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


def redact_safecommit(
    log: Mapping[str, Any] | None,
    raw_names: tuple[str, ...],
    key: bytes | None = None,
    redact: Callable[[str], str] | None = None,
) -> dict[str, Any] | None:
    """SafeCommit's log for the audit: replacement arguments hashed like the proposal's, other strings redacted."""
    if log is None:
        return None
    out = dict(scrub_tree(log, redact) if redact is not None else log)
    replacement = log.get("replacement")
    if isinstance(replacement, Mapping) and "args" in replacement:
        outer = scrub_tree({k: v for k, v in replacement.items() if k != "args"}, redact) if redact else replacement
        out["replacement"] = {**outer, "args": redact_args(replacement["args"], raw_names, key)}
    return out


def scrub_tree(value: Any, redact: Callable[[str], str], depth: int = 0) -> Any:
    """``value`` with every string (mapping keys too) passed through ``redact``; deeper than MAX_DEPTH: dropped."""
    if isinstance(value, str):
        return redact(value)
    if depth > MAX_DEPTH:
        return _REDACTED
    if isinstance(value, Mapping):
        return {redact(str(k)): scrub_tree(v, redact, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_tree(v, redact, depth + 1) for v in value]
    return value


def name_masker(name: Any, key: bytes | None) -> tuple[str, Callable[[str], str]]:
    """For a tool name the policy does not know: its hash marker, and a function replacing it in texts.

    The name is replaced as given, as ``repr`` shows it (also clipped to 200 characters) and as JSON
    escapes it, so a short private code in the name cannot survive in a message.
    """
    text = name if isinstance(name, str) else _repr(name)
    marker = f"<unknown tool {hash_value(text, key)}>"
    shown = _repr(text)
    forms = sorted(
        {f for f in (text, shown, shown[:200], shown[1:-1], json.dumps(text)[1:-1]) if len(f) >= 1},
        key=len,
        reverse=True,
    )

    def mask(value: str) -> str:
        for form in forms:
            value = value.replace(form, marker)
        return value

    return safe_text(marker), mask


def _repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not break the audit entry
        return f"<unrepresentable {type(value).__name__}>"
    return text if isinstance(text, str) else f"<{type(value).__name__}>"


def safe_text(value: str) -> str:
    """``value`` with lone surrogates escaped, so the entry encodes as UTF-8."""
    return value if is_text(value) else value.encode("utf-8", "backslashreplace").decode("utf-8")
