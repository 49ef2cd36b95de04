"""Control arguments and where their values came from, relative to what the user asked (docs/evidence.md#control).

A call's *control* arguments are the ones that say where its effect lands: the recipient, the account,
the URL, the path, the channel, the object a change or a delete acts on (the policy's
``identifier_args``).  Nothing here reads the wording of third-party text: only which records supplied a
control argument's value (the edge rules of the prefix graph) and what the user's turns hold.

* ``untrusted_only``: a control argument's value was supplied by third-party (untrusted) records only:
  no user turn holds it and no private or trusted record supplied it;
* ``unnamed``: the same, and the user named none of the records that supplied it.  The user names a
  record by naming its source: a user turn holds an argument value (a file name, a URL, a channel, at
  least :data:`NAMED_MIN` characters with a letter) of the call whose result the record is.  "Pay the
  bill in bill.txt" names ``read_file(bill.txt)``, so an IBAN read from that file is not unnamed.

Every reading is language-free: values and record kinds, never words of a language.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from guard.evidence.bitset import members
from guard.evidence.edge_rules import E1
from guard.policy import ToolSpec
from guard.records import Record

__all__ = ["NAMED_MIN", "ControlView", "control_view"]

#: the shortest argument value of a source call that, held by a user turn, names that source.
NAMED_MIN = 4


class _Graph(Protocol):
    records: dict[int, Record]

    def edge_rules(self, node: int) -> list[tuple[str, str, int]]: ...
    def flagged_bits(self, flag: str) -> int: ...


@dataclass(frozen=True, slots=True)
class ControlView:
    """What the control arguments of one call took from third-party text (see the module)."""

    untrusted_only: bool = False
    unnamed: bool = False


def control_view(
    graph: _Graph, node: int, spec: ToolSpec | None, turns: Sequence[str], sources: Mapping[str, int] | None = None
) -> ControlView:
    """The control reading of the proposal at ``node`` (``turns``: the user turns before it, lowercase;
    ``sources``: the edge rules into it as argument name -> sources, when the caller has read them already)."""
    if spec is None or not spec.identifier_args:
        return ControlView()
    if sources is None:
        sources = {}
        for _etype, arg, bits in graph.edge_rules(node):
            sources[arg] = sources.get(arg, 0) | bits
    untrusted = graph.flagged_bits("untrusted")
    only = [
        bits
        for arg, bits in sources.items()
        if arg in spec.identifier_args and bits & untrusted and not bits & ~untrusted
    ]  # a user turn is ~untrusted
    if not only:
        return ControlView()
    unnamed = any(not any(_named(graph, source, turns) for source in members(bits)) for bits in only)
    return ControlView(untrusted_only=True, unnamed=unnamed)


def _named(graph: _Graph, source: int, turns: Sequence[str]) -> bool:
    """Whether a user turn names the call whose result ``source`` is (holds one of that call's argument values)."""
    calls = [bits for etype, _arg, bits in graph.edge_rules(source) if etype == E1]
    return any(
        _names(turns, graph.records[call].arg_values())
        for bits in calls
        for call in members(bits)
        if call in graph.records
    )


def _names(turns: Sequence[str], values: Iterable[tuple[str, str]]) -> bool:
    for _name, value in values:
        text = value.strip().lower()
        if len(text) >= NAMED_MIN and any(c.isalpha() for c in text) and any(text in t for t in turns):
            return True
    return False
