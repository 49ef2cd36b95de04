"""Calibration artifacts (docs/calibrate.md): threshold, scope, fingerprints, and a content checksum.

The pipeline fingerprint hashes everything the scores depend on — tool metadata, graph rules and
``min_span``, selector and its parameters, scorer weights and patterns, the code's version.  Loading
an artifact whose fingerprint differs from the running pipeline is an error that names the parts
that differ; an edited artifact (its checksum fails) is refused naming the file.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard.errors import ArtifactError
from guard.evidence.specificity import table_for
from guard.features import DEFAULT_WEIGHTS
from guard.jsonio import decode_float, encode_float, loads_strict
from guard.policy import Policy
from guard.policy.toolspec import dumped_tools

FORMAT = "carbguard-artifact/1"
#: v4: private and untrusted records read whole (no zones), amounts link across formats, trust on exact matches.
GRAPH_RULES_VERSION = "E1-E4/v4"
#: v3: signatures act as a rule outside the score; the default evidence does not read attack wording.
#: v4: conjunction rows computed from the table; instructed_value cleared only by a user turn naming the whole value.
SCORER_VERSION = "weighted-binary/v4"
#: The version of the feature table (guard/features.py): the rows and what computes them.  Recorded in every
#: scorer fingerprint; a change of a row's meaning or computation bumps it.
FEATURE_SET = "wording-invariant/v2"  # v2: control evidence and conjunctions


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def pipeline_components(policy: Policy) -> dict[str, str]:
    """A hash per part of the pipeline the scores depend on."""
    dumped = policy.model_dump(mode="json")
    graph = dumped["graph"]
    if not graph.get("normalize"):
        graph.pop("normalize", None)  # the default keeps fingerprints from before the option
    for option in ("whole_values", "background"):  # both off: the lexical rules, fingerprints from before them
        if not graph.get(option):
            graph.pop(option, None)
    table = table_for(policy) if graph.get("background") else None
    if table is not None:
        graph["background"] = table.fingerprint  # the table the edges were made with (shipped or named by path)
    weights = dumped["scorer"]["weights"]
    for name in [n for n in weights if n not in DEFAULT_WEIGHTS and weights[n] == 0]:
        weights.pop(name)  # an opt-in feature added later at weight 0 leaves the fingerprint as it was
    if not dumped["scorer"]["tool_weights"]:
        dumped["scorer"].pop("tool_weights")
    dumped["scorer"]["feature_set"] = FEATURE_SET
    if not policy.trust.internal.declared():
        dumped["trust"].pop("internal")  # no internal destinations: fingerprints from before the option
    return {
        "tools": _digest(dumped_tools(dumped["tools"])),
        "graph": _digest({"rules": GRAPH_RULES_VERSION, **dumped["graph"]}),
        "selector": _digest(dumped["selector"]),
        "scorer": _digest({"version": SCORER_VERSION, **dumped["scorer"], "trust": dumped["trust"]}),
    }


def pipeline_fingerprint(policy: Policy) -> str:
    """One hash of every component."""
    return _digest(pipeline_components(policy))


def content_checksum(body: dict[str, Any]) -> str:
    """SHA-256 of the artifact's canonical JSON without its checksum."""
    return _digest({k: v for k, v in body.items() if k != "checksum"})


@dataclass(frozen=True, slots=True)
class Artifact:
    """A loaded, verified calibration artifact."""

    alpha: float
    n: int
    threshold: float
    rule: str
    selector: str
    artifact_id: str
    body: dict[str, Any]


def build_artifact(
    policies: list[Policy],
    *,
    alpha: float,
    n: int,
    threshold: float,
    calibration_risk: float,
    grid: list[float],
    rule: str,
    calibration_fingerprint: str,
    command: str,
    extra: dict[str, Any] | None = None,
    risk_fields: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of an artifact, checksummed (``risk_fields``: the rule's, from ``ltt.rule_fields``)."""
    body: dict[str, Any] = {
        "format": FORMAT,
        "policies": sorted(p.name for p in policies),
        "rule": rule,
        "alpha": alpha,
        "n": n,
        "threshold": encode_float(threshold),
        "grid": [encode_float(g) for g in grid],
        "selector": policies[0].selector.model_dump(mode="json"),
        "pipelines": {
            p.name: {"fingerprint": pipeline_fingerprint(p), "components": pipeline_components(p)} for p in policies
        },
        "calibration_set": {"fingerprint": calibration_fingerprint, "size": n},
        "command": command,
        **(risk_fields if risk_fields is not None else crc_fields(rule, calibration_risk)),
        **(extra or {}),
    }
    body["checksum"] = content_checksum(body)
    return body


CRC_GUARANTEE = (
    "For exchangeable episodes and this frozen pipeline, E[declared-ledger loss of a new episode] <= alpha, "
    "in expectation over calibration and the new episode; the declared ledger only."
)


GROUP_CRC_GUARANTEE = (
    "When groups are exchangeable (a new group is drawn exchangeably with the G calibration groups) and this "
    "pipeline is frozen, the expected mean declared-ledger loss over a new group's episodes is <= alpha, in "
    "expectation over calibration and the new group; it needs alpha >= 1/(G+1). Nothing per episode within a "
    "group, nor about episodes of a seen group's distribution beyond that; the declared ledger only."
)


def two_level_statements(alpha: str, group_alpha: str, groups: int) -> tuple[str, str]:
    """The two statements of the two-level group rule (docs/calibrate.md#the-two-level-rule), in exact words:
    the episode statement at ``alpha`` and the group statement at ``group_alpha`` over ``groups`` groups."""
    return (
        "For exchangeable episodes and this frozen pipeline, E[declared-ledger loss of a new episode] <= "
        f"alpha = {alpha}, in expectation over calibration and the new episode.",
        f"When groups are exchangeable (a new group is drawn exchangeably with the G = {groups} calibration groups) "
        "and this pipeline is frozen, the expected mean declared-ledger loss over a new group's episodes is <= "
        f"alpha_g = {group_alpha}, in expectation over calibration and the new group.",
    )


def two_level_guarantee(alpha: str, group_alpha: str, groups: int) -> str:
    """The guarantee a two-level artifact states: both statements, and nothing more."""
    episode, group = two_level_statements(alpha, group_alpha, groups)
    return f"{episode} {group} Nothing per episode within a group; the declared ledger only."


def ltt_guarantee(alpha: float, delta: float) -> str:
    """The guarantee an LTT artifact states: high probability over the calibration draw, with its δ."""
    return (
        f"For i.i.d. episodes and this frozen pipeline, P(R(lambda_hat) <= alpha) >= 1 - delta with alpha={alpha}, "
        f"delta={delta}: with probability at least {1 - delta:.6g} over the calibration draw, the expected "
        "declared-ledger loss R of a new episode at the chosen threshold is at most alpha; the declared ledger only."
    )


def crc_fields(rule: str, calibration_risk: float) -> dict[str, Any]:
    """The risk figure and guarantee of a CRC artifact; an LTT artifact's come from ``guard.calibration.ltt``."""
    if rule.startswith("ltt"):
        raise ValueError(f"rule {rule!r}: pass its risk_fields (guard.calibration.ltt.rule_fields)")
    return {"calibration_risk": calibration_risk, "guarantee": CRC_GUARANTEE}


def risk_summary(body: dict[str, Any]) -> str:
    """The artifact's risk figure and guarantee as ``carbguard calibrate`` prints them, named by rule."""
    fields = body.get("ltt")
    if isinstance(fields, dict):
        return (
            f"empirical calibration risk={body['empirical_calibration_risk']:.4f} "
            f"(k={fields['charged']} of n={body['n']}; LTT p-value P(Bin(n, alpha) <= k)={fields['p_value']:.4g} "
            f"<= delta={fields['delta']})\nguarantee: {body['guarantee']}"
        )
    return f"calibration risk (corrected)={body['calibration_risk']:.4f}\nguarantee: {body['guarantee']}"


def artifact_text(body: dict[str, Any]) -> str:
    """An artifact as the indented JSON :func:`write_artifact` writes (stable bytes)."""
    return json.dumps(body, indent=1, sort_keys=True) + "\n"


def write_artifact(body: dict[str, Any], path: str | Path) -> None:
    """Write an artifact as indented JSON (stable bytes)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(artifact_text(body), encoding="utf-8")


def load_artifact(path: str | Path, policy: Policy | None = None) -> Artifact:
    """Read, checksum-verify, shape-check and (given a policy) fingerprint-check an artifact."""
    file = Path(path)
    body = _read_body(file)
    alpha = decode_float(body.get("alpha"), f"{file}: alpha", ArtifactError)
    if not 0.0 < alpha < 1.0:
        raise ArtifactError(f"{file}: alpha must lie in (0, 1), got {alpha}")
    n, rule, selector = body.get("n"), body.get("rule"), body.get("selector")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ArtifactError(f"{file}: field 'n' must be a positive integer, got {n!r}")
    if not isinstance(rule, str):
        raise ArtifactError(f"{file}: field 'rule' must be a string, got {rule!r}")
    if not isinstance(selector, dict) or not isinstance(selector.get("name"), str):
        raise ArtifactError(f"{file}: field 'selector' must be an object with a 'name'")
    if policy is not None:
        _check_pipeline(body, policy, file)
    return Artifact(
        alpha=alpha,
        n=n,
        threshold=decode_float(body.get("threshold"), f"{file}: threshold", ArtifactError),
        rule=rule,
        selector=selector["name"],
        artifact_id=f"{file.name}#{body['checksum'][:12]}",
        body=body,
    )


def _read_body(file: Path) -> dict[str, Any]:
    """The artifact's JSON object, its format and checksum verified."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ArtifactError(f"{file}: cannot read calibration artifact: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"{file}: calibration artifact is not UTF-8 (truncated or edited?): {exc}") from None
    body = loads_strict(text, f"{file}: calibration artifact (truncated or edited?)", ArtifactError)
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise ArtifactError(f"{file}: not a carbguard artifact (format must be {FORMAT!r})")
    try:
        matches = body.get("checksum") == content_checksum(body)
    except (TypeError, ValueError, RecursionError):
        matches = False
    if not matches:
        raise ArtifactError(f"{file}: checksum does not match the content: the artifact was edited or corrupted")
    return body


def fitted_weights(body: dict[str, Any]) -> dict[str, float] | None:
    """The scorer weights fitted into an artifact by ``calibrate --fit-scorer`` (None if it has none)."""
    weights = body.get("scorer_weights")
    if weights is None:
        return None
    if not isinstance(weights, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for k, v in weights.items()
    ):
        raise ArtifactError("artifact field 'scorer_weights' must map feature names to finite numbers")
    return {k: float(v) for k, v in weights.items()}


def fitted_tool_weights(body: dict[str, Any]) -> dict[str, float]:
    """The tool identity weights fitted into an artifact (``scorer_tool_weights``; empty if it has none)."""
    weights = body.get("scorer_tool_weights", {})
    if not isinstance(weights, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        for k, v in weights.items()
    ):
        raise ArtifactError("artifact field 'scorer_tool_weights' must map tool names to finite numbers >= 0")
    return {k: float(v) for k, v in weights.items()}


def apply_fitted_weights(body: dict[str, Any], policy: Policy, file: str | Path) -> Policy:
    """``policy`` scoring with the artifact's fitted weights (unchanged for an artifact without them).

    Tool weights apply to the tools ``policy`` declares (one artifact may cover several policies).
    """
    from pydantic import ValidationError

    from guard.policy import FeatureWeights

    try:
        weights = fitted_weights(body)
        if weights is None:
            return policy
        spec = FeatureWeights.model_validate(weights)
        tools = {k: v for k, v in fitted_tool_weights(body).items() if k in policy.tools}
    except (ArtifactError, ValidationError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise ArtifactError(f"{file}: invalid fitted scorer weights: {first}") from None
    return policy.model_copy(
        update={"scorer": policy.scorer.model_copy(update={"weights": spec, "tool_weights": tools})}
    )


def _check_pipeline(body: dict[str, Any], policy: Policy, file: Path) -> None:
    pipelines = body.get("pipelines")
    if not isinstance(pipelines, dict):
        raise ArtifactError(f"{file}: field 'pipelines' must be an object")
    if policy.name not in pipelines:
        raise ArtifactError(
            f"{file}: artifact was calibrated for policies {sorted(map(str, pipelines))}, "
            f"not for policy {policy.name!r}"
        )
    entry = pipelines[policy.name]
    recorded = entry.get("components") if isinstance(entry, dict) else None
    if not isinstance(recorded, dict):
        raise ArtifactError(f"{file}: pipelines[{policy.name!r}].components must be an object")
    current = pipeline_components(policy)
    differ = sorted(k for k in current if recorded.get(k) != current[k])
    if "scorer" in differ and body.get("scorer_weights") is not None:
        raise ArtifactError(
            f"{file}: artifact carries fitted scorer weights and policy {policy.name!r} does not score with them "
            f"(differ: {', '.join(differ)}); load it with Guard.from_policy, which applies them, or refit with "
            "`carbguard calibrate --fit-scorer`"
        )
    if differ:
        raise ArtifactError(
            f"{file}: artifact was calibrated for another pipeline; these parts differ from policy "
            f"{policy.name!r}: {', '.join(differ)} — {recalibrate_hint(body)}"
        )


def recalibrate_hint(body: dict[str, Any]) -> str:
    """The command that fixes a fingerprint mismatch: the recorded calibration command, rerun on the current policy."""
    command = body.get("command")
    if isinstance(command, str) and command.startswith("carbguard calibrate"):
        return f"recalibrate under the current policy by rerunning `{command}`"
    return (
        "recalibrate under the current policy: `carbguard calibrate --policy POLICY --episodes EPISODES "
        "[--labels LABELS] --alpha ALPHA --out ARTIFACT`"
    )
