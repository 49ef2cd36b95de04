"""Instruction-shaped text: clauses of third-party text that tell the reader to act, found by their grammar.

Whatever an attacker writes around it, a prompt injection has to ask the agent to do something:
an imperative clause ("send ... to ...", "please forward ...", "then delete ..."), or a request
addressed to the reader ("you must transfer ...", "I need you to post ...").  This module finds
such clauses by grammar alone, with no phrase of any attack template: a clause start (the text's
start, a line, a sentence, a colon, a list bullet, a closing tag or bracket), optional lead-ins
(politeness, sequencing, address: "please", "then", "first", "you must", "make sure to"), and a
verb of action in its base form.  The word lists were written from English grammar and from the
kinds of side effect agents have (send, pay, delete, change, invite, post, book, visit ...), not
from any benchmark's text (docs/evidence.md#instruction-shaped-text).

A clause runs to the end of its sentence (``.``, ``!`` or ``?`` before a space or the end), its
line, or :data:`MAX_CLAUSE` characters.  :class:`InstructedValues` indexes the clauses of untrusted
records so that a decision asks, in the size of its arguments, whether a value it carries was
handed over inside such a clause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from guard.evidence.feature_index import SHORT_ID_MAX, SubstringIndex, UntilAsked

__all__ = ["MAX_CLAUSE", "InstructedValues", "instruction_clauses"]

#: The longest clause read after its verb (characters).
MAX_CLAUSE = 400

_VERBS = (
    "add|append|apply|approve|assign|attach|book|buy|call|cancel|change|click|collect|concatenate|confirm|contact|copy"
    "|create|delete|deposit|disable|disregard|download|drop|e-?mail|edit|enable|enter|erase|execute|export|fill|find|follow"
    "|forward|get|give|go|grant|ignore|include|insert|install|invite|join|leave|list|mail|make|message|modify|move|navigate"
    "|notify|open|order|paste|pay|post|provide|publish|purchase|put|read|refund|remove|rename|reply|reschedule"
    "|reserve|reset|respond|retrieve|revoke|run|say|schedule|send|set|share|sign|submit|subscribe|summari[sz]e"
    "|tell|transfer|type|unsubscribe|update|upload|use|visit|wire|withdraw|write"
)
_LEAD = (
    r"(?:please|pls|kindly|now|then|first|firstly|next|also|and|finally|immediately|urgently|quickly|just|simply"
    r"|do|also please|and then|after that|afterwards|before that|once done|at once|right away"
    r"|(?:you|u)\s+(?:must|should|need\s+to|have\s+to|are\s+(?:required|asked|expected)\s+to|will\s+need\s+to|will)"
    r"|(?:i|we)\s+(?:need|want|would\s+like|require|ask)\s+you\s+to"
    r"|(?:make|be)\s+sure\s+(?:to|that\s+you)|remember\s+to|don'?t\s+forget\s+to|do\s+not\s+forget\s+to"
    r"|your\s+(?:next\s+|new\s+|real\s+|only\s+)?(?:task|job|goal|instruction)\s+is\s+to"
    r"|it\s+is\s+(?:important|necessary|required|essential|urgent)\s+(?:that\s+you|to)"
    r"|(?:the\s+)?(?:assistant|agent|ai|bot|model)\s*[,:]"
    r")"
)
#: Where a clause may start: the text's start, a new line, after a sentence end, a colon or semicolon, a
#: closing bracket, tag or quote (a list bullet or number follows a line break or ends in ``.``/``)``); then
#: the clause's first word, read after any bullets, quotes or emphasis.
_MARK = r"[\n.!?;:)\]>\"'`*#|\u201d\u2019]"
_FILL_AND_WORD = r"[ \t\"'`*#\-\u2022\u201c\u2018]*(?P<word>[A-Za-z][A-Za-z']*)"
_STARTS = re.compile(rf"(?:\A|{_MARK}){_FILL_AND_WORD}")
#: :data:`_STARTS` by its two alternatives, for a faster scan: at the text's start (``match`` at 0), and after a
#: mark (a pattern that starts with a character class, which ``re`` searches for before trying the rest).
_AT_START = re.compile(_FILL_AND_WORD)
_AFTER_MARK = re.compile(_MARK + _FILL_AND_WORD)
#: The words a clause can begin with: a verb, or the first word of a lead-in.  A start whose first word is
#: not one of them is skipped before the (costlier) clause pattern is tried there.
_LEAD_WORDS = (
    "please pls kindly now then first firstly next also and finally immediately urgently quickly just simply do "
    "after afterwards before once at right you u i we make be remember don't dont your it the assistant agent ai "
    "bot model"
)
_VERB_WORDS = _VERBS.replace("e-?mail", "email|e").replace("summari[sz]e", "summarise|summarize")
_FIRST_WORDS = frozenset(_VERB_WORDS.split("|")) | frozenset(_LEAD_WORDS.split(" "))
#: A clause from its first word: lead-ins, then the verb, then a word (not a ``key:`` label).
_BODY = re.compile(rf"(?:{_LEAD},?\s+)*(?P<verb>{_VERBS})(?=\s+[^\s:=])", re.IGNORECASE)
#: Requests addressed to the reader anywhere in a sentence, not only at its start.
_ADDRESSED = re.compile(
    rf"\b(?:you|u)\s+(?:must|should|need\s+to|have\s+to|are\s+(?:required|asked|expected)\s+to)\s+(?:{_LEAD}\s+)*"
    rf"(?P<verb>{_VERBS})\b",
    re.IGNORECASE,
)
#: A clause ends at its sentence's end, a blank line, or a new line that starts a list item or a ``key:``
#: field; a line break inside a sentence (text wrapped by a serialiser) does not end it.
_END = re.compile(r"[.!?](?=\s|$)|\n[ \t]*\n|\n(?=[ \t]*(?:[-*\u2022]|\d+[.)]|[\w\[\]'\"]{1,40}:\s))")
#: A following sentence that says how the action must be done ("The subject should be ...") belongs to it.
_HOW = re.compile(r"[ \t]*[^\n.!?]{0,80}?\b(?:should|must|needs?\s+to|has\s+to|have\s+to|is\s+to|are\s+to)\b", re.I)
_FOLLOWING = 3


_ESCAPED = re.compile(r"\\[nrt]")


def instruction_clauses(text: str) -> tuple[tuple[int, int], ...]:
    """The instruction-shaped clauses of ``text`` as ascending, disjoint ``(start, end)`` character ranges.

    Tool outputs are often serialised (JSON, a language's repr), so an escaped line break (a backslash
    and ``n``) reads as a line break: it is replaced by a space and a newline, keeping every offset."""
    text = _ESCAPED.sub(" \n", text)
    spans: list[tuple[int, int]] = []
    for first in _starts(text):
        if first.group("word").lower() not in _FIRST_WORDS:
            continue
        match = _BODY.match(text, first.start("word"))
        if match is not None:
            spans.append((match.start("verb"), _clause_end(text, match.end("verb"), match.start("verb"))))
    for match in _ADDRESSED.finditer(text) if _may_be_addressed(text) else ():
        spans.append((match.start("verb"), _clause_end(text, match.end("verb"), match.start("verb"))))
    return _merged(spans)


def _starts(text: str) -> Iterator[re.Match[str]]:
    """``_STARTS.finditer(text)``: at position 0 the text's start is tried first, then a mark; every match is
    non-empty (it ends with a word), so the scan goes on from its end, where only a mark can start one."""
    first = _AT_START.match(text) or _AFTER_MARK.match(text)
    if first is not None:
        yield first
    yield from _AFTER_MARK.finditer(text, first.end() if first is not None else 1)


#: A match of :data:`_ADDRESSED` holds one of these words (compared without case).
_ADDRESSED_WORDS = ("must", "should", "need", "have", "required", "asked", "expected")


def _may_be_addressed(text: str) -> bool:
    """False only when :data:`_ADDRESSED` has no match in ``text``: an ASCII text without any of
    :data:`_ADDRESSED_WORDS` in its lowercase form (``re`` compares an ASCII character with an ASCII letter of
    the pattern without case exactly when their lowercase forms are equal)."""
    if not text.isascii():
        return True
    lowered = text.lower()
    return any(word in lowered for word in _ADDRESSED_WORDS)


def _clause_end(text: str, after: int, start: int) -> int:
    """Where the clause begun at ``start`` ends: its sentence's end, extended over up to :data:`_FOLLOWING`
    sentences of the same line that say how the action must be done."""
    end = _sentence_end(text, after, start)
    for _ in range(_FOLLOWING):
        if end >= len(text) or text[end] == "\n" or not _HOW.match(text, end + 1):  # a list item or field
            break
        end = _sentence_end(text, end + 1, end + 1)
    return end


def _sentence_end(text: str, after: int, start: int) -> int:
    found = _END.search(text, after, start + MAX_CLAUSE)
    return found.start() if found else min(len(text), start + MAX_CLAUSE)


def _merged(spans: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://")
_TOKEN = re.compile(r"[^\s'\"`,;()\[\]{}<>]+")
_TRIM = ".:!?"


def _tokens(text: str) -> set[str]:
    """Whole tokens of ``text`` (lowercase), with and without trailing sentence punctuation."""
    out: set[str] = set()
    for match in _TOKEN.finditer(text.lower()):
        token = match.group(0)
        out.add(token)
        out.add(token.rstrip(_TRIM))
    out.discard("")
    return out


class InstructedValues(UntilAsked):
    """The instruction-shaped clauses of untrusted records, asked whether an earlier one holds a value.

    A value of at most :data:`~guard.evidence.feature_index.SHORT_ID_MAX` characters must stand as a
    whole token of a clause and hold a digit or a mark (an id, an amount, ``new_pass``: a short plain word
    such as "record" names nothing); a longer one may stand anywhere inside a clause (an address, an
    IBAN, a URL, a sentence).  Matching ignores case.  Texts are queued until
    the first question, as the other prefix indexes do (a session without sinks pays nothing).
    """

    def __init__(self) -> None:
        super().__init__()
        self.earliest: dict[str, int] = {}
        self.clauses = SubstringIndex()

    def add(self, node: int, text: str) -> None:
        """Take an untrusted record's text (its clauses are found when the index is first asked)."""
        self._take(node, text)

    def _index(self, node: int, text: str, starts: tuple[int, ...]) -> None:
        spans = instruction_clauses(text)
        if not spans:
            return
        body = "\n".join(text[lo:hi] for lo, hi in spans).lower()
        setdefault = self.earliest.setdefault
        for token in _tokens(body):
            if len(token) <= SHORT_ID_MAX:
                setdefault(token, node)
        self.clauses.add(node, body)

    def held_before(self, value: str, node: int) -> bool:
        """Whether a record older than ``node`` holds ``value`` inside an instruction-shaped clause (a URL
        also without its scheme and trailing slash: an agent adds or drops them)."""
        value = value.strip().lower()
        bare = _SCHEME.sub("", value).rstrip("/")
        return self._held(value, node) or (bare != value and self._held(bare, node))

    def _held(self, value: str, node: int) -> bool:
        if len(value) <= SHORT_ID_MAX and value.replace(" ", "").isalpha():
            return False  # a short plain word ("record", "Fred") names nothing: ids carry digits or marks
        self._ask()
        if not value:
            return False
        if len(value) <= SHORT_ID_MAX:
            first = self.earliest.get(value)
            if first is not None and first < node:
                return True
            if len(value) < 5:  # too short to be found inside other text: whole tokens only
                return False
        return any(holder < node for holder in self.clauses.holders(value))
