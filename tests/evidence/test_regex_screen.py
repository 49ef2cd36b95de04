"""Literal screens never drop a pattern that matches: checked against ``re`` itself on generated patterns."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.evidence import regex_screen
from guard.evidence.regex_screen import alternation, alternation_for, first_class, gated, live, matches_at, screen


@pytest.fixture(autouse=True, scope="module")
def _screen_short_texts() -> Iterator[None]:
    """Screen texts of every length here, so that the short generated texts exercise the screens."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(regex_screen, "SCREENED", 0)
        yield


# pieces of regex syntax the screen reads (literals, groups, alternations, repeats) or passes over
_ATOMS = st.sampled_from(
    ["ab", "AB", "ig", "no", "re", "x", "S", "k", "[a-z]", ".", r"\d", r"\b", "(?=ab)", "(?!x)", r"\s", "-"]
)


@st.composite
def _patterns(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["atom", "atom", "group", "branch", "repeat"] if depth < 2 else ["atom"]))
        if kind == "atom":
            parts.append(draw(_ATOMS))
        elif kind == "group":
            parts.append("(" + draw(st.sampled_from(["", "?:", "?i:", "?>"])) + draw(_patterns(depth + 1)) + ")")
        elif kind == "branch":
            parts.append("(?:" + "|".join(draw(st.lists(_patterns(depth + 1), min_size=1, max_size=3))) + ")")
        else:
            count = draw(st.sampled_from(["?", "*", "+", "{0,2}", "{1,2}", "{2}", "+?", "*+", "??"]))
            parts.append("(?:" + draw(_patterns(depth + 1)) + ")" + count)
    return "".join(parts)


_TEXT = st.text(alphabet="abABigIGnoNOreRExXsSkK- 1\u017f\u212a", max_size=24)


@settings(max_examples=600, deadline=None)
@given(_patterns(), st.sampled_from(["", "(?i)"]), _TEXT)
@example("(?:ab)?re", "", "re")
@example("(?:x|ab)re", "(?i)", "XRE")
@example("k", "(?i)", "K")
def test_a_pattern_that_matches_is_always_kept(body: str, flags: str, text: str) -> None:
    """Whenever ``re`` finds a match, :func:`live` keeps the pattern (catches a screen that treats an optional
    part or a zero-minimum repeat as required, that takes only one branch of an alternation, that compares
    with case under ``(?i)``, or that screens a non-ASCII text, where ``re``'s extra case equivalences such as
    the long s and the Kelvin sign apply)."""
    pattern = re.compile(flags + body)
    kept = live((pattern,), text)
    if pattern.search(text) is not None:
        assert kept is None or kept == (0,), (pattern.pattern, text, screen(pattern))


def test_screens_are_selective_where_every_match_needs_a_string() -> None:
    """The screen of typical injection and secret patterns holds the strings every match needs, and drops
    texts without them (catches a screen that gives up, ``None``, where a required string exists, or that
    keeps every pattern, so the speed-up silently goes)."""
    cases = {
        r"(?i)ignore (?:all |your )?(?:previous|prior) instructions": {" instructions"},
        r"(?i)\b(?:ignore|disregard)\b": {"ignore", "disregard"},
        r"\[/?(?:INST|SYS)\]": {"inst", "sys"},
        r"(?i)<information>": {"<information>"},
        r"(?:ab)?cd": {"cd"},
        r"(?:abc)+d": {"abc"},
        r"\b(?:\d{4}[- ]){3}\d{4}\b": None,
    }
    for source, expected in cases.items():
        assert screen(re.compile(source)) == (None if expected is None else frozenset(expected)), source
    patterns = (re.compile(r"(?i)<information>"), re.compile(r"\b\d{4}\b"), re.compile(r"(?i)\bTODO:"))
    assert live(patterns, "A quiet text about todo lists.") == (1,)
    assert live(patterns, "<INFORMATION> Todo: pay") == (0, 1, 2)
    assert live(patterns, "caf\u00e9 <information>") is None


@settings(max_examples=300, deadline=None)
@given(st.lists(_patterns(), min_size=1, max_size=4), _TEXT)
@example(["(?:ab)?re", "x"], "are x")
def test_a_pruned_alternation_finds_what_the_full_one_finds(sources: list[str], text: str) -> None:
    """Leaving out the branches that cannot match changes no match of the alternation (catches a pruned
    branch that does match somewhere, which would drop tokens, or a branch order changed by the pruning,
    which would change which branch wins at a position)."""
    full = alternation(tuple(sources))
    pruned = alternation_for(tuple(sources), text)
    expected = [(m.span(), m.group(0)) for m in full.finditer(text)]
    assert ([(m.span(), m.group(0)) for m in pruned.finditer(text)] if pruned else []) == expected


def test_alternation_keeps_every_branch_where_a_group_reference_would_be_renumbered() -> None:
    """A source with a group reference keeps the whole alternation (catches pruning that would make ``\\1``
    name another branch's group), and a text no branch can match gets no scan at all."""
    sources = (r"(a)x\1", r"(b)yb", "zz")
    assert alternation_for(sources, "zz only") is alternation(sources)
    assert alternation_for(("qqq", "www"), "nothing here") is None
    assert alternation_for(("qqq", "zz"), "zz").pattern == "(?:zz)"


def test_short_texts_are_not_screened() -> None:
    """Below ``SCREENED`` characters every pattern is run (catches the threshold read the wrong way round,
    which would screen the short argument values, where the screen costs more than it saves)."""
    patterns = (re.compile(r"(?i)<information>"),)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(regex_screen, "SCREENED", 64)
        assert live(patterns, "short text") is None
        assert live(patterns, "a text of some length " * 4) == ()


def test_matches_at_resumes_after_each_match_as_finditer_does() -> None:
    """Tried at the given starts only, the matches are those of ``finditer``: none inside a match already
    taken (catches a retry at a start inside the previous match, which would find ``b`` at 1 in ``abab``),
    and a lookbehind still reads the text before a start."""
    assert [m.span() for m in matches_at(re.compile("ab|b"), "abab", range(4))] == [(0, 2), (2, 4)]
    assert [m.span() for m in matches_at(re.compile(r"(?<!x)b"), "xb b", [1, 3])] == [(3, 4)]
    assert matches_at(re.compile("b"), "abc", [0, 2]) == []


@settings(max_examples=400, deadline=None)
@given(st.lists(_patterns(), min_size=1, max_size=3), _TEXT)
@example(["(?:ab)?re"], "re")
@example(["(?:x|)k", "S"], "k S")
@example([r"\bS(?:no)*"], "xS S")
def test_a_gated_alternation_finds_what_the_plain_one_finds(sources: list[str], text: str) -> None:
    """The first-character lookahead of :func:`gated` changes no match (catches a first class that misses a
    character a match can start with: a zero-minimum repeat or an optional branch taken as required, so the
    item after it is not added; a branch left out of a union; a literal compared with case under ``(?i:)``)."""
    plain = alternation(tuple(sources))
    expected = [(m.span(), m.group(0)) for m in plain.finditer(text)]
    assert [(m.span(), m.group(0)) for m in gated(plain).finditer(text)] == expected


def test_first_classes_are_read_where_every_match_starts_with_a_known_character() -> None:
    """The first class of the value-token shapes is found (catches a gate that silently gives up, so the speed-up
    goes), and none is given where a match may be empty, starts with any character or ignores case."""
    assert first_class(re.compile(r"\b(?:\d{4}[- ]){3}\d{4}\b")) == r"[\d]"
    assert first_class(re.compile(r"\+\d|\b[A-B]x")) == r"[\U0000002b\U00000041-\U00000042]"
    for source in ("x*", "(?:ab)?", ".x", "(?i)ab", "(?i:a)b", "[^a]b", r"(a)?\1b"):
        assert first_class(re.compile(source)) is None, source
    assert gated(re.compile("x?")).pattern == "x?"


_FOLLOWERS = st.sampled_from(
    ["(?:md|jpe?g)", "(?:ya?ml|x)", "[ab]", "[a-c]", "x?", "(?:ab){0,2}", "(?:ab){1,2}", "(?:ab)+", "(?=k)k", r"\b",
     "(?:a|)", "(?i:AB)", r"\d", "(?:k|[^a])", "(?>no)", "(?:re|(?:ig|no)?S)"]
)  # fmt: skip
_JOINED_TEXT = st.text(alphabet="ab.kxyjpegmdlnoresSIGAB19 \u017f\u212a", max_size=24)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["", ".", "a", "k.", "xy", "abc"]), _FOLLOWERS, st.sampled_from(["", "(?i)"]), _JOINED_TEXT)
@example(".", "(?:md|jpe?g)", "", "x.jpeg")
@example("a", "(?:ab){0,2}", "", "a")
@example("k", "[a-c]", "(?i)", "\u212ab")
def test_a_short_run_joined_to_what_follows_drops_no_matching_pattern(
    run: str, follower: str, flags: str, text: str
) -> None:
    """A run of literals joined to the strings the next item starts with still keeps every pattern that matches
    (catches an optional part, an empty branch or a zero-minimum repeat read as required, a class of ranges or
    categories enumerated as its literals, a lookahead's text counted as consumed, or a string that holds
    another member left in place of the shorter one)."""
    pattern = re.compile(flags + re.escape(run) + follower)
    kept = live((pattern,), text)
    if pattern.search(text) is not None:
        assert kept is None or kept == (0,), (pattern.pattern, text, screen(pattern))


def test_the_file_name_screen_needs_the_dot_before_an_extension() -> None:
    """The file-name value pattern is screened by its dotted extensions, so ``gift``, ``html`` or ``mdash`` no
    longer keep it (catches the screen falling back to the bare extensions ``gif``, ``ml``, ``md``)."""
    file_name = r"(?<![\w.-])[\w.-]{1,128}\.(?:txt|pdf|docx?|xlsx?|csv|json|md|pptx?|png|jpe?g|gif|zip|ya?ml|html?)\b"
    expected = ".txt .pdf .doc .xls .csv .json .md .ppt .png .jpg .jpeg .gif .zip .yml .yaml .htm"
    assert screen(re.compile(file_name)) == frozenset(expected.split())
    assert live((re.compile(file_name),), "a gift in html, the mdash and an xml file") == ()


def test_screens_are_kept_for_the_very_tuple_they_were_read_from() -> None:
    """Fresh tuples of patterns, one after another, each get their own screens (catches screens kept by a
    tuple's id alone: a freed tuple's id is reused by the next, which would then get the old screens)."""
    text = "one text that holds the word needle and nothing else"
    for i in range(300):
        word = "needle" if i % 2 else f"absent{i}"
        assert live((re.compile(word),), text) == ((0,) if i % 2 else ())


def test_a_pattern_with_leading_flags_is_gated_under_them() -> None:
    """A leading global flag group stays in force behind the lookahead (catches a gate that fails to compile,
    global flags past the start, or one that drops ``(?a)`` or ``(?m)``)."""
    for source, text in ((r"(?a)\bkey\w{3}", "keyÄÖÜ keyabc"), (r"(?m)^secret\d", "x\nsecret1 secret2")):
        pattern = re.compile(source)
        assert gated(pattern) is not pattern
        assert [m.span() for m in gated(pattern).finditer(text)] == [m.span() for m in pattern.finditer(text)]
