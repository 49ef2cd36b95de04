"""The rules of a policy's ``ledger:`` section (:class:`guard.policy.ledger.LedgerSpec`), over executed proposals.

:func:`declared_events` gives the categories that executing one proposal charges, from the
proposal, the records before it and the policy's tool metadata.  "Named by the user" compares
normalized text (lower case, whitespace collapsed) with the user's turns before the proposal, except
where naming exempts a destination: a recipient the user named (``user_named_ok``,
``user_named_recipient_ok``) is named exactly, as the gate reads user-named values
(:func:`guard.evidence.trust.trusted_value`: the whole value, ASCII case aside; a part of an address or a
look-alike is not named).

Destinations are matched by the gate's own exact matchers for ``trust.internal``
(:func:`guard.evidence.trust.internal_value`, and :func:`~guard.evidence.trust.all_internal` for a whole send,
which reads every argument: a ``cc`` the policy did not declare counts): ``privacy_flow.allowed_destinations``
(default ``trust.internal``) and, for an ``attacker_directed`` rule without an allow-list of its own,
``trust.internal``.  ``allow_identifiers`` and ``allow_domains`` match exactly too
(:func:`guard.evidence.destinations.exact_key`; docs/evidence.md#trust-is-granted-on-an-exact-match).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from guard.evidence.destinations import exact_key, exact_text
from guard.evidence.owned import foreign_data, free_texts, owner_flow, related
from guard.evidence.trust import all_internal, internal_value, trusted_value
from guard.ledger.bounds import out_of_bounds, third_party_only
from guard.policy import Policy, ToolSpec
from guard.policy.ledger import LedgerSpec, PrivacyFlowRule, ProtectedToolsRule, RecipientRule, UntrustedReuseRule
from guard.policy.trust import InternalSpec
from guard.policy.trusted_urls import strict_url
from guard.records import Record, RecordKind, Trust

_WS = re.compile(r"\s+")
_SPLIT = re.compile(r"[,;\s]+")


def normalize_text(text: str) -> str:
    """Lower case with every whitespace run collapsed to one space."""
    return _WS.sub(" ", text.replace("\\n", " ")).strip().lower()


def declared_events(policy: Policy, record: Record, earlier: Sequence[Record]) -> frozenset[str]:
    """Categories of ``policy.ledger`` that executing ``record`` (after ``earlier``) charges."""
    spec = policy.ledger
    tool = policy.tool(record.tool or "")
    if spec is None or tool is None:
        return frozenset()
    turns = tuple(r.text for r in earlier if r.kind is RecordKind.USER)
    bounded = {b.category for b in spec.bounds if b.tool == record.tool and out_of_bounds(policy, b, record, earlier)}
    return frozenset(_fired(spec, policy, tool, record, earlier, turns)) | bounded


def _fired(
    spec: LedgerSpec, policy: Policy, tool: ToolSpec, record: Record, earlier: Sequence[Record], turns: tuple[str, ...]
) -> Iterator[str]:
    name = record.tool or ""
    user_text = normalize_text(" ".join(turns))
    privacy, reuse = spec.privacy_flow, spec.untrusted_instruction
    if privacy and _watched(policy, name, privacy.sinks) and not _to_allowed(privacy, policy, tool, record):
        owned = _owned(policy, record, earlier)
        allowed = _allowed_spec(privacy.allowed_destinations, policy)
        if foreign_data(policy, record, owned, allowed) or (
            not (privacy.user_named_recipient_ok and _user_named_recipients(tool, record, turns))
            and not owner_flow(policy, record, owned, allowed)
            and _privacy_flow(privacy, tool, record, earlier, user_text)
        ):
            yield "privacy_flow"
    if spec.attacker_directed and _recipient_outside(spec, policy, tool, record, turns):
        yield "attacker_directed"
    if spec.destructive and _protected(spec.destructive, tool, record, user_text):
        yield "destructive"
    change = spec.credential_change
    if change and (change.supplied_args or {}).get(name) is not None:
        args = (change.supplied_args or {})[name]
        if any(third_party_only(policy, v, earlier, turns) for v in _values(record, args) if v.strip()):
            yield "credential_change"
    elif change and _protected(change, tool, record, user_text):
        yield "credential_change"
    if (
        reuse
        and _watched(policy, name, reuse.sinks)
        and not (reuse.user_named_recipient_ok and _user_named_recipients(tool, record, turns))
        and not _reuse_allowed(reuse, policy, tool, record)
        and _untrusted_reuse(reuse, policy, tool, record, earlier, user_text)
    ):
        yield "untrusted_instruction"


def _watched(policy: Policy, name: str, sinks: tuple[str, ...] | None) -> bool:
    if sinks is not None:
        return name in sinks
    spec = policy.tool(name)
    return spec is not None and spec.is_sink


def _values(record: Record, names: Iterable[str] | None) -> list[str]:
    """Leaf values (raw text) of the named arguments; every argument when ``names`` is None or empty."""
    wanted = set(names or ())
    return [value for arg, value in record.arg_values() if not wanted or arg in wanted]


def _outgoing(tool: ToolSpec, record: Record) -> list[str]:
    return _values(record, (*tool.payload_args, *tool.identifier_args))


def _named(value: str, user_text: str) -> bool:
    text = normalize_text(value)
    return bool(text) and text in user_text


def _texts(earlier: Sequence[Record], trust: Trust) -> list[str]:
    """Texts of earlier successful results that are private (``Trust.TOOL_PRIVATE``) or untrusted
    (``Trust.TOOL_UNTRUSTED``); a result of a tool that is both counts as both."""
    private = trust is Trust.TOOL_PRIVATE
    return [
        r.text
        for r in earlier
        if r.kind is RecordKind.RESULT and (r.trust.private if private else r.trust.untrusted) and r.status == "ok"
    ]


def _owned(policy: Policy, record: Record, earlier: Sequence[Record]) -> list[Record]:
    """The earlier successful private results the call shares data with (docs/ledger-rules.md#owners)."""
    private = [r for r in earlier if r.kind is RecordKind.RESULT and r.trust.private and r.status == "ok"]
    return related(policy, record, private) if any(s.owner for s in policy.tools.values()) else []


def _allowed_spec(allowed: InternalSpec | None, policy: Policy) -> InternalSpec:
    return allowed if allowed is not None else policy.trust.internal


def _reuse_allowed(rule: UntrustedReuseRule, policy: Policy, tool: ToolSpec, record: Record) -> bool:
    """The quote goes to allowed destinations (``allowed_destinations``; ``internal``: ``trust.internal``),
    read as :func:`_to_allowed` reads ``privacy_flow``'s."""
    spec = rule.allowed_destinations
    allowed = policy.trust.internal if spec == "internal" else spec
    if not isinstance(allowed, InternalSpec) or not allowed.declared() or not tool.identifier_args:
        return False
    return all_internal(allowed, tool, record)


def _privacy_flow(
    rule: PrivacyFlowRule, tool: ToolSpec, record: Record, earlier: Sequence[Record], user_text: str
) -> bool:
    raw = _outgoing(tool, record)
    payload = [normalize_text(v) for v in raw]
    for pattern in rule.canary_patterns:
        if any(not _named(m.group(0), user_text) for v in raw for m in re.finditer(pattern, v)):
            return True
    private = _texts(earlier, Trust.TOOL_PRIVATE)
    found = {normalize_text(m.group(0)) for p in rule.private_patterns for t in private for m in re.finditer(p, t)}
    if any(f and f not in user_text and f in v for f in found for v in payload):
        return True
    if rule.private_span is not None:
        return _shares_span(payload, private, rule.private_span, user_text)
    return False


def _to_allowed(rule: PrivacyFlowRule, policy: Policy, tool: ToolSpec, record: Record) -> bool:
    """The send goes where private data may go: the tool has identifier arguments, at least one value is
    given, every non-blank value names an allowed destination (``allowed_destinations``, else
    ``trust.internal``; an explicit ``{}`` allows none), and every other argument carries only allowed
    destinations (:func:`guard.evidence.trust.all_internal`, the gate's reading)."""
    allowed = rule.allowed_destinations if rule.allowed_destinations is not None else policy.trust.internal
    if not allowed.declared() or not tool.identifier_args:
        return False
    return all_internal(allowed, tool, record)


def _user_named_recipients(tool: ToolSpec, record: Record, turns: tuple[str, ...]) -> bool:
    """The user asked for it: the sink has identifier arguments, and a user turn names every one of their
    values exactly (:func:`_named_exactly`)."""
    recipients = [v for v in _values(record, tool.identifier_args) if v.strip()] if tool.identifier_args else []
    return bool(recipients) and all(_named_exactly(v, turns) for v in recipients)


def _named_exactly(value: str, turns: tuple[str, ...]) -> bool:
    """Whether a user turn names the whole ``value`` as the gate reads user-named values
    (:func:`guard.evidence.trust.trusted_value`); a blank value is named by nobody."""
    return bool(value.strip()) and any(trusted_value(value, turn) for turn in turns)


def _shares_span(values: list[str], texts: list[str], span: int, user_text: str) -> bool:
    """Some window of ``span`` characters of a value stands in one of ``texts`` and not in the user's turns."""
    if not texts:
        return False
    grams: set[str] = set()
    for text in (normalize_text(t) for t in texts):
        grams.update(text[i : i + span] for i in range(len(text) - span + 1))
    for value in values:
        for i in range(len(value) - span + 1):
            window = value[i : i + span]
            if window in grams and window not in user_text:
                return True
    return False


def _host(value: str) -> str | None:
    """The domain of an e-mail address or the host of a URL that is the whole ``value`` (angle brackets and
    a sentence's punctuation around it aside), read exactly: ASCII only, ASCII case folded
    (:func:`guard.evidence.destinations.exact_key`, :func:`guard.policy.trusted_urls.strict_url`)."""
    token = exact_text(value).strip("<>.,;:")
    url = strict_url(token) if "://" in token or token[:4].lower() == "www." else None
    if url is not None:
        return url.host
    key = exact_key(token)
    return key.rpartition("@")[2] if key.startswith("email:") else None


def _allowed(value: str, rule: RecipientRule) -> bool:
    """Whether the rule's own allow-list names ``value`` exactly: an identifier by its exact key, a domain
    by the value's host at a label boundary."""
    if exact_key(value) in {exact_key(a) for a in rule.allow_identifiers}:
        return True
    host = _host(value)
    return host is not None and any(host == d.lower() or host.endswith("." + d.lower()) for d in rule.allow_domains)


def _recipient_outside(
    spec: LedgerSpec, policy: Policy, tool: ToolSpec, record: Record, turns: tuple[str, ...]
) -> bool:
    rule = spec.attacker_directed
    args = spec.recipient_args(record.tool or "", tool.identifier_args, tool.is_sink)
    if rule is None or not args:
        return False
    internal = None if rule.states_allow_list() or not policy.trust.internal.declared() else policy.trust.internal
    for value in _values(record, args):
        if internal is not None and value.strip() and internal_value(internal, value):
            continue
        for token in (t for t in _SPLIT.split(value) if t):
            if rule.user_named_ok and _named_exactly(token, turns):
                continue
            if not (_allowed(token, rule) or (internal is not None and internal_value(internal, token))):
                return True
    return False


def _protected(rule: ProtectedToolsRule, tool: ToolSpec, record: Record, user_text: str) -> bool:
    name = record.tool or ""
    if name not in rule.tools:
        return False
    args = (rule.object_args or {}).get(name) or tool.identifier_args or None
    scope = rule.scope()
    return any(
        v.strip() and not _named(v, user_text) and (scope is None or any(re.search(p, v) for p in scope))
        for v in _values(record, args)
    )


def _untrusted_reuse(
    rule: UntrustedReuseRule, policy: Policy, tool: ToolSpec, record: Record, earlier: Sequence[Record], user_text: str
) -> bool:
    """A span of an earlier untrusted result's third-party text (its free text, when its tool declares
    ``trusted_fields``: :func:`guard.evidence.owned.free_texts`) stands in the payload."""
    payload = [normalize_text(v) for v in _outgoing(tool, record)]
    untrusted = [r for r in earlier if r.kind is RecordKind.RESULT and r.trust.untrusted and r.status == "ok"]
    texts = [t for r in untrusted for t in free_texts(policy, r)]
    return _shares_span(payload, texts, rule.min_span, user_text)


__all__ = ["declared_events", "normalize_text"]
