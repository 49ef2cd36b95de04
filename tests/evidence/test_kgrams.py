"""k-gram keys: the numpy path gives exactly the keys of the k-grams, and equal keys mean equal k-grams."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.evidence.kgrams import gram_key, gram_keys, split_keys, window_keys
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


_SPANS = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=4)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab \x00\x7fé€z9", max_size=40), st.integers(1, 10), _SPANS, _SPANS)
@example("abcdefghijkl", 8, [(0, 4)], [(3, 6)])
@example("zzzzzzzzzz\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f", 8, [(0, 18)], [(9, 12)])
@example("abcdefghij", 3, [(0, 10)], [(2, 5), (0, 10)])
def test_split_keys_are_the_free_keys_and_the_near_keys_outside_them(
    text: str, k: int, ranges: list[tuple[int, int]], spans: list[tuple[int, int]]
) -> None:
    """:func:`split_keys` (one array of words, the positions already free not read again for near) gives the
    keys of the k-grams inside ``ranges`` and, apart, those overlapping a span that are not free, as slices read
    one at a time give them (catches a near position read though free whose key is not free, a free position
    left unread, a span's first or last overlapping k-gram dropped, a signed word that differs from the key of
    a k-gram ending in ``\\x7f``, or the near set returned with the free keys still in it)."""
    size = len(text)
    ranges = [(min(lo, hi, size), min(max(lo, hi), size)) for lo, hi in ranges]
    spans = [(min(lo, hi, size), min(max(lo, hi), size)) for lo, hi in spans]
    free = {gram_key(text[i : i + k], k) for lo, hi in ranges for i in range(lo, hi - k + 1)}
    last = size - k + 1
    near = {gram_key(text[i : i + k], k) for lo, hi in spans for i in range(max(0, lo - k + 1), min(hi, last))}
    assert split_keys(text, ranges, spans, k) == (free, near - free)
