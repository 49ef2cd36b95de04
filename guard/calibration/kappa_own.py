"""κ from a deployment's own recorded episodes, labelled by its declared ledger (docs/safecommit.md).

``carbguard safecommit calibrate --policy P --episodes E [--labels L]``.  The episodes are a
``carbguard-episodes/1`` file read as ``carbguard calibrate --episodes`` reads it
(:func:`guard.calibration.jobs.load_episodes_corpus`: every episode under the policy, labels
attached), and the cases are built as for AgentDojo (:func:`guard.calibration.kappa.episode_cases`:
every side-effectful proposal of a tool SafeCommit certifies, support built as at run time).

**Which cases are unsafe.**  The deployment's declared ledger decides: the policy's ``ledger:``
rules (:func:`guard.ledger.rules.declared_events`) and the labels file's line for the episode
(``override`` replaces what the rules charged on the episode, ``add`` adds to it), exactly as
:meth:`guard.ledger.Ledger.trace` charges executed proposals for ``carbguard calibrate`` and
``carbguard ledger check``.  A proposal that did not execute is charged by the rules (what executing
it would charge), unless an ``override`` label covers its episode (the reviewer's verdict).

**Which worlds are true.**  The declared ledger says *whether* executing a proposal charges, not
which checked value did it.  A charged case's q is the smallest score among the support's
``untrusted`` and ``shared`` worlds: the certificate commits that proposal only when none of them is
retained, i.e. exactly when q > κ.  An uncharged case's q is the smallest legitimate world's score, as
for AgentDojo.  A charged case with no unsafe world in its support (dropped by hard evidence, or a
harm the constructors do not represent, e.g. a private payload to a user-named recipient) is a
support miss: counted (β), not used for κ.

**Artifact.**  ``fingerprints`` holds the policy's name and world-scoring fingerprint, which
:func:`guard.safecommit.kappa.resolve_kappa` checks at load: the policy that names the artifact in
``safecommit.kappa`` loads it; a policy of another name, or whose tools, trust, patterns or worlds
changed, is refused.  ``episodes`` records the files' SHA-256, ``labels_fingerprint`` the labels,
the policy's ``ledger:`` section and the labelling code.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guard.calibration.kappa import ChargesFor, Gate, collect_cases, gated, labels_fingerprint
from guard.calibration.kappa_artifact import kappa_body
from guard.errors import CalibrationError
from guard.ledger import Ledger, LedgerLabels
from guard.policy import Policy, load_policy
from guard.policy.safecommit import SafeCommitSpec
from guard.records import Episode
from guard.safecommit.kappa import scoring_fingerprint

_NO_LABELS = LedgerLabels()


def declared_charges(policy: Policy, labels_of: Mapping[str, LedgerLabels]) -> ChargesFor:
    """Per episode: record index of each proposal → does the declared ledger charge executing it."""
    ledger = Ledger(policy, _NO_LABELS)

    def charges(episode: Episode) -> dict[int, bool]:
        labels = labels_of.get(episode.episode_id, _NO_LABELS)
        trace = ledger.trace(episode, labels)
        out: dict[int, bool] = {}
        for ordinal, record in enumerate(episode.proposals()):
            if trace.executed[ordinal]:
                out[record.index] = bool(trace.events[ordinal])
            elif labels.label_mode == "override":
                out[record.index] = False
            else:
                out[record.index] = bool(ledger.rule_events(record, labels, episode.records[: record.index]))
        return out

    return charges


def own_policy(path: str | Path) -> tuple[Policy, SafeCommitSpec]:
    """The policy at ``path`` and its ``safecommit:`` section; CalibrationError naming the file without one."""
    policy = load_policy(path)
    if policy.safecommit is None:
        raise CalibrationError(
            f"{path}: policy {policy.name!r} has no safecommit: section; add one (docs/safecommit.md) before "
            "calibrating its kappa"
        )
    return policy, policy.safecommit


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def calibrate_own_kappa(
    policy_path: str | Path,
    episodes_path: str | Path,
    labels_path: str | Path | None = None,
    *,
    alpha: float | None = None,
    out: str | Path | None = None,
    command: str | None = None,
    gate: Gate | None = None,
) -> dict[str, Any]:
    """κ at ``alpha`` (default: the policy's ``safecommit.alpha``) from a deployment's own episodes.

    The artifact body, written to ``out`` if given; the policy names it in ``safecommit.kappa``.
    """
    from guard.calibration.jobs import load_episodes_corpus

    policy, spec = own_policy(policy_path)
    level = spec.alpha if alpha is None else alpha
    corpus = load_episodes_corpus([policy], str(episodes_path), None if labels_path is None else str(labels_path))
    labels_of = corpus.labels_of

    def labels_for(episode: Episode) -> LedgerLabels:
        return labels_of.get(episode.episode_id, _NO_LABELS)

    cases = collect_cases(corpus.episodes, lambda _suite: policy, labels_for, declared_charges(policy, labels_of))
    if gate is not None:
        cases = gated(cases, gate.threshold)
    source = {
        "source": str(episodes_path),
        "sha256": file_sha256(episodes_path),
        "labels": None
        if labels_path is None
        else {"file": str(labels_path), "sha256": file_sha256(labels_path), "labelled": len(labels_of)},
        "models": sorted({e.meta.model for e in corpus.episodes}),
        "selection": "every episode of the file; cases labelled by the policy's declared ledger (ledger: rules "
        "plus the labels file)",
    }
    return kappa_body(
        cases,
        level,
        episodes=corpus.episodes,
        source=source,
        fingerprints={policy.name: scoring_fingerprint(policy)},
        labels_fp=_labels_fingerprint(policy, corpus.episodes, labels_for),
        gate=gate,
        command=command or f"carbguard safecommit calibrate --policy {policy_path} --episodes {episodes_path}",
        out=out,
        extra={"policy": {"name": policy.name, "file": str(policy_path)}},
    )


def _labels_fingerprint(policy: Policy, episodes: list[Episode], labels_for: Any) -> str:
    digest = hashlib.sha256(labels_fingerprint(episodes, labels_for).encode("utf-8"))
    ledger = policy.model_dump(mode="json").get("ledger")
    digest.update(json.dumps(ledger, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    digest.update(inspect.getsource(sys.modules[__name__]).encode("utf-8"))
    return digest.hexdigest()


def own_summary(body: dict[str, Any]) -> str:
    """What ``carbguard safecommit calibrate --policy ...`` prints."""
    cases, cov, eps = body["cases"], body["coverage_in_sample"], body["episodes"]
    labels = eps["labels"]
    gate = body["gate"]
    return "\n".join(
        [
            f"policy {body['policy']['name']} ({body['policy']['file']}): alpha={body['alpha']} n={body['n']} "
            f"r={body['r']} kappa={body['kappa']}",
            f"episodes: {eps['count']} from {eps['source']} (sha256 {eps['sha256'][:12]}); "
            f"{eps['with_cases']} with calibration cases",
            "labels: none (the policy's ledger: rules only)"
            if labels is None
            else f"labels: {labels['labelled']} episode(s) from {labels['file']} (sha256 {labels['sha256'][:12]})",
            f"cases: {cases['used']} used ({cases['unsafe']} unsafe, {cases['legit']} legit); "
            f"{cases['support_miss']} support misses, {cases['no_target']} proposals with nothing to check",
            f"per tool: { {tool.lstrip('.'): n for tool, n in cases['per_tool'].items()} }",
            f"in-sample coverage: all {cov['all']}, unsafe {cov['unsafe']}",
            "gate: none (every certified proposal is a case)"
            if gate is None
            else f"gate: G-CARB score <= {gate['threshold']} of {gate['artifact']}",
        ]
    )


__all__ = ["calibrate_own_kappa", "declared_charges", "file_sha256", "own_policy", "own_summary"]
