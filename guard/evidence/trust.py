"""Trusted evidence: arguments the user named in their own turn, or that the policy's allow-lists name.

A call whose every argument value is trusted carries nothing the user did not ask for, to a place
the user or the deployment chose.  Every value counts, not only those of ``payload_args`` and
``identifier_args``: the prefix graph makes edges from every argument, so a private value in an
argument the policy did not list (a subject, a cc, a nested key) is evidence too.  For such a call
the scorer leaves out the data-flow features (:data:`guard.features.DATAFLOW`): the evidence that a value came from a
private or untrusted record is answered by the stronger evidence that the user or the deployment
named it.  Features of the action itself (severity, an irreversible sink, injection text in the
context, a canary in the payload) still count, since trust in the arguments says nothing about
whether to act.

An argument value is trusted when

- the ``trust`` section of the policy allows it: an e-mail address in ``recipients``, an e-mail
  address or URL whose domain or host is one of ``domains`` (or a subdomain), a URL at or under one
  of ``url_prefixes`` at a path-segment boundary.  A URL is compared only when every common client
  reads its host and path the same way (:mod:`guard.policy.trusted_urls`: no user-info, backslash,
  control character, encoded or non-ASCII host, IP address or odd port), and a prefix must hold
  however a client or server resolves dot segments, decodes the path or cuts ``;params``; or
- ``trust.user_named`` is on (the default) and a user turn earlier in the session names the value:
  a value that is one structured value as the same whole value (a URL: the same URL in every
  reading), other text as whole words (as written or with ASCII letters folded), see :func:`trusted_value`.

Every match here grants trust, so every match is exact (:func:`guard.evidence.destinations.exact_key`:
surrounding ASCII spaces and ASCII case aside, nothing else): the loose normal form that finds provenance
(:func:`guard.evidence.normalize.normalize_value`) would let a look-alike (``#opſ``, ``＃ops``, a
zero-width variant) pass for the value the user or the policy named.  See
docs/evidence.md#trusted-evidence-may-lower-a-score and docs/evidence.md#trust-is-granted-on-an-exact-match.

Why an attacker cannot write this evidence: a user turn enters the session only through
``Session.observe_user``, which the integrator calls with the human's own message, and tool output
enters only as results or content whose trust the policy fixes; the policy is a file of the
deployment, loaded at start-up and frozen.  Text an attacker plants in e-mails, web pages or tool
results is never a user turn and never edits the policy, so adding it cannot make an argument
trusted: trust reads only user turns, the policy and the call's own arguments.  An integrator who
passes tool output to ``observe_user`` breaks that premise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from guard.evidence.destinations import ascii_fold, carried, exact_key, exact_text
from guard.evidence.normalize import normalize_value
from guard.evidence.value_index import values_of
from guard.evidence.values import find_values
from guard.policy import Policy, ToolSpec
from guard.policy.trust import InternalSpec, TrustSpec
from guard.policy.trusted_urls import StrictUrl, host_allowed, host_in_domain, same_url, strict_url, under
from guard.records import Record, RecordKind

__all__ = [
    "all_internal",
    "carried_internal",
    "internal_call",
    "internal_value",
    "session_internal",
    "trusted_call",
    "trusted_value",
]

_WORDS = re.compile(r"[\s,;:!?()\[\]{}<>\"']+")  # what separates the words of a value (look-alikes are words)


def trusted_call(policy: Policy, turns: Iterable[str], proposal: Record) -> bool:
    """Whether every argument value of ``proposal`` is trusted, given the texts of the user turns before
    it (``turns``).

    Every string the tool receives counts (:meth:`Record.arg_values`: each leaf value, wherever it is
    nested, and whatever else that method yields), not only the ``payload_args`` and
    ``identifier_args``: the prefix graph makes edges from every argument, so a value the policy did
    not list (a subject, a cc, a nested key) is evidence too.  A blank value carries nothing.  A call
    of a tool the policy does not know, of a tool with no risky argument, or whose risky arguments are
    all blank, is not trusted: there is nothing that vouches for it.
    """
    spec = policy.tool(proposal.tool or "") if proposal.kind is RecordKind.PROPOSAL else None
    if spec is None:
        return False
    risky = set(spec.payload_args) | set(spec.identifier_args)
    listed: list[str] = []
    other: list[str] = []
    for name, value in proposal.arg_values():
        if value.strip():
            (listed if name in risky else other).append(value)
    if not listed:
        return False
    said: list[str] | None = None
    for value in listed + other:  # the listed arguments first: they are the likeliest to be untrusted
        if _allowed(policy.trust, value):
            continue
        if not policy.trust.user_named:
            return False
        said = list(turns) if said is None else said
        if not any(trusted_value(value, turn) for turn in said):
            return False
    return True


def session_internal(internal: InternalSpec, vouched: InternalSpec | None) -> InternalSpec:
    """The destinations internal to one session: the policy's ``trust.internal`` and what the application
    vouched for in this session (``Session.vouch``, docs/policy.md#vouched-destinations), matched alike."""
    if vouched is None or not vouched.declared():
        return internal
    return _merged(internal, vouched)


@lru_cache(maxsize=256)
def _merged(a: InternalSpec, b: InternalSpec) -> InternalSpec:
    def both(name: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*getattr(a, name), *getattr(b, name))))

    return InternalSpec(**{name: both(name) for name in ("recipients", "domains", "url_prefixes", "identifiers")})


def internal_call(policy: Policy, proposal: Record, vouched: InternalSpec | None = None) -> bool:
    """Whether ``proposal`` is a sink call whose every destination is one of the deployment's internal
    destinations (``trust.internal``, docs/policy.md#internal-destinations).

    The sink's ``identifier_args`` must name a destination (at least one non-blank string, each leaf and
    nested key, :meth:`Record.arg_values`) and each of their values must be internal as a whole
    (:func:`internal_value`).  Every other argument counts too, at any depth (:func:`carried_internal`): a
    ``cc`` or a nested ``forward`` field the policy did not declare may send the data elsewhere.  A tool
    that is not a sink, has no ``identifier_args``, or is unknown is never internal: nothing says where its
    data goes.  The policy file is the only place a destination can be added (module docstring): text in a
    tool result or an e-mail never is; ``vouched`` adds what the application vouched for in this session
    (:func:`session_internal`).
    """
    internal = session_internal(policy.trust.internal, vouched)
    if not internal.declared() or proposal.kind is not RecordKind.PROPOSAL:
        return False
    spec = policy.tool(proposal.tool or "")
    if spec is None or not spec.is_sink or not spec.identifier_args:
        return False
    return all_internal(internal, spec, proposal)


def all_internal(internal: InternalSpec, spec: ToolSpec, record: Record) -> bool:
    """Whether every destination of ``record`` (a call of the tool ``spec``) is internal to ``internal``: its
    ``identifier_args`` hold at least one non-blank value and each is internal as a whole, and every other
    argument value carries only internal destinations (:func:`carried_internal`)."""
    names = set(spec.identifier_args)
    payload = set(spec.payload_args) - names
    declared = False
    for name, value in record.arg_values():
        if not value.strip():
            continue
        if name in names:
            if not internal_value(internal, value):
                return False
            declared = True
        elif not carried_internal(internal, value, declared_payload=name in payload):
            return False
    return declared


def carried_internal(internal: InternalSpec, value: str, *, declared_payload: bool) -> bool:
    """Whether every destination the argument ``value`` carries is internal: the destinations
    :func:`guard.evidence.destinations.carried` finds (URLs; in an argument the policy did not declare,
    also addresses, numbers, accounts, ``#``/``@`` handles), and any word of it that reads as an internal
    destination only in the loose normal form (``#opſ``, ``＃ops``: a look-alike names another place) --
    a word that is the internal destination exactly is internal.  The loose form here only *adds* words that
    must then pass the exact test (:func:`internal_value`): it can take trust away, never grant it."""
    found = carried(value, declared_payload=declared_payload)
    loose = _loose_forms(internal)
    if loose:
        words = (w.rstrip(".") for w in (value, *_WORDS.split(value)))
        found += [w for w in words if w and normalize_value(w) in loose]
    return all(internal_value(internal, d) for d in found)


@lru_cache(maxsize=64)
def _loose_forms(internal: InternalSpec) -> frozenset[str]:
    """The loose normal forms of the internal identifiers and recipients: what a look-alike reads as."""
    return frozenset(normalize_value(i) for i in (*internal.identifiers, *internal.recipients))


def internal_value(internal: InternalSpec, value: str) -> bool:
    """Whether the whole argument ``value`` names an internal destination exactly
    (:func:`guard.evidence.destinations.exact_key`): one of ``identifiers`` (surrounding spaces and ASCII
    case aside), or a recipient, domain or URL prefix matched as the trust allow-lists match (:func:`_allowed`)."""
    if exact_key(value) in _identifier_set(internal):
        return True
    return _allowed(internal, value)


@lru_cache(maxsize=64)
def _identifier_set(internal: InternalSpec) -> frozenset[str]:
    return frozenset(exact_key(i) for i in internal.identifiers)


def trusted_value(value: str, turn: str) -> bool:
    """Whether the user turn ``turn`` names ``value``, exactly (docs/evidence.md#trust-is-granted-on-an-exact-match).

    A value that is one structured value is named only as that whole value, with the same exact key
    (:func:`guard.evidence.destinations.exact_key`): a part of an address the user gave
    (``r@corp.com`` inside ``manager@corp.com``) is not named.  A URL is named only when it and a URL
    of the turn read the same in every client (:func:`guard.policy.trusted_urls.same_url`); a URL some
    client could read otherwise (:func:`~guard.policy.trusted_urls.strict_url` gives ``None``) is never
    named.  Other text is named when it stands in the turn as whole words, as written or with ASCII
    letters folded; no other normal form counts (``#opſ`` is not ``#ops``, ``10.00`` is not ``1000``).
    """
    text = exact_text(value)
    if not value.strip():
        return True
    if _whole_url(text):
        url = strict_url(text)
        return url is not None and any(same_url(url, named) for named in _turn_urls(turn))
    folded_turn, keys = _turn_forms(turn)
    found = values_of(text)
    if len(found) == 1 and (found[0].start, found[0].end) == (0, len(text)):
        return exact_key(text) in keys
    return _whole_words_in(text, turn) or _whole_words_in(ascii_fold(text), folded_turn)


def _whole_words_in(text: str, turn: str) -> bool:
    """Whether ``text`` occurs in ``turn`` with no letter or digit right before or after it."""
    start = turn.find(text)
    while start >= 0:
        end = start + len(text)
        before = turn[start - 1] if start else " "
        after = turn[end] if end < len(turn) else " "
        if not (before.isalnum() and text[0].isalnum()) and not (after.isalnum() and text[-1].isalnum()):
            return True
        start = turn.find(text, start + 1)
    return False


@lru_cache(maxsize=256)
def _turn_forms(turn: str) -> tuple[str, frozenset[str]]:
    """A user turn with ASCII letters folded and the exact keys of its structured values (a turn is read at
    many calls)."""
    return ascii_fold(turn), frozenset(exact_key(turn[v.start : v.end]) for v in find_values(turn))


@lru_cache(maxsize=256)
def _turn_urls(turn: str) -> tuple[StrictUrl, ...]:
    """The URLs of a user turn that every common client reads the same (:func:`strict_url`)."""
    urls = (strict_url(turn[v.start : v.end]) for v in values_of(turn) if v.kind == "url" and not v.nested)
    return tuple(url for url in urls if url is not None)


def _allowed(trust: TrustSpec | InternalSpec, value: str) -> bool:
    """Whether the policy's allow-lists name the whole argument ``value``, exactly (:func:`exact_key`).

    A URL is compared only in the form every common client reads it (:mod:`guard.policy.trusted_urls`):
    one some client could read otherwise is not allowed by any list, a recipient that is a URL must be
    the same URL in every reading, and a prefix must hold in every reading of the path.
    """
    if not (trust.recipients or trust.domains or trust.url_prefixes):
        return False
    if _whole_url(value):
        return _url_allowed(trust, value)
    key = exact_key(value)
    if key in _lists(trust).recipient_keys:
        return True
    return key.startswith("email:") and _email_allowed(key, trust.domains)


def _whole_url(value: str) -> bool:
    """Whether ``value`` is one URL (values inside its path or query, such as a file name, are part of it)."""
    text = value.strip()
    if "://" not in text and text[:4].lower() != "www.":  # no URL can span it: skip the value scan
        return False
    outer = [v for v in values_of(text) if not v.nested]
    return len(outer) == 1 and outer[0].kind == "url" and (outer[0].start, outer[0].end) == (0, len(text))


def _url_allowed(trust: TrustSpec | InternalSpec, value: str) -> bool:
    url = strict_url(value)
    if url is None:
        return False
    lists = _lists(trust)
    return (
        host_allowed(url, trust.domains)
        or any(same_url(url, named) for named in lists.recipient_urls)
        or any(under(url, prefix) for prefix in lists.prefixes)
    )


def _email_allowed(key: str, domains: tuple[str, ...]) -> bool:
    """Whether the e-mail key's domain is allowed; a ``%`` in the local part (the old ``user%host@relay``
    source route, which some relays still forward to ``host``) is never allowed by domain."""
    local, _, domain = key.removeprefix("email:").rpartition("@")
    return "%" not in local and any(host_in_domain(domain, d) for d in domains)


@dataclass(frozen=True, slots=True)
class _AllowLists:
    recipient_keys: frozenset[str]
    recipient_urls: tuple[StrictUrl, ...]
    prefixes: tuple[StrictUrl, ...]


@lru_cache(maxsize=64)
def _lists(trust: TrustSpec | InternalSpec) -> _AllowLists:
    """The allow-lists of ``trust`` in the forms compared (read once per policy, not once per value)."""
    recipient_urls = (strict_url(r) for r in trust.recipients if _whole_url(r))
    prefixes = (strict_url(p) for p in trust.url_prefixes)
    return _AllowLists(
        frozenset(exact_key(r) for r in trust.recipients if not _whole_url(r)),
        tuple(url for url in recipient_urls if url is not None),
        tuple(url for url in prefixes if url is not None),
    )
