"""The normal form: its shortcut for folded ASCII texts and its cache change no result."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.evidence import normalize
from guard.evidence.normalize import normalize_value

_ASCII = st.text(alphabet="aB 1-2.3,_/'\t\n%4+x", max_size=40)


def _fixed_point(text: str) -> str:
    out = normalize._once(text)
    for _ in range(normalize._MAX_PASSES):
        again = normalize._once(out)
        if again == out:
            break
        out = again
    return out


@settings(max_examples=500, deadline=None)
@given(st.one_of(_ASCII, st.text(max_size=30)))
@example("1 - 2 .3")
@example("A%2541+1")
@example("x%25252541")
@example("9\u2009 9")
def test_the_shortcut_returns_the_fixed_point(text: str) -> None:
    """After one pass, a folded ASCII text with no ``%`` or ``+`` is returned as it is; that is what further
    passes would give (catches the shortcut taken where another pass still changes the text, such as a
    separator left between digits or an escape still to decode), with and without the cache."""
    assert normalize._normalize(text) == _fixed_point(text)
    assert normalize_value(text) == _fixed_point(text)
    assert normalize_value(text) == _fixed_point(text)  # the second read comes from the cache
