"""The value index of the prefix graph: value tokens, structured values and k-grams → the nodes that hold them.

:class:`ValueIndex` answers "which earlier records share an exact ``min_span`` span of free text, a
whole value token, a whole structured value or a core of one with this value"; :class:`NormalizingValueIndex`
also indexes and looks up normal forms (``graph.normalize``).  On the earlier side, structured values
(e-mail addresses, URLs, IBANs, phone and card numbers, amounts, dates, paths: :mod:`guard.evidence.values`) are
held only as wholes and cores: a k-gram that overlaps one (its domain, host, a common prefix) makes no
edge, nor does a value token inside one (the year of a date).  On the later side a value is read whole,
but for the namespace of its addresses and URLs (:mod:`guard.evidence.value_parts`), so a structure the sink
builds around earlier free text does not hide it; a copy of a core within one edit links too
(:mod:`guard.evidence.value_cores`; docs/evidence.md#the-sink-can-build-the-structure).  A k-gram of the
background table's boilerplate (:mod:`guard.evidence.specificity`) makes no edge either: it is indexed, but never
looked up.  Every k-gram of a text is still kept for :meth:`ValueIndex.gram_bits` ("which records hold
this k-gram"), which other readers need whole.  A k-gram held by more than ``DENSE`` nodes keeps them as
an integer bit set (:mod:`guard.evidence.postings`), so a lookup costs one OR for it however many records hold it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from functools import lru_cache, partial
from typing import TypeAlias

from guard.evidence.amount_values import AmountValues
from guard.evidence.bitset import members, to_bits
from guard.evidence.boilerplate import marked, minus, read_body, with_tails, wrapped_bits, zone_holes
from guard.evidence.gram_store import SMALL as SMALL  # the texts kept as k-gram sets before any is posted
from guard.evidence.gram_store import GramStore
from guard.evidence.kgrams import Key, gram_key, gram_keys, split_keys
from guard.evidence.normalize import normalize_value
from guard.evidence.postings import Posting
from guard.evidence.regex_screen import alternation
from guard.evidence.specificity import table_for, uncommon
from guard.evidence.value_cores import CoreIndex
from guard.evidence.value_parts import WRAPPERS, free_tokens, read_ranges_of, wrapped_tokens
from guard.evidence.values import Value, find_values, free_ranges
from guard.evidence.weak_spans import strong_grams
from guard.evidence.zoned import blanked, in_holes, zone_only
from guard.policy import Policy


class ValueIndex:
    """Value tokens and k-grams of earlier records → the nodes that hold them.

    A k-gram's holders are kept by a :class:`~guard.evidence.gram_store.GramStore`: inverted postings in the
    cheapest form for their number (:mod:`guard.evidence.postings`: a node index, a ``bytearray`` of them, or a
    bit set), and a session's first :data:`SMALL` texts as per-text k-gram sets, posted a bounded number of keys
    per later text; every answer is the same in both forms.
    """

    def __init__(
        self,
        patterns: Iterable[str],
        min_span: int,
        boilerplate: frozenset[str] = frozenset(),
        *,
        whole_values: bool = True,
        shapes: bool = False,
    ) -> None:
        self._token_sources = tuple(patterns)
        if self._token_sources:
            alternation(self._token_sources)  # a pattern that does not compile fails here, not at a decision
        self.min_span = min_span
        self._boilerplate = _boilerplate_keys(boilerplate, min_span)
        self.whole_values = whole_values
        self.shapes = shapes and whole_values  # zones, identifiers, weak spans (guard.evidence.boilerplate)
        self.runs: list[set[Key]] | None = None  # the weak runs of the values looked up, while a call collects them
        self.exact_runs: list[set[Key]] | None = None  # the same, read with the call's zones (for exact holders)
        self.exact = 0  # the nodes indexed whole, zones included (private- and untrusted-source records), a bit set
        self.tokens: dict[str, int] = {}  # value token → its holders as a bit set
        self.identifiers: dict[str, set[int]] = defaultdict(set)
        self.wholes: dict[str, int] = {}  # a structured value's key → its holders as a bit set
        self.zoned: dict[str, int] = {}  # a token or value key a holder has only in its zones (guard.evidence.zoned)
        self._grams = GramStore()  # k-grams of free text (edges, unless boilerplate) and overlapping a value
        self.cores = CoreIndex()  # cores of structured values (guard.evidence.value_cores): matched within one edit
        self.amounts = (
            AmountValues()
        )  # amounts' values alone, for a call's plain numbers (guard.evidence.amount_values)
        self._seen: tuple[str, _Analysis] | None = None

    def _analysed(self, text: str) -> _Analysis:
        """The structured values and free ranges of ``text`` (the last text's kept: a proposal's
        value is read by :meth:`span_bits` and :meth:`token_bits` in turn)."""
        seen = self._seen
        if seen is not None and seen[0] == text:
            return seen[1]
        if not self.whole_values:
            return (), ((0, len(text)),)
        if self.shapes:  # identifiers, bare hosts and URL first segments too (guard.evidence.boilerplate)
            found = _marked(text) if len(text) <= _CACHED_CHARS else _mark(text)
        else:
            found = _analysis(text) if len(text) <= _CACHED_CHARS else _analyse(text)
        self._seen = (text, found)
        return found

    def tokens_in(self, text: str) -> frozenset[str]:
        """Value tokens found in ``text``, but none that is a part of a structured value."""
        if not self._token_sources or not text:
            return frozenset()
        if len(text) > _CACHED_CHARS:
            return free_tokens(self._token_sources, self._analysed(text), text)
        return _cached_tokens(self._token_sources, self.whole_values + self.shapes, text)

    def add(self, node: int, text: str, identifiers: Iterable[str], exact: bool = False) -> None:
        """Index ``text`` (k-grams, tokens, structured values) and extra identifiers under ``node``
        (nodes in ascending order); ``exact``: read it whole, its zones as body (docs/evidence.md#zones)."""
        self._post(node, *self._collect(node, text, identifiers, exact))

    def _collect(
        self, node: int, text: str, identifiers: Iterable[str], exact: bool = False, raw: bool = True
    ) -> tuple[set[Key], set[Key]]:
        """Index the tokens, identifiers, structured values and cores of ``text`` under ``node``; its k-gram keys
        of free text and those overlapping a structured value or a zone (new sets, for :meth:`_post`).  An
        ``exact`` text has no zones: no position rule discounts it, and its node joins :attr:`exact`.  Amounts'
        values alone only from ``raw`` text: a normal form joins digit groups (``$1,110.90`` becomes ``$111090``)."""
        values, ranges = self._analysed(text)
        if exact:
            self.exact |= 1 << node
        holes = zone_holes(text) if self.shapes and not exact else ()  # opening and closing zones; tails are free
        ranges = minus(with_tails(ranges, values), holes) if self.shapes else ranges
        one, zoned = 1 << node, self.zoned
        found = self.tokens_in(text)
        if self._boilerplate:  # a value whose every k-gram the table holds is boilerplate: indexed nowhere
            values, found = uncommon(text, values, found, self._boilerplate, self.min_span)
        only, only_keys = zone_only(text, values, holes, found, self.tokens_in)  # a signature's phone, a footer's no.
        for token in found:
            held = zoned if token in only else self.tokens
            held[token] = held.get(token, 0) | one
            self.identifiers[token].add(node)
        for ident in identifiers:
            self.identifiers[ident].add(node)
        for value in values:
            if value.key:  # a bare host or a URL's first segment has none: namespace
                held = zoned if value.key in only_keys else self.wholes
                held[value.key] = held.get(value.key, 0) | one
        if values:
            if raw:
                self.amounts.add(node, values)
            self.cores.add(node, [v for v in values if v.key not in only_keys] if only_keys else values)
        spans = [(v.start, v.end) for v in values] + list(holes)  # the k-grams that overlap them are near
        return split_keys(text, ranges, spans, self.min_span)  # one read of the text's k-grams for both sets

    def _post(self, node: int, free: set[Key], near: set[Key]) -> None:
        """Keep the k-gram keys ``free`` and ``near`` of ``node`` (the newest) in the store."""
        self._grams.add(node, free, near)

    @property
    def kgrams(self) -> dict[Key, Posting]:
        """Free-text k-gram key (:mod:`guard.evidence.kgrams`) → its holders (the inverted postings;
        reading them posts every waiting text)."""
        self._grams.post()
        return self._grams.free

    @kgrams.setter
    def kgrams(self, postings: dict[Key, Posting]) -> None:
        self._grams.post()
        self._grams.free = postings

    @property
    def held(self) -> dict[Key, Posting]:
        """Key of a k-gram overlapping a structured value → its holders (posts every text, as :attr:`kgrams`)."""
        self._grams.post()
        return self._grams.near

    def span_sources(self, value: str) -> set[int]:
        """Nodes whose text shares an exact span of at least ``min_span`` chars with ``value``."""
        return set(members(self.span_bits(value)))

    def span_bits(self, value: str) -> int:
        """:meth:`span_sources` as a bit set, and the evidence a sink can wrap in a structure of its own.

        ``value`` is read whole, whatever structure it holds: a k-gram of ``value`` that lies inside one of
        its structured values (``TOKEN@host``, ``TOKEN.txt``, ``https://TOKEN.host/``) still finds the
        earlier free text that holds it; so does a value token inside an address, URL or path of ``value``
        (:meth:`inner_token_bits`).  With ``whole_values``, the holders of a core of which ``value`` holds a
        copy within one edit are added too (:mod:`guard.evidence.value_cores`).  The earlier side is unchanged: only
        free text is matched by k-grams, so a shared domain or host still makes no edge.

        Each distinct k-gram of ``value`` is looked up once; the work is bounded by the postings of
        those k-grams, at most the session's indexed characters (:data:`MAX_SESSION_CHARS`).
        """
        if not self.whole_values:
            return self._gram_bits(value, ((0, len(value)),))
        bits = self.cores.bits(value) if self.cores else 0
        values = self._analysed(value)[0]
        if not values:  # no structure: the whole text is read but its zones, as free text always was
            whole = ((0, len(value)),)
            return bits | (self._body_bits(value, whole) if self.shapes else self._gram_bits(value, whole))
        read = _cached_read(value) if len(value) <= _CACHED_CHARS else read_ranges_of(value, values)
        if self.shapes:  # an identifier the sink built a URL or path around; a call's zones are not read
            bits |= wrapped_bits(self.wholes, value, values) | self._body_bits(value, read)
            return bits | self.inner_token_bits(value, values)
        return bits | self._gram_bits(value, read) | self.inner_token_bits(value, values)

    def _body_bits(self, value: str, read: tuple[tuple[int, int], ...]) -> int:
        """The holders of a k-gram of ``value`` in ``read`` without the call's own zones; of an exact holder
        (:attr:`exact`), in all of ``read``: a call's greeting, header or signature lines are read against a
        private- or untrusted-source record (its weak runs go to :attr:`exact_runs`)."""
        body = read_body(value, read)
        bits = self._gram_bits(value, body)
        if not self.exact or body == read:
            return bits
        runs, self.runs = self.runs, self.exact_runs
        try:
            zoned = self._gram_bits(value, read) & self.exact
        finally:
            self.runs = runs
        return bits | zoned

    def inner_token_bits(self, value: str, values: tuple[Value, ...] | None = None) -> int:
        """Holders of a value token found in ``value`` anywhere but inside a date, an amount, a phone, card or
        IBAN number (whose digits are parts of one quantity: a year, a sum), as a bit set; ``values`` are
        the structured values of ``value`` when the caller has them."""
        if not self._token_sources or not (self.tokens or self.zoned):
            return 0
        if not any(v.kind in WRAPPERS for v in (self._analysed(value)[0] if values is None else values)):
            return 0  # outside addresses, URLs and paths the tokens are those of token_bits
        inner = _cached_inner_tokens if len(value) <= _CACHED_CHARS else _inner_tokens
        get, zoned = self.tokens.get, self.zoned.get  # a wrapper the sink builds is body: zone-only holders too
        bits = 0
        for token in inner(self._token_sources, value):
            bits |= get(token, 0) | zoned(token, 0)
        return bits

    def _gram_bits(self, value: str, ranges: tuple[tuple[int, int], ...]) -> int:
        """The nodes whose free text shares a (non-boilerplate) k-gram with ``value`` inside ``ranges``; a weak span
        makes no edge, its keys go to :attr:`runs` when collected (guard.evidence.weak_spans.reuse_bits)."""
        k = self.min_span
        grams = gram_keys(value, ranges, k)
        if self.shapes and grams:
            store = self._grams
            grams, runs = strong_grams(
                value, ranges, k, grams, store.matched(grams), store.free, self._analysed(value)[0]
            )
            if self.runs is not None:
                self.runs += [run - self._boilerplate for run in runs]
        return self.free_bits(grams - self._boilerplate if self._boilerplate else grams)

    def free_bits(self, grams: set[Key]) -> int:
        """The nodes whose free text holds one of the k-gram keys ``grams``."""
        return self._grams.free_bits(grams)

    def gram_bits(self, gram: str) -> int:
        """The nodes whose indexed text holds the k-gram ``gram`` anywhere (free text, inside a
        structured value, boilerplate), as a bit set."""
        return self._grams.gram_bits(gram_key(gram, self.min_span))

    def grams_bits(self, grams: Iterable[str]) -> dict[str, int]:
        """:meth:`gram_bits` of each of ``grams`` that some node holds (absent: held by none)."""
        wanted = {gram_key(gram, self.min_span): gram for gram in grams}
        return {wanted[key]: bits for key, bits in self.keys_bits(wanted).items()}

    def keys_bits(self, keys: Iterable[Key], among: int = -1) -> dict[Key, int]:
        """:meth:`grams_bits` by k-gram key (:mod:`guard.evidence.kgrams`): the holders of each key some node holds;
        only the holders in the bit set ``among`` need be reported (the others may be, or not)."""
        return self._grams.keys_bits(keys, among)

    def token_sources(self, value: str) -> set[int]:
        """Nodes that hold a whole value token found in ``value``."""
        return set(members(self.token_bits(value)))

    def token_bits(self, value: str) -> int:
        """:meth:`token_sources`, the holders of a whole structured value of ``value``, and, when ``value`` is one
        plain decimal number, of an amount of that value (:class:`~guard.evidence.amount_values.AmountValues`)."""
        bits = self._token_bits(value)
        return bits | self.amounts.bits(value) if self.amounts.held else bits

    def _token_bits(self, value: str) -> int:
        """The holders of a value token or a whole structured value of ``value``, as a bit set."""
        get, get_whole = self.tokens.get, self.wholes.get
        bits = 0
        for token in self.tokens_in(value):
            bits |= get(token, 0)
        for whole in self._analysed(value)[0]:
            bits |= get_whole(whole.key, 0)
        return bits | self._zoned_bits(value) if self.zoned else bits

    def _zoned_bits(self, value: str) -> int:
        """Holders of a token or structured value of ``value`` that they hold only in their zones, when ``value``
        holds it outside its own zones (guard.evidence.zoned: a shared signature block makes no edge)."""
        holes = zone_holes(value)  # footers too: only values its records hold in their own zones are read here
        body = self.tokens_in(blanked(value, holes)) if holes else self.tokens_in(value)
        get = self.zoned.get
        bits = 0
        for token in body:
            bits |= get(token, 0)
        for whole in self._analysed(value)[0]:
            if not in_holes(whole.start, whole.end, holes):
                bits |= get(whole.key, 0)
        return bits

    def whole_bits(self, value: str) -> int:
        """Nodes holding a whole structured value found in ``value`` (its normal form), as a bit set."""
        get_whole = self.wholes.get
        bits = 0
        for whole in self._analysed(value)[0]:
            bits |= get_whole(whole.key, 0)
        return bits | self._zoned_bits(value) if self.zoned else bits

    def identifier_bits(self, value: str) -> int:
        """Nodes that name ``value`` as an identifier, as a bit set."""
        return to_bits(self.identifiers.get(value, ()))


class NormalizingValueIndex(ValueIndex):
    """A :class:`ValueIndex` that indexes and looks up raw *and* normalized text (``graph.normalize``)."""

    def add(self, node: int, text: str, identifiers: Iterable[str], exact: bool = False) -> None:
        """Index ``text`` and its normal form (k-grams, value tokens, identifiers) under ``node``.

        The k-grams of both forms are posted in one pass, as one text: a k-gram both forms hold (most of a
        text's lower-case stretches) takes one posting update, and the node one small-form entry."""
        idents = list(identifiers)
        free, near = self._collect(node, text, idents, exact)
        norm = normalize_value(text)
        norm_idents = [normalize_value(i) for i in idents]
        if norm != text or norm_idents != idents:
            norm_free, norm_near = self._collect(node, norm, norm_idents, exact, raw=False)
            free |= norm_free
            near |= norm_near
        self._post(node, free, near)

    def span_bits(self, value: str) -> int:
        """Nodes sharing a ``min_span`` span with ``value`` or with its normal form (a bit set)."""
        found = super().span_bits(value)
        norm = normalize_value(value)
        if norm == value:
            return found
        runs, self.runs = self.runs, None  # a weak run's normal form is the same run
        exact_runs, self.exact_runs = self.exact_runs, None
        found |= super().span_bits(norm)
        self.runs, self.exact_runs = runs, exact_runs
        return found

    def token_bits(self, value: str) -> int:
        """Nodes holding a whole value token of ``value`` or of its normal form (a bit set)."""
        found = super().token_bits(value)
        norm = normalize_value(value)
        return found | self._token_bits(norm) if norm != value else found  # "1110.9" normalised is 11109


def index_for(policy: Policy) -> ValueIndex:
    """An empty value index with the policy's graph rules (normalisation, whole values, background)."""
    spec = policy.graph
    index_type = NormalizingValueIndex if spec.normalize else ValueIndex
    table = table_for(policy)
    boilerplate = table.boilerplate(spec.min_span) if table is not None else frozenset()
    patterns = spec.value_patterns.values()
    return index_type(patterns, spec.min_span, boilerplate, whole_values=spec.whole_values, shapes=True)


@lru_cache(maxsize=8192)
def _cached_read(value: str) -> tuple[tuple[int, int], ...]:
    """:func:`_read` of a text of at most :data:`_CACHED_CHARS` characters (arguments repeat)."""
    return read_ranges_of(value, _analysis(value)[0])


@lru_cache(maxsize=8)
def _boilerplate_keys(boilerplate: frozenset[str], k: int) -> frozenset[Key]:
    """The k-gram keys of ``boilerplate`` (one table serves every session: computed once, not per session)."""
    return frozenset(gram_key(gram, k) for gram in boilerplate)


_Analysis: TypeAlias = "tuple[tuple[Value, ...], tuple[tuple[int, int], ...]]"
_CACHED_CHARS = 4096  # texts up to this long share one analysis (tool outputs and arguments repeat)


def _analyse(text: str) -> _Analysis:
    """The structured values of ``text`` and its free ranges (:mod:`guard.evidence.values`): a pure function."""
    values = find_values(text)
    return tuple(values), tuple(free_ranges(text, values))


_analysis = lru_cache(maxsize=8192)(_analyse)
_mark = partial(marked, cached=_analysis, uncached=_analyse)  # with identifiers (guard.evidence.boilerplate)
_marked = lru_cache(maxsize=8192)(_mark)


def values_of(text: str) -> tuple[Value, ...]:
    """:func:`guard.evidence.values.find_values` of ``text``, kept for texts of at most :data:`_CACHED_CHARS`
    characters (one proposal's values are read by the index, the trust rules and the scorer in turn)."""
    return _analysis(text)[0] if len(text) <= _CACHED_CHARS else tuple(find_values(text))


@lru_cache(maxsize=8192)
def _cached_tokens(sources: tuple[str, ...], mode: int, text: str) -> frozenset[str]:
    """:func:`~guard.evidence.value_parts.free_tokens` of a text of at most :data:`_CACHED_CHARS` characters
    (texts repeat across the episodes of one corpus and between a proposal's decision and its indexing)."""
    analysis = (_marked(text) if mode == 2 else _analysis(text)) if mode else ((), ((0, len(text)),))
    return free_tokens(sources, analysis, text)


def _inner_tokens(sources: tuple[str, ...], text: str) -> frozenset[str]:
    """:func:`guard.evidence.value_parts.wrapped_tokens` of ``text``, from its analysis."""
    return wrapped_tokens(sources, text, (_analysis(text) if len(text) <= _CACHED_CHARS else _analyse(text))[0])


_cached_inner_tokens = lru_cache(maxsize=8192)(_inner_tokens)
