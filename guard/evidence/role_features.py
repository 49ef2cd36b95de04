"""Role and graded evidence of a proposal: which argument carries what, from which kind of source, how much.

Every feature here reads the prefix (the records before the proposal), never the selection, and is
binary: a graded quantity enters as a few nested threshold indicators, so a non-negative weight on
each makes the score a non-decreasing step function of the quantity (one dot product, the fit and
the ceiling unchanged).  A value an earlier user turn also holds is the user's, not evidence of
provenance, and counts for no feature here.

Argument roles come from the policy: ``identifier_args`` are the recipient/identifier role, the
other ``payload_args`` the payload role.  Source kinds: *private* (a private tool's result) and
*untrusted* (an untrusted tool's result or observed content).

* ``recipient_from_untrusted`` / ``recipient_from_private``: an identifier argument reuses (E2/E3)
  a value of an earlier untrusted / private record;
* ``payload_from_untrusted`` / ``payload_from_private``: a payload argument does;
* ``payload_private_half`` / ``payload_private_most``: at least 1/2 / 4/5 of the payload characters
  lie in k-grams (k = ``min_span``) held by earlier private records; ``payload_untrusted_*`` the same
  for untrusted records;
* ``long_private_span`` / ``long_untrusted_span``: one argument holds a run of at least
  :data:`LONG_SPAN` characters covered by such k-grams (a long exact match is specific evidence);
* ``private_values_2``: the arguments carry at least two distinct value tokens (the policy's value
  patterns: addresses, IBANs, ...) held by earlier private records;
* ``private_relayed``: an argument reuses a record that is not itself private but descends from a
  private one (the value came at least two hops from its private source).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Protocol

from guard import features as table
from guard.evidence.kgrams import Key, window_keys
from guard.features import GRADED_FEATURES, ROLE_FEATURES
from guard.policy import ToolSpec

#: Which feature a (role, source kind) edge, a long run and a payload share of each kind turn on.
_FROM = {
    ("recipient", "untrusted"): table.RECIPIENT_FROM_UNTRUSTED.name,
    ("recipient", "private"): table.RECIPIENT_FROM_PRIVATE.name,
    ("payload", "untrusted"): table.PAYLOAD_FROM_UNTRUSTED.name,
    ("payload", "private"): table.PAYLOAD_FROM_PRIVATE.name,
}
_LONG = {"private": table.LONG_PRIVATE_SPAN.name, "untrusted": table.LONG_UNTRUSTED_SPAN.name}
_SHARE = {
    "private": (table.PAYLOAD_PRIVATE_HALF.name, table.PAYLOAD_PRIVATE_MOST.name),
    "untrusted": (table.PAYLOAD_UNTRUSTED_HALF.name, table.PAYLOAD_UNTRUSTED_MOST.name),
}
#: thresholds, fixed before any data was looked at: half, four fifths, 32 characters, two values.
HALF, MOST, LONG_SPAN, VALUES = 0.5, 0.8, 32, 2


class _Graph(Protocol):
    def edge_rules(self, node: int) -> list[tuple[str, str, int]]: ...
    def user_bits(self) -> int: ...
    def flagged_bits(self, flag: str) -> int: ...
    def gram_bits_before(self, gram: str, node: int) -> int: ...
    def keys_bits_before(self, keys: Iterable[Key], node: int, among: int = -1) -> dict[Key, int]: ...


def role_features(
    graph: _Graph,
    node: int,
    spec: ToolSpec | None,
    values: Iterable[tuple[str, str]],
    min_span: int,
    token_holders: _TokenHolders,
    sources: Mapping[str, int] | None = None,
) -> dict[str, bool]:
    """The features of this module for the proposal at ``node`` with argument ``values`` (name, value).

    ``sources``: the edge rules into ``node`` as argument name -> sources (bit set), when the caller has
    read them already (:attr:`guard.scoring.view.NodeEvidence.sources`); read from the graph otherwise."""
    out = dict.fromkeys(ROLE_FEATURES + GRADED_FEATURES, False)
    if spec is None:
        return out
    idents = set(spec.identifier_args)
    payloads = set(spec.payload_args) - idents
    users, private, untrusted = graph.user_bits(), graph.flagged_bits("private"), graph.flagged_bits("untrusted")
    relay = graph.flagged_bits("tainted") & ~private
    if sources is None:
        sources = arg_sources(graph.edge_rules(node))
    for arg, bits in sources.items():
        if bits & users or not arg:
            continue
        role = "recipient" if arg in idents else "payload" if arg in payloads else None
        if role is not None:
            out[_FROM[role, "untrusted"]] |= bool(bits & untrusted)
            out[_FROM[role, "private"]] |= bool(bits & private)
        out[table.PRIVATE_RELAYED.name] |= bool(bits & relay) and arg in idents | payloads
    named = [(name, value) for name, value in values if name in idents | payloads]
    traced = {name for name, bits in sources.items() if bits & (private | untrusted)}
    _coverage(out, graph, node, named, payloads, traced, min_span, (private, untrusted, users))
    out[table.PRIVATE_VALUES_2.name] = _private_values(named, token_holders, private, users, node) >= VALUES
    return out


class _TokenHolders(Protocol):
    def tokens_in(self, text: str) -> AbstractSet[str]: ...
    def token_bits(self, value: str) -> int: ...


def _coverage(
    out: dict[str, bool],
    graph: _Graph,
    node: int,
    named: list[tuple[str, str]],
    payloads: set[str],
    traced: set[str],
    k: int,
    kinds: tuple[int, int, int],
) -> None:
    """Payload share and longest run covered by k-grams of private / untrusted records (not of user turns).

    Only arguments with an edge from such a record (``traced``) are read: a k-gram that one of those
    records holds makes that edge, so the other arguments cover nothing.
    """
    private, untrusted, users = kinds
    total = {"private": 0, "untrusted": 0}
    length = 0
    window = (1 << k) - 1
    for name, value in named:
        masks = {"private": 0, "untrusted": 0}  # bit i: character i lies in a k-gram such a record holds
        windows = window_keys(value, k) if name in traced else []  # the k-gram starting at each position
        held = graph.keys_bits_before(windows, node, private | untrusted | users) if windows else {}
        for i in [i for i, key in enumerate(windows) if key in held] if held else ():
            holders = held[windows[i]]
            if holders & users:
                continue
            if holders & private:
                masks["private"] |= window << i
            if holders & untrusted:
                masks["untrusted"] |= window << i
        for kind, covered in masks.items():
            if longest_run(covered) >= LONG_SPAN:
                out[_LONG[kind]] = True
            if name in payloads:
                total[kind] += covered.bit_count()
        if name in payloads:
            length += len(value)
    for kind, covered_chars in total.items():
        share = covered_chars / length if length else 0.0
        half, most = _SHARE[kind]
        out[half] = share >= HALF
        out[most] = share >= MOST


def arg_sources(rules: Iterable[tuple[str, str, int]]) -> dict[str, int]:
    """Edge rules ``(type, argument, sources)`` as argument name -> the union of its sources."""
    out: dict[str, int] = {}
    for _etype, arg, bits in rules:
        out[arg] = out.get(arg, 0) | bits
    return out


def longest_run(bits: int) -> int:
    """The length of the longest run of set bits in ``bits``."""
    best = 0
    while bits:  # each round strips the lowest bit of every run: as many rounds as the longest run
        bits &= bits >> 1
        best += 1
    return best


def _private_values(named: list[tuple[str, str]], index: _TokenHolders, private: int, users: int, node: int) -> int:
    """Distinct value tokens of the arguments held by an earlier private record and by no user turn."""
    before = (1 << node) - 1
    tokens = {token for _name, value in named for token in index.tokens_in(value)}
    count = 0
    for token in tokens:
        holders = index.token_bits(token) & before
        if holders & private and not holders & users:
            count += 1
    return count
