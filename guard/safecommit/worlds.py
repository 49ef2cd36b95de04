"""World constructors for real tool calls (docs/safecommit.md, Support and Nonconformity).

For a side-effectful proposal the policy's constructor names the arguments to check.  Every
checked **value** (recipient, IBAN, e-mail, URL, file id, channel, user; or the value tokens of a
body) gets three candidate worlds:

- ``user``      — the user named it (a user turn holds it: an E4 edge);
- ``trusted``   — a private (or, weaker, public) tool record holds it (E2/E3 from that source);
- ``untrusted`` — third-party text holds it and the call would act on an injected value: the
  proposal is **unsafe** here.

Every checked **resource** of a deletion/overwrite gets ``disposable`` (safe) and ``shared``
(shared or protected: unsafe).  A world is "this target is so, every other target is benign", so
the support grows linearly in the number of targets; an unsafe world of any target blocks.

Provenance is matched per value, not per argument: a prefix record supports a value when its text
holds the value as a whole word (case-insensitive).  This is the graph's E2/E3/E4 rule at the
value level and also catches identifiers shorter than ``min_span`` (channel or user names).  It is
lexical: a paraphrased value has no source.  Error results never support a value.

Nonconformity ``s(ω) = Σ_c w_c · x_c(ω)`` with components in [0, 1].  Two refinements of the
trust classes: a value lies *in injection-like text* when an untrusted record holds it inside an
instruction-shaped clause (a clause that tells the reader to act, found by its grammar, not by any
attack's wording: :mod:`guard.evidence.instructions`); an untrusted
record is *delegated* when the user named an argument of the call that produced it (an E4 edge
into that call: "pay the bill in bill.txt").

==================  ==============================  =============================  ==========================
component           user / trusted world            untrusted world                resource worlds
==================  ==============================  =============================  ==========================
provenance          user: no user turn holds it;    0 in injection-like text, .5   disposable: 0 user-named,
                    trusted: 0 private record, .5   other untrusted text, 1 none   .5 record-named, else 1;
                    public or delegated, else 1                                    shared: 1 if user-named
age                 records since the newest supporting source / age_horizon      shared: 1 − disposable's
inconsistency       in injection-like text (.5 if   agreement / 2: independent     disposable: in injection-
                    a legit source also holds it)   legit sources that hold it     like text
tool_disagreement   an error result names it        a private record holds it      disposable: error result
policy              outside allow_patterns          0                              0
==================  ==============================  =============================  ==========================

The policy vouches for a value as the gate does (:func:`guard.safecommit.evidence.policy_vouches`,
which calls :func:`guard.evidence.trust.trusted_call` and :func:`~guard.evidence.trust.internal_call`):
an allow-list of ``trust`` names it, it is a destination ``trust.internal`` names, or (with
``trust.user_named``) a user turn names it as the gate reads turns.  Such a value's ``untrusted``
world is dropped as hard evidence (the user or the deployment chose the value), and its legitimate
world counts the policy as a source: listed or internal, the ``trusted`` world has provenance 0 and
age 0 (the policy file is a trusted, current source); user-named, the ``user`` world has provenance 0.

Hard evidence drops worlds before scoring: ``deny_patterns`` drop the legitimate worlds of a value
(and outrank the policy's vouching: the value keeps its ``untrusted`` world); a value the policy
vouches for loses its ``untrusted`` world; with no untrusted record in the prefix at all the
``untrusted`` world is dropped;
``protected_patterns`` drop ``disposable``, ``disposable_patterns`` drop ``shared``.  A target that
loses every world leaves no consistent world: the support is empty (→ ``abstain``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from guard.evidence.destinations import ascii_fold
from guard.policy.safecommit import (
    AlternativeSpec,
    Nonconformity,
    ResourceCheck,
    SafeCommitSpec,
    ValueCheck,
)
from guard.records import Record
from guard.safecommit.evidence import VOUCHED_USER, policy_vouches, seen_untrusted
from guard.safecommit.evidence import Evidence as Evidence
from guard.safecommit.evidence import gather_evidence as gather_evidence
from guard.safecommit.fallback import AUTHORITY_FACT, AUTHORITY_MISSING, EVIDENCE_FACT, EVIDENCE_PENDING
from guard.safecommit.types import World

if TYPE_CHECKING:
    from guard.graph import PrefixGraph
    from guard.policy import Policy

Kind = Literal["user", "trusted", "untrusted", "disposable", "shared", "unchecked"]
PROPOSAL_SAFE: frozenset[str] = frozenset({"user", "trusted", "disposable", "unchecked"})
UNSAFE_KINDS: frozenset[str] = frozenset({"untrusted", "shared"})
COMPONENTS: tuple[str, ...] = ("provenance", "age", "inconsistency", "tool_disagreement", "policy")
NO_TARGET = "no_checked_values"
_CLIP = 60


@dataclass(frozen=True)
class Target:
    """One checked value or resource of the proposal."""

    key: str
    arg: str
    value: str
    check: Literal["value", "resource"]
    fallback: str


@dataclass(frozen=True)
class Candidate:
    """A candidate world: the controller's :class:`World` plus where it came from."""

    world: World
    kind: Kind
    target: str
    components: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Support:
    """The support of one proposal after hard-evidence filtering."""

    tool: str
    targets: tuple[Target, ...]
    candidates: tuple[Candidate, ...]
    evidence: Mapping[str, Evidence]
    dropped: tuple[tuple[str, str], ...] = ()
    empty_reason: str | None = None

    @property
    def worlds(self) -> tuple[World, ...]:
        """The candidate worlds, in order."""
        return tuple(c.world for c in self.candidates)

    def safety(self, actions: Sequence[tuple[str, frozenset[str]]]) -> dict[str, list[str]]:
        """Γ as world name → safe action names, from each action's set of safe world kinds."""
        return {c.world.name: [name for name, ok in actions if c.kind in ok] for c in self.candidates}

    def to_log(self) -> dict[str, Any]:
        """Targets, candidate worlds with their components, dropped worlds (JSON-safe)."""
        return {
            "targets": [{"key": t.key, "arg": t.arg, "check": t.check} for t in self.targets],
            "candidates": [
                {
                    "world": c.world.name,
                    "kind": c.kind,
                    "target": c.target,
                    "score": round(c.world.score, 6),
                    "components": {k: round(v, 6) for k, v in c.components.items()},
                }
                for c in self.candidates
            ],
            "evidence": {key: ev.to_log() for key, ev in self.evidence.items()},
            "dropped": [{"world": w, "reason": r} for w, r in self.dropped],
            "empty_reason": self.empty_reason,
        }


def action_safe_kinds(alt: AlternativeSpec | None) -> frozenset[str]:
    """World kinds where the proposal (``None``) or an alternative is safe."""
    if alt is None:
        return PROPOSAL_SAFE
    if alt.kind == "noop":
        return PROPOSAL_SAFE | UNSAFE_KINDS
    return frozenset(alt.safe_in) | {"unchecked"}


# --------------------------------------------------------------------------- targets


@lru_cache(maxsize=256)
def _token_regex(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


def _leaves(record: Record, arg: str) -> list[str]:
    return [value.strip() for name, value in record.arg_values() if name == arg and value.strip()]


def find_targets(record: Record, spec: SafeCommitSpec, policy: Policy) -> list[Target]:
    """The checked values and resources of a proposal, deduplicated per argument."""
    tool_spec = policy.tool(record.tool or "")
    ctor = spec.constructor(record.tool or "", tool_spec.identifier_args if tool_spec else ())
    found: list[tuple[str, str, Literal["value", "resource"], str]] = []
    for check in ctor.values:
        for value in _check_values(record, check, policy):
            found.append((check.arg, value, "value", check.fallback))
    for res in ctor.resources:
        for value in _leaves(record, res.arg):
            found.append((res.arg, value, "resource", res.fallback))
    out: list[Target] = []
    seen: set[tuple[str, str, str]] = set()
    keys: set[str] = set()
    for arg, value, kind, fallback in found:
        if (arg, ascii_fold(value), kind) in seen or len(value) < 2:  # a look-alike is another target
            continue
        seen.add((arg, ascii_fold(value), kind))
        key = _key(arg, value, arg in policy.audit.raw_args)
        while key in keys:
            key += "'"
        keys.add(key)
        out.append(Target(key=key, arg=arg, value=value, check=kind, fallback=fallback))
    return out


def _key(arg: str, value: str, raw: bool) -> str:
    """``arg=value`` when the policy logs the argument raw, else ``arg#<hash>`` (audit entries, docs/audit.md)."""
    if raw:
        return f"{arg}={value if len(value) <= _CLIP else value[:_CLIP] + '...'}"
    return f"{arg}#{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def _check_values(record: Record, check: ValueCheck, policy: Policy) -> list[str]:
    leaves = _leaves(record, check.arg)
    if check.extract == "whole":
        return leaves
    patterns = policy.graph.value_patterns
    names = check.patterns or tuple(patterns)
    regex = _token_regex(tuple(patterns[n] for n in names if n in patterns))
    if regex is None:
        return []
    return [m.group(0) for leaf in leaves for m in regex.finditer(leaf)]


# --------------------------------------------------------------------------- evidence


# --------------------------------------------------------------------------- scores


def _age(node: int, sources: Sequence[int], horizon: int) -> float:
    return min(1.0, (node - max(sources)) / horizon) if sources else 1.0


def _score(components: Mapping[str, float], weights: Nonconformity) -> float:
    return float(sum(getattr(weights, name) * components[name] for name in COMPONENTS))


def _matches(patterns: tuple[str, ...], value: str) -> bool:
    return any(re.search(p, value) for p in patterns)


def _parts(provenance: float, age: float, inconsistency: float, tool: float, policy: float) -> dict[str, float]:
    return dict(zip(COMPONENTS, (provenance, age, inconsistency, tool, policy), strict=True))


def value_components(
    ev: Evidence, node: int, horizon: int, check: ValueCheck, value: str, vouched: str | None = None
) -> dict[str, dict[str, float]]:
    """The components of the user / trusted / untrusted worlds of one value (module docstring); ``vouched``:
    why the policy vouches for the value (:func:`guard.safecommit.evidence.policy_vouches`), if it does."""
    legit_policy = 1.0 if check.allow_patterns and not _matches(check.allow_patterns, value) else 0.0
    agreement = len(ev.user) + len(ev.private) + len(ev.public)
    injected = (1.0 if agreement == 0 else 0.5) if ev.injected else 0.0
    error = 1.0 if ev.errors else 0.0
    by_policy = vouched is not None and vouched != VOUCHED_USER
    trusted_prov = 0.0 if (ev.private or by_policy) else 0.5 if (ev.public or ev.delegated) else 1.0
    trusted_age = 0.0 if by_policy else _age(node, ev.private + ev.public + ev.delegated, horizon)
    user_prov = 0.0 if (ev.user or vouched == VOUCHED_USER) else 1.0
    untrusted_prov = 0.0 if ev.injected else 0.5 if ev.untrusted else 1.0
    return {
        "user": _parts(user_prov, _age(node, ev.user, horizon), injected, error, legit_policy),
        "trusted": _parts(trusted_prov, trusted_age, injected, error, legit_policy),
        "untrusted": _parts(
            untrusted_prov, _age(node, ev.untrusted, horizon), min(1.0, agreement / 2), 1.0 if ev.private else 0.0, 0.0
        ),
    }


def resource_components(ev: Evidence, node: int, horizon: int) -> dict[str, dict[str, float]]:
    """The components of the disposable / shared worlds of one resource (module docstring)."""
    named = ev.user + ev.private + ev.public
    age = _age(node, named, horizon)
    disposable_prov = 0.0 if ev.user else 0.5 if named else 1.0
    return {
        "disposable": _parts(disposable_prov, age, 1.0 if ev.injected else 0.0, 1.0 if ev.errors else 0.0, 0.0),
        "shared": _parts(1.0 if ev.user else 0.0, 1.0 - age if named else 0.0, 0.0, 0.0, 0.0),
    }


def _facts(kind: Kind, target: Target) -> dict[str, str]:
    facts = {"kind": kind, "target": target.key}
    if kind in UNSAFE_KINDS:
        if target.fallback == "escalate":
            facts[AUTHORITY_FACT] = AUTHORITY_MISSING
        elif target.fallback == "defer":
            facts[EVIDENCE_FACT] = EVIDENCE_PENDING
    return facts


def _hard_drops(
    target: Target, check: ValueCheck | ResourceCheck, untrusted_seen: bool, vouched: str | None = None
) -> dict[str, str]:
    """World kind → why hard evidence rules it out (``vouched``: why the policy vouches for the value)."""
    drops: dict[str, str] = {}
    if isinstance(check, ValueCheck):
        denied = _matches(check.deny_patterns, target.value)
        if denied:
            drops["user"] = drops["trusted"] = "value matches deny_patterns"
        if not untrusted_seen:
            drops["untrusted"] = "no untrusted record in the prefix"
        elif vouched is not None and not denied:
            drops["untrusted"] = vouched
    else:
        if _matches(check.protected_patterns, target.value):
            drops["disposable"] = "resource matches protected_patterns"
        if _matches(check.disposable_patterns, target.value):
            drops["shared"] = "resource matches disposable_patterns"
    return drops


def build_support(graph: PrefixGraph, node: int, policy: Policy, spec: SafeCommitSpec) -> Support:
    """Targets → evidence → hard filtering → scored candidate worlds, for the proposal at ``node``."""
    record = graph.records[node]
    tool = record.tool or ""
    tool_spec = policy.tool(tool)
    ctor = spec.constructor(tool, tool_spec.identifier_args if tool_spec else ())
    checks: dict[tuple[str, str], ValueCheck | ResourceCheck] = {("value", c.arg): c for c in ctor.values}
    checks.update({("resource", c.arg): c for c in ctor.resources})
    targets = find_targets(record, spec, policy)
    if not targets:
        world = World(NO_TARGET, {"kind": "unchecked"}, 0.0, 1.0)
        return Support(tool, (), (Candidate(world, "unchecked", ""),), {})
    weights, horizon = spec.nonconformity, spec.nonconformity.age_horizon
    seen = seen_untrusted(graph, node)
    candidates: list[Candidate] = []
    evidence: dict[str, Evidence] = {}
    dropped: list[tuple[str, str]] = []
    empty: str | None = None
    for target in targets:
        check = checks[(target.check, target.arg)]
        ev = evidence[target.key] = gather_evidence(graph, node, target.value)
        vouched: str | None = None
        if isinstance(check, ValueCheck):
            vouched = policy_vouches(graph, node, target.arg, target.value)
            comps = value_components(ev, node, horizon, check, target.value, vouched)
        else:
            comps = resource_components(ev, node, horizon)
        drops = _hard_drops(target, check, seen, vouched)
        kept = 0
        for kind, parts in comps.items():
            name = f"{kind}:{target.key}"
            if kind in drops:
                dropped.append((name, drops[kind]))
                continue
            score = _score(parts, weights)
            world = World(name, _facts(kind, target), score, math.exp(-score))  # type: ignore[arg-type]
            candidates.append(Candidate(world, kind, target.key, parts))  # type: ignore[arg-type]
            kept += 1
        if kept == 0 and empty is None:
            empty = f"every world of {target.key} contradicts hard evidence"
    if empty is not None:
        candidates = []
    return Support(tool, tuple(targets), tuple(candidates), evidence, tuple(dropped), empty)


__all__ = [
    "COMPONENTS",
    "NO_TARGET",
    "PROPOSAL_SAFE",
    "UNSAFE_KINDS",
    "Candidate",
    "Evidence",
    "Kind",
    "Support",
    "Target",
    "action_safe_kinds",
    "build_support",
    "find_targets",
    "gather_evidence",
    "resource_components",
    "value_components",
]
