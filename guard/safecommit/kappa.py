"""κ at run time (docs/safecommit.md): the policy's κ source resolved at start-up, and the fingerprint of
everything world scores depend on.  Calibrating κ lives in :mod:`guard.calibration.kappa`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from guard.errors import PolicyError
from guard.jsonio import decode_float, loads_strict, read_utf8
from guard.policy import Policy
from guard.policy.safecommit import KappaArtifact, SafeCommitSpec
from guard.policy.toolspec import dumped_tools
from guard.safecommit.conformal import conformal_threshold

KAPPA_FORMAT = "carbguard-safecommit-kappa/1"
WORLDS_VERSION = "safecommit-worlds/v3"  # v2: the trust section vouches for values; v3: injected = instruction clause

_FINGERPRINTS: dict[int, tuple[Policy, str]] = {}


def scoring_fingerprint(policy: Policy) -> str:
    """A hash of everything world scores depend on (cached per policy object; policies are frozen)."""
    cached = _FINGERPRINTS.get(id(policy))
    if cached is not None and cached[0] is policy:
        return cached[1]
    if len(_FINGERPRINTS) > 256:
        _FINGERPRINTS.clear()
    value = _scoring_fingerprint(policy)
    _FINGERPRINTS[id(policy)] = (policy, value)
    return value


def _scoring_fingerprint(policy: Policy) -> str:
    """A hash of everything world scores depend on: tool trust, the ``trust`` section (values it vouches for
    lose their untrusted world), value patterns, weights, constructors, code (the instruction-clause grammar
    that fills the injected bin is code: :data:`WORLDS_VERSION`; the signatures are not read)."""
    spec = policy.safecommit
    dumped = policy.model_dump(mode="json")
    body = {
        "version": WORLDS_VERSION,
        "tools": dumped_tools(dumped["tools"]),
        "trust": dumped["trust"],
        "value_patterns": dumped["graph"]["value_patterns"],
        "nonconformity": spec.nonconformity.model_dump(mode="json") if spec else None,
        "worlds": {k: v.model_dump(mode="json") for k, v in spec.worlds.items()} if spec else None,
        "unconfigured": spec.unconfigured if spec else None,
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def resolve_kappa(
    spec: SafeCommitSpec,
    resolve: Callable[[str], Path],
    policy_name: str,
    fingerprint: str,
    carb_artifact: str | None = None,
) -> float:
    """κ from the spec: the number, the artifact's κ (α, fingerprint and gate checked), or calibrated now.

    A κ artifact calibrated behind a CARB threshold (its ``gate``) is accepted only when the policy's
    own CARB artifact (``carb_artifact``, relative to the policy) is that one, checksum for checksum.
    """
    source = spec.kappa
    if isinstance(source, float | int):
        return float(source)
    if isinstance(source, KappaArtifact):
        path = resolve(source.artifact)
        body = _read_json(path)
        if not isinstance(body, dict) or body.get("format") != KAPPA_FORMAT:
            raise PolicyError(f"{path}: not a SafeCommit κ artifact (format {KAPPA_FORMAT!r})")
        if body.get("alpha") != spec.alpha:
            raise PolicyError(f"{path}: κ artifact is for alpha={body.get('alpha')!r}, the policy says {spec.alpha!r}")
        prints = body.get("fingerprints") or {}
        if policy_name not in prints:
            raise PolicyError(
                f"{path}: κ artifact was not calibrated for policy {policy_name!r}; it has {sorted(prints)}"
            )
        if prints[policy_name] != fingerprint:
            raise PolicyError(
                f"{path}: κ artifact fingerprint for {policy_name!r} differs from the running world constructors "
                "(tool metadata, value/injection patterns, nonconformity or worlds changed); recalibrate"
            )
        _check_gate(body.get("gate"), path, carb_artifact, resolve)
        return decode_float(body.get("kappa"), f"{path}: kappa", PolicyError)
    path = resolve(source.scores)
    data = _read_json(path)
    scores = data.get("scores") if isinstance(data, dict) else data
    if not isinstance(scores, list) or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in scores):
        raise PolicyError(f"{path}: expected a JSON list of calibration scores or an object with a 'scores' list")
    return conformal_threshold([float(x) for x in scores], spec.alpha)


def _check_gate(gate: Any, path: Path, carb_artifact: str | None, resolve: Callable[[str], Path]) -> None:
    if gate is None:
        return
    if not isinstance(gate, dict) or not isinstance(gate.get("checksum"), str):
        raise PolicyError(f"{path}: field 'gate' must be null or an object with the CARB artifact's 'checksum'")
    where = f"{path}: κ was calibrated on the proposals under the CARB threshold of {gate.get('artifact')!r}"
    if carb_artifact is None:
        raise PolicyError(f"{where}, but the policy names no calibration artifact")
    carb = _read_json(resolve(carb_artifact))
    if not isinstance(carb, dict) or carb.get("checksum") != gate["checksum"]:
        raise PolicyError(
            f"{where} (checksum {gate['checksum'][:12]}), not on those of {carb_artifact!r}; recalibrate κ"
        )


def _read_json(path: Path) -> Any:
    """The file's JSON, parsed once per version of the file (read-only: callers must not change it).

    Replay builds a certifier per episode; without the cache each would parse the κ artifact again.
    """
    try:
        stat = path.stat()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read SafeCommit calibration file: {exc.strerror or exc}") from None
    return _parsed(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=32)
def _parsed(path: str, mtime_ns: int, size: int) -> Any:
    text = read_utf8(path, "SafeCommit calibration file", PolicyError)
    return loads_strict(text, path, PolicyError, infinity=True)  # scores are written by json.dumps (Infinity)


__all__ = ["KAPPA_FORMAT", "WORLDS_VERSION", "resolve_kappa", "scoring_fingerprint"]
