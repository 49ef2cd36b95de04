"""k-gram keys: the numpy path gives exactly the keys of the k-grams, and equal keys mean equal k-grams."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.evidence.kgrams import gram_key, gram_keys, window_keys
from guard.evidence.value_index import ValueIndex

_TEXT = st.text(alphabet="ab \x00\x7fé€z9", max_size=40)


@settings(max_examples=400, deadline=None)
@given(_TEXT, st.integers(1, 10), st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=3))
@example("abcdefghij", 8, [(0, 10)])
@example("a\x00\x00bcdefgh", 3, [(0, 3), (2, 11)])
def test_keys_are_the_keys_of_the_grams(text: str, k: int, spans: list[tuple[int, int]]) -> None:
    """``gram_keys`` and ``window_keys`` equal :func:`gram_key` of each k-gram read one slice at a time
    (catches a mask of the wrong width for ``k < 8``, a window past the text's end read as padding, a
    range's last k-gram dropped, or a non-ASCII text keyed differently from an ASCII one)."""
    ranges = [(min(lo, hi, len(text)), min(max(lo, hi), len(text))) for lo, hi in spans]
    expected = {gram_key(text[i : i + k], k) for lo, hi in ranges for i in range(lo, hi - k + 1)}
    assert gram_keys(text, ranges, k) == expected
    assert window_keys(text, k) == [gram_key(text[i : i + k], k) for i in range(len(text) - k + 1)]


@given(st.text(alphabet="ab\x00é", min_size=1, max_size=9), st.text(alphabet="ab\x00é", min_size=1, max_size=9))
def test_equal_keys_mean_equal_grams(a: str, b: str) -> None:
    """Two k-grams of one length share a key only when they are equal, and a string of another length is
    the key of no k-gram (catches keys that ignore trailing NUL characters or the length)."""
    k = len(a)
    if len(b) == k:
        assert (gram_key(a, k) == gram_key(b, k)) == (a == b)
    else:
        assert gram_key(b, k) == b


def test_an_ascii_span_of_a_non_ascii_text_links_to_an_ascii_text() -> None:
    """A k-gram shared by a text with a non-ASCII character and a plain ASCII one makes the edge (catches
    the two key forms disagreeing: the slow path's keys must equal the numpy path's)."""
    index = ValueIndex([], 8)
    index.add(0, "café, reference QX-7731-ZZ", ())
    assert index.span_bits("ascii text with QX-7731-ZZ in it") == 1
    index.add(1, "plain reference RT-5520-KK", ())
    assert index.span_bits("la référence RT-5520-KK") == 2
