"""SafeCommit in the runtime: :class:`PolicyCertifier` (docs/concepts.md step 6, docs/safecommit.md, docs/audit.md).

``Session.decide`` calls :meth:`PolicyCertifier.certify` for every side-effectful proposal under
λ̂.  On ``probe`` the adapter runs each :class:`~guard.decision.ProbeCall` through ``decide``
(probes are read-only tools, so they pass unless the gate refuses them), reports its result with
``observe_result(call.call_id, text)``, and decides the original call id again.  The first call
builds the proposal's support (worlds, scores) once and keeps it in ``session.certifier_state``
(:mod:`guard.safecommit.state`); every later call for the same call id reuses it, so scores are
never recomputed.  One decision:

1. collect the results of the probe calls issued so far (``observe_result`` on their call ids);
   a result the probe's outcome rules cannot parse (or an error result) leaves the world set
   unchanged and still counts against the budget; a probe call without a result yet is asked
   for again (``probe``, no budget spent);
2. run the controller on the proposal alone: ``execute`` when certified, ``probe`` (with the
   :class:`~guard.decision.ProbeCall` to run) while budget and probe value remain;
3. otherwise try the policy's alternatives on the same retained set: a certified reversible
   staging variant gives ``defer`` with reason ``certified`` and the call to run instead in the
   log's ``replacement``; a no-op alternative is considered only when the fallback would be
   ``abstain`` and keeps that verdict;
4. otherwise the controller's fallback: ``defer`` / ``escalate`` / ``abstain`` with reason
   ``not_certified``; the SafeCommit reason code (``empty_world_set``, ``authority_missing``,
   ...) is in the message and in the log.

Alternatives come after probing on purpose: a no-op is safe in every world, so offering it up
front would certify it at once and no probe would ever run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from guard.decision import Certification, ProbeCall, Reason, Verdict
from guard.errors import PolicyError
from guard.evidence.destinations import exact_pattern
from guard.jsonio import encode_float
from guard.policy import Effect, Policy, ToolSpec
from guard.policy.safecommit import (
    AlternativeSpec,
    KappaArtifact,
    KappaCalibrate,
    ProbeConfig,
    SafeCommitSpec,
)
from guard.records import Record, RecordKind
from guard.safecommit.controller import step
from guard.safecommit.kappa import resolve_kappa, scoring_fingerprint
from guard.safecommit.state import STATE_KEY, BoundProbe, ProposalState, proposal_states
from guard.safecommit.types import Action, ProbeSpec, SafeCommitResult
from guard.safecommit.worlds import (
    PROPOSAL_SAFE,
    Support,
    action_safe_kinds,
    build_support,
)

if TYPE_CHECKING:
    from guard.graph import PrefixGraph
    from guard.protocols import SessionState as Session

_TEMPLATE = re.compile(r"\{(\w+)\}")
_FALLBACK = {"defer": Verdict.DEFER, "escalate": Verdict.ESCALATE, "abstain": Verdict.ABSTAIN}


def bind_probes(support: Support, spec: SafeCommitSpec, proposal_args: Mapping[str, Any]) -> tuple[BoundProbe, ...]:
    """One :class:`ProbeSpec` per (policy probe, target it applies to), with a label for every world.

    A probe whose argument templates name an argument the proposal does not have is left out.
    """
    if not support.candidates:
        return ()
    bound = []
    for config in spec.probes:
        applies = config.applies_to.get(support.tool, ())
        for target in support.targets:
            if target.arg not in applies or target.check != config.checks:
                continue
            try:
                call_args = fill_template(config.args, proposal_args, target.value)
            except PolicyError:
                continue
            benign = config.outcomes["legit" if config.checks == "value" else "disposable"]
            outcomes = {}
            for cand in support.candidates:
                if cand.target != target.key:
                    outcomes[cand.world.name] = benign
                else:
                    outcomes[cand.world.name] = config.outcomes[
                        "legit" if cand.kind in ("user", "trusted") else cand.kind
                    ]
            name = f"{config.name}[{target.key}]"
            bound.append(BoundProbe(ProbeSpec(name, config.cost, outcomes), config, target, call_args))
    return tuple(bound)


def parse_probe_result(config: ProbeConfig, value: str, record: Record) -> str | None:
    """The outcome label of a probe's result record: the first matching rule, None if none matches."""
    for rule in config.rules:
        if rule.status != "any" and rule.status != record.status:
            continue
        pattern = rule.match.replace("{value}", exact_pattern(value))  # the value exactly: ASCII case aside
        if re.search(pattern, record.text, re.IGNORECASE | re.MULTILINE):
            return rule.label
    return None


class PolicyCertifier:
    """The SafeCommit certifier a policy's ``safecommit:`` section configures."""

    def __init__(self, policy: Policy, *, kappa: float | None = None) -> None:
        if policy.safecommit is None:
            raise PolicyError(f"policy {policy.name!r} has no safecommit section")
        self.policy = policy
        self.spec: SafeCommitSpec = policy.safecommit
        self.fingerprint = scoring_fingerprint(policy)
        if kappa is not None:
            self.kappa, self.kappa_source = float(kappa), "override"
        else:
            self.kappa = resolve_kappa(
                self.spec, policy.resolve, policy.name, self.fingerprint, policy.calibration.artifact
            )
            self.kappa_source = _describe_source(self.spec)

    # ----------------------------------------------------------------- decide

    def certify(self, session: Session, node: int, spec: ToolSpec) -> Certification:
        """Certify the proposal at ``node``, ask for a probe, or fall back (module docstring)."""
        record = session.graph.records[node]
        state = self.state_for(session, record, node)
        history, pending = self._history(session.graph, state)
        return self._decide(state, record, spec, history, pending)

    def decide_fresh(self, state: ProposalState, record: Record, spec: ToolSpec) -> Certification:
        """The first decision on a proposal (no probe results) under this κ, leaving ``state`` untouched.

        Replay studies use it to re-decide stored supports at other κ without re-running episodes.
        """
        return self._decide(ProposalState(state.support, state.probes), record, spec, [], [])

    def _decide(
        self,
        state: ProposalState,
        record: Record,
        spec: ToolSpec,
        history: list[tuple[str, object]],
        pending: list[ProbeCall],
    ) -> Certification:
        if pending:
            names = ", ".join(c.name for c in pending)
            message = f"SafeCommit: waiting for the result of probe call(s) {names}"
            return Certification(Verdict.PROBE, Reason.PROBE_NEEDED, message, tuple(pending), self._pending_log(state))
        reversible = spec.effect is Effect.REVERSIBLE
        proposal = Action("proposal", 1.0, 0.0, reversible)
        first = self._step(state, [proposal], [("proposal", PROPOSAL_SAFE)], history, self.spec.budget)
        if first.verdict == "execute":
            n = len(first.log.retained)
            message = f"SafeCommit: certified, safe in all {n} retained world(s) (kappa={self.kappa:.4g})"
            return Certification(Verdict.EXECUTE, Reason.CERTIFIED, message, (), self._log(state, first, "proposal"))
        if first.verdict == "probe" and first.probe is not None:
            return self._issue(state, record, first)
        alternative = self._alternatives(state, record, proposal, history, first)
        if alternative is not None:
            return alternative
        blocking = sorted({w for ws in first.log.certificate.blocking.values() for w in ws})
        message = f"SafeCommit: {first.verdict} ({first.log.reason}); blocking worlds: {', '.join(blocking) or '-'}"
        if state.support.empty_reason:
            message += f"; {state.support.empty_reason}"
        verdict = _FALLBACK[first.verdict]
        return Certification(verdict, Reason.NOT_CERTIFIED, message, (), self._log(state, first, "proposal"))

    def state_for(self, session: Session, record: Record, node: int) -> ProposalState:
        """The proposal's state, built on its first decision and reused afterwards."""
        states = proposal_states(session.certifier_state)
        key = record.call_id or f"node-{node}"
        state = states.get(key)
        if state is None:
            support = build_support(session.graph, node, self.policy, self.spec)
            state = states[key] = ProposalState(support, bind_probes(support, self.spec, record.args))
        return state

    def _history(self, graph: PrefixGraph, state: ProposalState) -> tuple[list[tuple[str, object]], list[ProbeCall]]:
        if not state.issued:
            return [], []
        results = {r.call_id: r for r in graph.records.values() if r.kind is RecordKind.RESULT}
        by_name = {b.spec.name: b for b in state.probes}
        history: list[tuple[str, object]] = []
        pending: list[ProbeCall] = []
        for name, call in state.issued:
            found = results.get(call.call_id)
            if found is None:
                pending.append(call)
                continue
            bound = by_name[name]
            history.append((name, parse_probe_result(bound.config, bound.target.value, found)))
        return history, pending

    def _step(
        self,
        state: ProposalState,
        actions: Sequence[Action],
        safe_kinds: Sequence[tuple[str, frozenset[str]]],
        history: Sequence[tuple[str, object]],
        budget: int,
    ) -> SafeCommitResult:
        support = state.support
        probes = [b.spec for b in state.probes]
        return step(
            support.worlds,
            actions,
            support.safety(safe_kinds),
            self.kappa,
            probes,
            budget=budget,
            eta=self.spec.eta,
            history=history,
        )

    def _issue(self, state: ProposalState, record: Record, result: SafeCommitResult) -> Certification:
        bound = next(b for b in state.probes if b.spec.name == result.probe)
        args = dict(bound.args)
        call_id = f"{record.call_id}::probe{len(state.issued) + 1}:{bound.config.name}"
        call = ProbeCall(tool=bound.config.tool, args=args, call_id=call_id, name=bound.spec.name)
        state.issued.append((bound.spec.name, call))
        shrink = result.log.expected_shrinkage or 0.0
        message = (
            f"SafeCommit: not certified yet; run probe {bound.spec.name} ({bound.config.tool}) to tell the "
            f"retained worlds apart (expected shrinkage {shrink:.3f}), then decide again"
        )
        return Certification(Verdict.PROBE, Reason.PROBE_NEEDED, message, (call,), self._log(state, result, "proposal"))

    def _alternatives(
        self,
        state: ProposalState,
        record: Record,
        proposal: Action,
        history: Sequence[tuple[str, object]],
        first: SafeCommitResult,
    ) -> Certification | None:
        alts = [
            a
            for a in self.spec.alternatives.get(record.tool or "", ())
            if (a.kind == "stage" and _fillable(a, record)) or (a.kind == "noop" and first.verdict == "abstain")
        ]
        if not alts or not state.support.candidates:
            return None
        actions = [proposal, *(Action(a.name, a.reward, a.severity_penalty, True) for a in alts)]
        kinds = [("proposal", PROPOSAL_SAFE), *((a.name, action_safe_kinds(a)) for a in alts)]
        second = self._step(state, actions, kinds, history, len(history))
        chosen = next((a for a in alts if a.name == second.action), None)
        if second.verdict != "execute" or chosen is None:
            return None
        log = self._log(state, second, "alternatives")
        if chosen.kind == "noop":
            message = (
                f"SafeCommit: not certified as proposed; the no-op alternative {chosen.name!r} is certified: "
                "skip this call"
            )
            return Certification(Verdict.ABSTAIN, Reason.NOT_CERTIFIED, message, (), log)
        replacement = _replacement(chosen, record)
        log["replacement"] = replacement
        message = (
            f"SafeCommit: not certified as proposed; the reversible alternative {chosen.name!r} is certified: "
            f"run {chosen.tool} with the arguments in the log's 'replacement' instead"
        )
        return Certification(Verdict.DEFER, Reason.CERTIFIED, message, (), log)

    # ----------------------------------------------------------------- logs

    def _log(self, state: ProposalState, result: SafeCommitResult, phase: str) -> dict[str, Any]:
        out: dict[str, Any] = dict(result.to_dict())
        out.update(
            phase=phase,
            kappa_source=self.kappa_source,
            support=state.support.to_log(),
            probe_calls=[{"probe": n, "tool": c.tool, "call_id": c.call_id} for n, c in state.issued],
            replacement=None,
        )
        return out

    def _pending_log(self, state: ProposalState) -> dict[str, Any]:
        return {
            "verdict": "probe",
            "action": None,
            "probe": state.issued[-1][0] if state.issued else None,
            "log": {"verdict": "probe", "reason": "probe_result_pending", "kappa": encode_float(self.kappa)},
            "phase": "proposal",
            "kappa_source": self.kappa_source,
            "support": state.support.to_log(),
            "probe_calls": [{"probe": n, "tool": c.tool, "call_id": c.call_id} for n, c in state.issued],
            "replacement": None,
        }


def fill_template(template: Any, args: Mapping[str, Any], value: str | None = None) -> Any:
    """``{name}`` → the proposal's argument (``{value}`` → the checked value); a whole ``{name}`` keeps its type."""
    if isinstance(template, dict):
        return {k: fill_template(v, args, value) for k, v in template.items()}
    if isinstance(template, list):
        return [fill_template(v, args, value) for v in template]
    if not isinstance(template, str):
        return template

    def lookup(name: str) -> Any:
        if name == "value" and value is not None:
            return value
        if name not in args:
            raise PolicyError(f"template {template!r} names {name!r}, which the proposal's arguments do not have")
        return args[name]

    whole = _TEMPLATE.fullmatch(template)
    if whole:
        return lookup(whole.group(1))
    return _TEMPLATE.sub(lambda m: str(lookup(m.group(1))), template)


def _fillable(alt: AlternativeSpec, record: Record) -> bool:
    try:
        fill_template(alt.args, record.args)
    except PolicyError:
        return False
    return True


def _replacement(alt: AlternativeSpec, record: Record) -> dict[str, Any]:
    return {"action": alt.name, "tool": alt.tool, "args": fill_template(alt.args, record.args)}


def _describe_source(spec: SafeCommitSpec) -> str:
    source = spec.kappa
    if isinstance(source, KappaArtifact):
        return f"artifact:{source.artifact}"
    if isinstance(source, KappaCalibrate):
        return f"calibrate:{source.scores}"
    return "policy"


def certifier_for(policy: Policy, kappa: float | None = None) -> PolicyCertifier:
    """A :class:`PolicyCertifier` (``kappa`` overrides the policy's κ source, e.g. in studies)."""
    return PolicyCertifier(policy, kappa=kappa)


def decision_log(decision_safecommit: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The controller log inside a decision's ``safecommit`` entry (empty mapping when absent)."""
    if decision_safecommit is None:
        return {}
    inner = decision_safecommit.get("log")
    return inner if isinstance(inner, Mapping) else {}


__all__ = [
    "STATE_KEY",
    "BoundProbe",
    "PolicyCertifier",
    "ProposalState",
    "bind_probes",
    "certifier_for",
    "decision_log",
    "fill_template",
    "parse_probe_result",
]
