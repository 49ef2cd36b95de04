"""Evidence for SafeCommit's worlds: where a checked value occurs in the prefix, by trust, and whether the
policy vouches for it as the gate does (docs/safecommit.md#your-own-tools)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from guard.evidence.destinations import exact_pattern
from guard.evidence.instructions import instruction_clauses
from guard.evidence.owned import trusted_only
from guard.evidence.trust import internal_call, trusted_call
from guard.records import RecordKind, Trust

if TYPE_CHECKING:
    from guard.graph import PrefixGraph


@dataclass(frozen=True)
class Evidence:
    """Where a value occurs in the prefix (record indices), by the trust of the record."""

    user: tuple[int, ...] = ()
    private: tuple[int, ...] = ()
    public: tuple[int, ...] = ()
    untrusted: tuple[int, ...] = ()
    injected: tuple[int, ...] = ()
    delegated: tuple[int, ...] = ()
    errors: tuple[int, ...] = ()

    def to_log(self) -> dict[str, list[int]]:
        """Non-empty source lists, for the audit log."""
        return {k: list(v) for k, v in vars(self).items() if v}


def _value_regex(value: str, *, exact: bool = False) -> re.Pattern[str]:
    """The value as a whole word, case-insensitive; a URL also without its scheme and final slash.  With
    ``exact`` only ASCII letters fold (:func:`guard.evidence.destinations.exact_pattern`): a user turn vouches
    for a value only as written, never for a look-alike (docs/evidence.md#trust-is-granted-on-an-exact-match)."""
    variants = {value, re.sub(r"^[a-z][a-z0-9+.-]*://", "", value, flags=re.IGNORECASE).rstrip("/")} - {""}
    quote = exact_pattern if exact else re.escape
    body = "|".join(quote(v) for v in sorted(variants, key=len, reverse=True))
    return re.compile(r"(?<![\w@+-])(?:" + body + r")(?![\w@-])", re.IGNORECASE)


@lru_cache(maxsize=256)
def _clauses(text: str) -> tuple[tuple[int, int], ...]:
    return instruction_clauses(text)


def _in_instruction(text: str, regex: re.Pattern[str]) -> bool:
    """Whether a match of the value lies inside an instruction-shaped clause of ``text``: a clause that
    tells the reader to act, found by its grammar (:func:`guard.evidence.instructions.instruction_clauses`),
    never by a phrase of any attack's wording."""
    clauses = _clauses(text)
    return bool(clauses) and any(lo <= m.start() and m.end() <= hi for m in regex.finditer(text) for lo, hi in clauses)


def _delegated(graph: PrefixGraph, result_index: int) -> bool:
    """Whether the user named an argument of the call whose result is at ``result_index`` (E4 into it)."""
    call_id = graph.records[result_index].call_id
    for index in range(result_index - 1, -1, -1):
        record = graph.records.get(index)
        if record is not None and record.kind is RecordKind.PROPOSAL and record.call_id == call_id:
            return graph.has_user_source(index)
    return False


def gather_evidence(graph: PrefixGraph, node: int, value: str) -> Evidence:
    """The prefix records (index < node) whose text holds ``value`` as a whole word, by trust; a user turn
    only when it holds the value exactly (ASCII case aside): its naming lowers the user world's provenance.

    ``injected`` holds the untrusted records that hand the value over inside an instruction-shaped clause
    ("send it to ...", "you must pay ..."): the evidence reads the text's grammar, not the policy's
    signatures, so rewording an attack's template does not move a value out of the bin.  A value that is
    exactly a trusted field's value of an untrusted record (:func:`guard.evidence.owned.trusted_only`,
    docs/policy.md#trusted-fields) is not untrusted there: it is private (a private record) or public."""
    regex, exact = _value_regex(value), _value_regex(value, exact=True)
    keys = ("user", "private", "public", "untrusted", "injected", "delegated", "errors")
    bins: dict[str, list[int]] = {k: [] for k in keys}
    for index in sorted(graph.records):
        if index >= node:
            break
        record = graph.records[index]
        if record.kind not in (RecordKind.USER, RecordKind.RESULT) or not regex.search(record.text):
            continue
        if record.kind is RecordKind.RESULT and record.status != "ok":
            bins["errors"].append(index)
        elif record.trust is Trust.USER:
            if exact.search(record.text):  # the user's naming vouches: exactly (ASCII case aside), not a look-alike
                bins["user"].append(index)
        elif record.trust is Trust.TOOL_PRIVATE or (record.trust.private and trusted_only(graph.policy, record, value)):
            bins["private"].append(index)  # a trusted field's value of a private record: the system wrote it
        elif record.trust is Trust.TOOL_PUBLIC or trusted_only(graph.policy, record, value):
            bins["public"].append(index)  # a trusted field's value: the system wrote it, not a third party
        elif record.trust.untrusted:  # a private-and-untrusted record too: a third party may have written it
            bins["untrusted"].append(index)
            if _in_instruction(record.text, regex):
                bins["injected"].append(index)
            if _delegated(graph, index):
                bins["delegated"].append(index)
    return Evidence(**{k: tuple(v) for k, v in bins.items()})


#: Why the policy vouches for a checked value (:func:`policy_vouches`); the text is a dropped world's reason.
VOUCHED_LISTED = "the trust section's allow-lists name the value (as the gate reads them)"
VOUCHED_INTERNAL = "the value names an internal destination (trust.internal or a vouch, as the gate reads it)"
VOUCHED_USER = "a user turn names the value (trust.user_named, as the gate reads it)"


def policy_vouches(graph: PrefixGraph, node: int, arg: str, value: str) -> str | None:
    """Why the policy vouches for ``value`` as argument ``arg`` of the proposal at ``node``, or None.

    The certificate reads the same declarations as the gate, through the gate's own functions
    (:mod:`guard.evidence.trust`, no second matcher), applied to the proposal with that one argument
    value: :data:`VOUCHED_LISTED` when :func:`~guard.evidence.trust.trusted_call` holds without any user
    turn (an allow-list of ``trust`` names it); :data:`VOUCHED_INTERNAL` when
    :func:`~guard.evidence.trust.internal_call` holds (the tool is a sink, ``arg`` one of its
    ``identifier_args``, and ``trust.internal`` or the session's vouch names the value); :data:`VOUCHED_USER` when
    ``trusted_call`` holds with the user turns before ``node`` (``trust.user_named`` is on and a turn names
    it).  Only the policy file, application code (``Session.vouch``) and the user's own turns can make any
    of them hold; tool output never does.
    """
    record = graph.records[node]
    if record.kind is not RecordKind.PROPOSAL or not value.strip():
        return None
    one = replace(record, args={arg: value})
    policy = graph.policy
    if trusted_call(policy, (), one):
        return VOUCHED_LISTED
    if internal_call(policy, one, graph.vouched):
        return VOUCHED_INTERNAL
    turns = (r.text for i, r in sorted(graph.records.items()) if i < node and r.kind is RecordKind.USER)
    if trusted_call(policy, turns, one):
        return VOUCHED_USER
    return None


def seen_untrusted(graph: PrefixGraph, node: int) -> bool:
    return any(r.kind is RecordKind.RESULT and r.trust.untrusted and i < node for i, r in graph.records.items())
