"""Trusted evidence: arguments the user named in their own turn, or that the policy's allow-lists name.

A call whose every risky argument (each value of its ``payload_args`` and ``identifier_args``) is
trusted carries nothing the user did not ask for, to a place the user or the deployment chose.  For
such a call the scorer leaves out the data-flow features (:data:`LOWERED`): the evidence that a value
came from a private or untrusted record is answered by the stronger evidence that the user or the
deployment named it.  Features of the action itself (severity, an irreversible sink, injection text
in the context, a canary in the payload) still count, since trust in the arguments says nothing
about whether to act.

An argument value is trusted when

- the ``trust`` section of the policy allows it: an e-mail address in ``recipients``, an e-mail
  address or URL whose domain or host is one of ``domains`` (or a subdomain), a URL that starts
  with one of ``url_prefixes`` (compared in normal form: :mod:`guard.values`); or
- ``trust.user_named`` is on (the default) and a user turn earlier in the session names the value:
  a value that is one structured value as the same whole value, other text as whole words (as
  written or after :func:`guard.normalize.normalize_value`), see :func:`trusted_value`.

Why an attacker cannot write this evidence: a user turn enters the session only through
``Session.observe_user``, which the integrator calls with the human's own message, and tool output
enters only as results or content whose trust the policy fixes; the policy is a file of the
deployment, loaded at start-up and frozen.  Text an attacker plants in e-mails, web pages or tool
results is never a user turn and never edits the policy, so adding it cannot make an argument
trusted: trust reads only user turns, the policy and the call's own arguments.  An integrator who
passes tool output to ``observe_user`` breaks that premise.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from guard.normalize import normalize_value
from guard.policy import Policy
from guard.policy.trust import TrustSpec
from guard.records import Record, RecordKind
from guard.value_index import values_of
from guard.values import find_values, host_in_domain, url_parts

__all__ = ["LOWERED", "trusted_call", "trusted_value", "whole_key"]

#: The data-flow features a fully trusted call leaves out of its score.
LOWERED: frozenset[str] = frozenset(
    {
        "provenance_path",
        "private_in_context",
        "untrusted_payload",
        "injected_value",
        "injected_short_id",
        "untrusted_only_value",
        "private_in_url",
    }
)


def trusted_call(policy: Policy, turns: Iterable[str], proposal: Record) -> bool:
    """Whether every risky argument value of ``proposal`` is trusted, given the texts of the user turns
    before it (``turns``).

    A call with no risky argument value, or of a tool the policy does not know, is not trusted: there
    is nothing that vouches for it.
    """
    spec = policy.tool(proposal.tool or "") if proposal.kind is RecordKind.PROPOSAL else None
    if spec is None:
        return False
    risky = set(spec.payload_args) | set(spec.identifier_args)
    values = [value for name, value in proposal.arg_values() if name in risky]
    if not values:
        return False
    said: list[str] | None = None
    for value in values:
        if _allowed(policy.trust, value):
            continue
        if not policy.trust.user_named:
            return False
        said = list(turns) if said is None else said
        if not any(trusted_value(value, turn) for turn in said):
            return False
    return True


def trusted_value(value: str, turn: str) -> bool:
    """Whether the user turn ``turn`` names ``value``.

    A value that is one structured value is named only as that whole value (same normal form): a
    part of an address the user gave (``r@corp.com`` inside ``manager@corp.com``) is not named.
    Other text is named when it stands in the turn as whole words, as written or in normal form.
    """
    text = value.strip()
    if not text:
        return True
    norm_turn, keys = _turn_forms(turn)
    found = values_of(text)
    if len(found) == 1 and (found[0].start, found[0].end) == (0, len(text)):
        return found[0].key in keys
    return _whole_words_in(text, turn) or _whole_words_in(normalize_value(text), norm_turn)


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
    """A user turn's normal form and the keys of its structured values (a turn is read at many calls)."""
    return normalize_value(turn), frozenset(v.key for v in find_values(turn))


def whole_key(value: str) -> str:
    """The normal form of a whole argument value: its structured value's key when the value is exactly
    one structured value (:mod:`guard.values`), else ``raw:`` and its normal form."""
    text = value.strip()
    found = values_of(text)
    if len(found) == 1 and (found[0].start, found[0].end) == (0, len(text)):
        return found[0].key
    return "raw:" + normalize_value(text)


def _allowed(trust: TrustSpec, value: str) -> bool:
    """Whether the policy's allow-lists name the whole argument ``value``."""
    if not (trust.recipients or trust.domains or trust.url_prefixes):
        return False
    key = whole_key(value)
    if key in {whole_key(r) for r in trust.recipients}:
        return True
    if key.startswith("email:"):
        return any(host_in_domain(key.rpartition("@")[2], d) for d in trust.domains)
    if key.startswith("url:"):
        if any(host_in_domain(url_parts(value.strip())[1], d) for d in trust.domains):
            return True
        return any(_under(key, whole_key(prefix)) for prefix in trust.url_prefixes)
    return False


def _under(key: str, prefix: str) -> bool:
    """Whether the URL key ``key`` is ``prefix`` or lies under it (at a ``/``, ``?`` or ``#``)."""
    return key == prefix or (key.startswith(prefix) and key[len(prefix)] in "/?#")
