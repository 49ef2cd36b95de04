"""Values that stand only in a text's zones (guard.evidence.zoned)."""

from __future__ import annotations

from guard.evidence.values import Value
from guard.evidence.zoned import blanked, in_holes, zone_only


def _tokens(text: str) -> frozenset[str]:
    return frozenset(w for w in text.split() if any(c.isdigit() for c in w))


def test_blanked_keeps_every_offset_and_line_break() -> None:
    """Catches a blanking that shifts offsets (values found in the blanked text would point elsewhere) or that
    joins lines (a clause or line rule would then read two lines as one)."""
    text = "body 42\n\nBest,\nJo 0958\nx"
    out = blanked(text, [(9, len(text))])
    assert len(out) == len(text) and out[:9] == text[:9]
    assert out[9:].strip() == "" and out.count("\n") == text.count("\n")


def test_in_holes_needs_the_whole_span_inside_one_hole() -> None:
    """Catches an overlap test in place of containment: a value that starts in the body and runs into the
    signature is body text."""
    holes = [(0, 5), (20, 30)]
    assert in_holes(20, 30, holes) and in_holes(1, 4, holes)
    assert not in_holes(18, 22, holes) and not in_holes(4, 6, holes)


def test_zone_only_keeps_what_the_body_also_holds() -> None:
    """Catches a value counted as zone-only when the body holds it too (a private number repeated in the
    signature would then stop linking to a call's signature), and a zone value missed."""
    text = "ref 1111 and 2222\n\nBest,\nJo 2222 3333"
    sig = text.index("Best")
    values = (
        Value("number", 4, 8, "1111"),
        Value("number", 13, 17, "2222"),
        Value("number", sig + 9, sig + 13, "2222"),
    )
    values += (Value("number", sig + 14, sig + 18, "3333"),)
    tokens, keys = zone_only(text, values, [(sig, len(text))], _tokens(text), _tokens)
    assert tokens == {"3333"} and keys == {"3333"}
    assert zone_only(text, values, [], _tokens(text), _tokens) == (frozenset(), frozenset())
