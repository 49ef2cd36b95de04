"""Values that stand only in a text's zones: the contact lines of a signature, a registration number in a
footer, a reference code in a header (docs/evidence.md#zones).

A structured value or value token of a record that occurs only inside the record's opening or closing zone
(:func:`guard.evidence.boilerplate.zone_holes`) is kept apart from the others: it links to a call's value that
stands in the call's *body*, but not to one that stands in the call's own zones.  So two e-mails that end with
the same signature block (a name, a phone number, an address) do not link through it, while a phone number
copied from a record's signature into the body of a send still does, and so does a record's body value written
into a call's signature (its zones are read as body on the record's side).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from guard.evidence.values import Value

__all__ = ["blanked", "in_holes", "zone_only"]

Holes = Sequence[tuple[int, int]]


def blanked(text: str, holes: Holes) -> str:
    """``text`` with every character inside ``holes`` but line breaks replaced by a space (same length)."""
    parts, last = [], 0
    for lo, hi in holes:
        parts += [text[last:lo], "".join("\n" if c == "\n" else " " for c in text[lo:hi])]
        last = hi
    parts.append(text[last:])
    return "".join(parts)


def in_holes(lo: int, hi: int, holes: Holes) -> bool:
    """Whether ``[lo, hi)`` lies inside one of ``holes``."""
    return any(a <= lo and hi <= b for a, b in holes)


def zone_only(
    text: str,
    values: Sequence[Value],
    holes: Holes,
    tokens: frozenset[str],
    tokens_in: Callable[[str], frozenset[str]],
) -> tuple[frozenset[str], frozenset[str]]:
    """The value tokens (of ``tokens``, those of ``text``) and structured-value keys of ``text`` that occur only
    inside ``holes`` (``tokens_in``: the index's token reader)."""
    if not holes:
        return frozenset(), frozenset()
    only_tokens = tokens - tokens_in(blanked(text, holes)) if tokens else frozenset()
    inside = {v.key for v in values if v.key and in_holes(v.start, v.end, holes)}
    outside = {v.key for v in values if v.key and not in_holes(v.start, v.end, holes)}
    return only_tokens, frozenset(inside - outside)
