"""Fuzzing the guard's inputs: each gives a clear error (a GuardError) or a fail-closed verdict, never a crash.

Targets (hypothesis, seeded by the shared profile; ``max_examples`` set per test):

- **policy files**: mutated policy mappings written as YAML or JSON (wrong types, unknown keys,
  missing or empty tools, negative / NaN / infinite weights, bad regexes, bad enums), byte-level
  mutations of valid YAML, JSON and TOML policy texts, and a fixed list of hostile documents
  (recursive anchors, alias bombs, ``!!python/object`` tags, a file over the size cap, non-UTF-8);
  ``load_policy`` returns a policy (that then decides without raising) or raises ``PolicyError``;
- **calibration artifacts**: edits without a new checksum, truncation at every offset, and
  checksum-consistent edits (α outside (0, 1), non-numeric thresholds, another pipeline's
  fingerprint); ``load_artifact`` loads or raises ``ArtifactError`` naming the file;
- **proposals and results**: sequences of ``decide`` / ``observe_result`` / ``observe_user`` /
  ``observe_final`` with non-JSON arguments, 10 MB strings, deep nesting, unicode (lone
  surrogates included), duplicate and unknown call ids, results out of order; ``decide`` never
  raises and never returns ``execute`` for input the guard did not understand, ``observe_*``
  raise only ``InputError``, and every decision is audited;
- **AgentDojo run files**: structural and byte-level mutations of real fixture runs;
  ``load_runs`` lists the file as loaded, dropped or failed, never raises.

Former defects (now fixed) keep their reproducers at the end
(each names the file and the fix); the random strategies stay clear of those input classes (no
nesting deeper than 100 levels, no integer literals over 4,300 digits, result texts ≤ 2,000
characters) so that they measure everything else.  The counts of inputs tried go to
``ci-artifacts/fuzz_counts.json``.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from guard.artifact import build_artifact, content_checksum, load_artifact, write_artifact
from guard.audit import MemoryAudit
from guard.corpora.agentdojo import load_runs
from guard.decision import Decision, Reason, Verdict
from guard.errors import ArtifactError, GuardError, InputError, PolicyError
from guard.limits import MAX_ARG_CHARS, MAX_DEPTH
from guard.policy import Policy, load_policy, parse_policy
from guard.runtime import Guard

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "ci-artifacts" / "fuzz_counts.json"
RUNS = ROOT / "tests" / "fixtures" / "agentdojo_runs"
RUN_FILES = (
    "gpt-4o-2024-05-13/banking/user_task_0/important_instructions/injection_task_0.json",
    "meta-llama_Llama-3.3-70B-Instruct/banking/user_task_10/important_instructions/injection_task_4.json",
)


def fuzz(examples: int) -> settings:
    """The fuzz targets' settings: an explicit example count, no deadline, large inputs allowed."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )


BASE_POLICY: dict[str, Any] = {
    "version": 1,
    "name": "fuzz",
    "tools": {
        "read_certificate": {"kind": "private_source", "identifier_args": ["name"]},
        "read_inbox": {"kind": "untrusted_source"},
        "create_note": {"kind": "other", "effect": "reversible", "severity": 1, "payload_args": ["title", "body"]},
        "send_email": {
            "kind": "sink",
            "effect": "irreversible",
            "severity": 3,
            "payload_args": ["subject", "body"],
            "identifier_args": ["to"],
        },
    },
    "graph": {"min_span": 8},
    "selector": {"name": "gcarb", "window": 4, "seed": 0},
    "scorer": {
        "weights": {"provenance_path": 0.52, "canary": 0.15},
        "canary_patterns": ["CANARY-[0-9a-f]{8}"],
        "scope": "all",
    },
    "on_unknown": "escalate",
    "audit": {"raw_args": ["subject"]},
}
TOML_POLICY = """version = 1
name = "fuzz"
on_unknown = "escalate"

[tools.read_certificate]
kind = "private_source"
identifier_args = ["name"]

[tools.send_email]
kind = "sink"
effect = "irreversible"
severity = 3
payload_args = ["subject", "body"]
identifier_args = ["to"]

[scorer.weights]
provenance_path = 0.52
"""


# --------------------------------------------------------------------------- counting


@pytest.fixture(scope="session")
def fuzz_counts() -> Iterator[Counter[str]]:
    """Inputs tried per target, written to ci-artifacts/fuzz_counts.json at the end of the session."""
    counts: Counter[str] = Counter()
    yield counts
    if not counts:
        return
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    tried = {k: v for k, v in sorted(counts.items()) if "/" not in k}
    outcomes = {k: v for k, v in sorted(counts.items()) if "/" in k}
    body = {"inputs_tried": tried, "total_inputs": sum(tried.values()), "outcomes": outcomes, "crashes": 0}
    ARTIFACT.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- strategies

_surrogate = st.integers(min_value=0xD800, max_value=0xDFFF).map(chr)
_text = st.one_of(
    st.text(max_size=40),
    st.builds(lambda a, s, b: a + s + b, st.text(max_size=5), _surrogate, st.text(max_size=5)),
    st.sampled_from(["", " ", "CANARY-0badcafe", "X4821-99317", "ünïcödé ✓ 𝔘", "\x00", "a" * 300, "${x}", "{value}"]),
)
_number = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2, 3, 4, 1e308, -0.0]),
)
_scalar = st.one_of(st.none(), st.booleans(), _number, _text)
_json_like = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def _nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


_PATHS: list[tuple[str, ...]] = [
    (),
    ("version",),
    ("name",),
    ("tools",),
    ("tools", "send_email"),
    ("tools", "send_email", "kind"),
    ("tools", "send_email", "effect"),
    ("tools", "send_email", "severity"),
    ("tools", "send_email", "payload_args"),
    ("tools", "send_email", "identifier_args"),
    ("tools", "send_email", "also_source"),
    ("tools", "read_certificate", "kind"),
    ("graph",),
    ("graph", "min_span"),
    ("graph", "value_patterns"),
    ("selector", "name"),
    ("selector", "window"),
    ("selector", "seed"),
    ("scorer", "weights"),
    ("scorer", "weights", "provenance_path"),
    ("scorer", "weights", "canary"),
    ("scorer", "canary_patterns"),
    ("scorer", "injection_patterns"),
    ("scorer", "scope"),
    ("on_unknown",),
    ("calibration", "artifact"),
    ("audit", "raw_args"),
    ("safecommit",),
]
_VALUES = st.one_of(
    _json_like,
    st.sampled_from(
        [
            math.nan,
            -math.inf,
            math.inf,
            -1,
            -0.5,
            "execute",
            "probe",
            "sink",
            "nonsense",
            "[unclosed",
            "(a|",
            {},
            [],
            {"kind": "sink"},
            {"unknown_key": 1},
            ["x", 1, None],
        ]
    ),
)


@st.composite
def policy_mappings(draw: st.DrawFn) -> Any:
    """The base policy with 1–4 random edits: set a key path to a value, delete it, add an unknown key."""
    data: Any = copy.deepcopy(BASE_POLICY)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path = draw(st.sampled_from(_PATHS))
        action = draw(st.sampled_from(["set", "set", "delete", "unknown"]))
        if not path:
            if action == "set":
                data = draw(_VALUES)
            continue
        parent = data
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
            if not isinstance(parent, dict):
                break
        if not isinstance(parent, dict):
            continue
        if action == "set":
            parent[path[-1]] = draw(_VALUES)
        elif action == "delete":
            parent.pop(path[-1], None)
        else:
            parent[draw(st.sampled_from(["extra", "tool", "weigths", "Name", "1"]))] = draw(_scalar)
    return data


def _write_policy(folder: Path, data: Any, fmt: str) -> Path:
    path = folder / f"policy.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps(data), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8", errors="surrogatepass")
    return path


def _exercise(policy: Policy) -> None:
    """A policy that loads must also decide without raising."""
    guard = Guard(policy, threshold=0.5, audit=MemoryAudit())
    session = guard.session("fuzz")
    session.observe_user("hello CANARY-0badcafe")
    tool = sorted(policy.tools)[0]
    decision = session.decide(tool, {"name": "x", "body": "X4821-99317"}, "c1")
    assert isinstance(decision, Decision)
    assert decision.reason is not Reason.INTERNAL_ERROR, decision.message


# --------------------------------------------------------------------------- policy files


@fuzz(200)
@given(data=policy_mappings(), fmt=st.sampled_from(["yaml", "json"]))
def test_fuzz_policy_mappings(
    data: Any, fmt: str, tmp_path_factory: pytest.TempPathFactory, fuzz_counts: Counter[str]
) -> None:
    """Mutated policies load or raise PolicyError; what loads decides without raising."""
    fuzz_counts["policy_files"] += 1
    folder = tmp_path_factory.mktemp("policy")
    try:
        path = _write_policy(folder, data, fmt)
    except (UnicodeEncodeError, ValueError, yaml.YAMLError):
        assume(False)
    try:
        policy = load_policy(path)
    except PolicyError as exc:
        assert str(path) in str(exc)
        fuzz_counts["policy_files/refused"] += 1
        return
    _exercise(policy)
    fuzz_counts["policy_files/loaded_and_decided"] += 1


def _mutate(text: bytes, draw: st.DrawFn) -> bytes:
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if not text:
            text = draw(st.binary(max_size=20))
            continue
        i = draw(st.integers(min_value=0, max_value=len(text) - 1))
        j = draw(st.integers(min_value=i, max_value=min(len(text), i + 40)))
        op = draw(st.sampled_from(["delete", "insert", "replace", "duplicate", "truncate"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            filler = draw(
                st.one_of(
                    st.binary(max_size=8),
                    st.sampled_from(
                        [b"&a ", b"*a", b"!!python/object:os.system ", b"{", b"]", b"\n  ", b": ", b"\xff"]
                    ),
                )
            )
            text = text[:i] + filler + text[i:]
        elif op == "replace":
            text = text[:i] + draw(st.binary(min_size=1, max_size=4)) + text[i + 1 :]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i]
    return text


@st.composite
def policy_texts(draw: st.DrawFn) -> tuple[str, bytes]:
    fmt = draw(st.sampled_from(["yaml", "json", "toml"]))
    if fmt == "toml":
        base = TOML_POLICY.encode()
    elif fmt == "json":
        base = json.dumps(BASE_POLICY, indent=1).encode()
    else:
        base = yaml.safe_dump(BASE_POLICY).encode()
    return fmt, _mutate(base, draw)


@fuzz(200)
@given(case=policy_texts())
def test_fuzz_policy_text_mutations(
    case: tuple[str, bytes], tmp_path_factory: pytest.TempPathFactory, fuzz_counts: Counter[str]
) -> None:
    """Byte-level mutations of YAML/JSON/TOML policy files: a policy or a PolicyError."""
    fuzz_counts["policy_text_mutations"] += 1
    fmt, raw = case
    path = tmp_path_factory.mktemp("policytext") / f"policy.{fmt}"
    path.write_bytes(raw)
    try:
        policy = load_policy(path)
    except PolicyError as exc:
        assert str(path) in str(exc)
        fuzz_counts["policy_text_mutations/refused"] += 1
        return
    _exercise(policy)
    fuzz_counts["policy_text_mutations/loaded_and_decided"] += 1


HOSTILE_POLICIES: dict[str, bytes] = {
    "recursive_anchor.yaml": b"version: 1\nname: x\ntools: &t {a: *t}\n",
    "recursive_list.yaml": b"a: &x [*x]\n",
    "alias_bomb.yaml": b"a: &a [1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b]\n",
    "merge_alias.yaml": b"base: &b {kind: sink}\nversion: 1\nname: x\ntools: {t: *b}\n",
    "python_object.yaml": b"version: 1\nname: !!python/object:os.system echo\ntools: {t: {kind: sink}}\n",
    "python_apply.yaml": b"!!python/object/apply:os.system ['echo pwned']\n",
    "python_name.yaml": b"version: 1\nname: !!python/name:os.system\ntools: {t: {kind: sink}}\n",
    "python_module.yaml": b"x: !!python/module:os\n",
    "custom_tag.yaml": b"version: 1\nname: !secret x\ntools: {t: {kind: sink}}\n",
    "huge.yaml": b"version: 1\nname: x\ntools: {t: {kind: sink}}\n# " + b"x" * 2_100_000 + b"\n",
    "huge.json": b'{"version": 1, "name": "' + b"x" * 2_100_000 + b'", "tools": {}}',
    "not_utf8.yaml": b"version: 1\nname: \xff\xfe\ntools: {t: {kind: sink}}\n",
    "empty.yaml": b"",
    "null.json": b"null",
    "list.yaml": b"- 1\n- 2\n",
    "nan_weight.json": b'{"version":1,"name":"x","tools":{"t":{"kind":"sink"}},"scorer":{"weights":{"canary":NaN}}}',
    "neg_weight.yaml": b"version: 1\nname: x\ntools: {t: {kind: sink}}\nscorer: {weights: {canary: -0.1}}\n",
    "inf_weight.yaml": b"version: 1\nname: x\ntools: {t: {kind: sink}}\nscorer: {weights: {canary: .inf}}\n",
    "no_tools.yaml": b"version: 1\nname: x\ntools: {}\n",
    "missing_tools.yaml": b"version: 1\nname: x\n",
    "unknown_key.yaml": b"version: 1\nname: x\ntools: {t: {kind: sink}}\nselecter: {name: gcarb}\n",
    "wrong_type.toml": b'version = 1\nname = "x"\n[tools.t]\nkind = "sink"\nseverity = "high"\n',
    "execute_on_unknown.yaml": b"version: 1\nname: x\ntools: {t: {kind: sink}}\non_unknown: execute\n",
    "bad_regex.yaml": b"version: 1\nname: x\ntools: {t: {kind: sink}}\nscorer: {canary_patterns: ['(']}\n",
    "unknown_suffix.ini": b"[x]\n",
    "duplicate_keys.json": b'{"version": 1, "name": "x", "name": 3, "tools": {"t": {"kind": "sink"}}}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE_POLICIES))
def test_hostile_policy_files_are_refused(name: str, tmp_path: Path, fuzz_counts: Counter[str]) -> None:
    """Anchors, aliases, python tags, oversized, non-UTF-8, wrong types, unknown keys: PolicyError naming the file."""
    fuzz_counts["policy_hostile"] += 1
    path = tmp_path / name
    path.write_bytes(HOSTILE_POLICIES[name])
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------- calibration artifacts


@pytest.fixture(scope="module")
def artifact_setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Policy, dict[str, Any], Path]:
    policy = parse_policy(copy.deepcopy(BASE_POLICY))
    body = build_artifact(
        [policy],
        alpha=0.1,
        n=200,
        threshold=0.5,
        calibration_risk=0.08,
        grid=[0.1, 0.3, 0.5, 0.7],
        rule="crc",
        calibration_fingerprint="f" * 64,
        command="carbguard calibrate --alpha 0.1",
    )
    path = tmp_path_factory.mktemp("artifact") / "artifact.json"
    write_artifact(body, path)
    return policy, body, path


def _edit(body: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    out = copy.deepcopy(body)
    key = draw(st.sampled_from(sorted(out)))
    action = draw(st.sampled_from(["set", "delete", "nudge"]))
    if action == "delete":
        del out[key]
    elif action == "nudge" and isinstance(out[key], int | float) and not isinstance(out[key], bool):
        out[key] = out[key] + draw(st.sampled_from([1e-9, -1e-9, 0.01, 1]))
    else:
        out[key] = draw(_VALUES)
    return out


@fuzz(150)
@given(data=st.data())
def test_fuzz_artifact_edits_without_a_new_checksum_are_refused(
    data: st.DataObject,
    artifact_setup: tuple[Policy, dict[str, Any], Path],
    fuzz_counts: Counter[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Any edit that does not recompute the checksum (or that breaks the JSON) is refused naming the file."""
    fuzz_counts["artifact_edits"] += 1
    policy, body, _ = artifact_setup
    edited = _edit(body, data.draw)
    assume(edited != body)
    assume(_valid_text(json.dumps(edited, ensure_ascii=False)))  # lone surrogates: a known defect, pinned below
    path = tmp_path_factory.mktemp("edited") / "edited-artifact.json"
    try:
        path.write_text(json.dumps(edited, indent=1, sort_keys=True), encoding="utf-8")
    except (ValueError, UnicodeEncodeError):
        assume(False)
    with pytest.raises(ArtifactError) as info:
        load_artifact(path, policy)
    assert str(path) in str(info.value)


def test_every_truncation_of_an_artifact_is_refused(
    artifact_setup: tuple[Policy, dict[str, Any], Path], tmp_path: Path, fuzz_counts: Counter[str]
) -> None:
    """A truncated artifact (a crash while copying it) never loads, at any length."""
    policy, _, original = artifact_setup
    raw = original.read_bytes()
    path = tmp_path / "truncated.json"
    for cut in range(0, len(raw) - 1):
        fuzz_counts["artifact_truncations"] += 1
        path.write_bytes(raw[:cut])
        with pytest.raises(ArtifactError, match="truncated"):
            load_artifact(path, policy)


def _rechecksum(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {**copy.deepcopy(body), **changes}
    out["checksum"] = content_checksum(out)
    return out


CONSISTENT_EDITS: dict[str, dict[str, Any]] = {
    "alpha_zero": {"alpha": 0.0},
    "alpha_one": {"alpha": 1.0},
    "alpha_negative": {"alpha": -0.1},
    "alpha_above_one": {"alpha": 1.5},
    "alpha_nan_text": {"alpha": "nan"},
    "alpha_bool": {"alpha": True},
    "alpha_string": {"alpha": "0.1"},
    "threshold_nan_text": {"threshold": "nan"},
    "threshold_none": {"threshold": None},
    "threshold_string": {"threshold": "0.5"},
    "threshold_list": {"threshold": [0.5]},
    "format": {"format": "carbguard-artifact/2"},
    "other_policy": {"pipelines": {"someone-else": {}}},
}


@pytest.mark.parametrize("name", sorted(CONSISTENT_EDITS))
def test_checksum_consistent_bad_artifacts_are_refused(
    name: str, artifact_setup: tuple[Policy, dict[str, Any], Path], tmp_path: Path, fuzz_counts: Counter[str]
) -> None:
    """A re-checksummed artifact with α outside (0, 1), a non-number threshold, or another pipeline: ArtifactError."""
    fuzz_counts["artifact_consistent_edits"] += 1
    policy, body, _ = artifact_setup
    path = tmp_path / f"{name}.json"
    write_artifact(_rechecksum(body, **CONSISTENT_EDITS[name]), path)
    with pytest.raises(ArtifactError) as info:
        load_artifact(path, policy)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("part", ["weights", "min_span", "selector", "tools"])
def test_fingerprint_mismatch_is_refused_naming_the_part(
    part: str, artifact_setup: tuple[Policy, dict[str, Any], Path], fuzz_counts: Counter[str]
) -> None:
    """An artifact calibrated for another pipeline is refused, naming the file and the parts that differ."""
    fuzz_counts["artifact_fingerprint_mismatch"] += 1
    _, _, path = artifact_setup
    data = copy.deepcopy(BASE_POLICY)
    expected = {"weights": "scorer", "min_span": "graph", "selector": "selector", "tools": "tools"}[part]
    if part == "weights":
        data["scorer"]["weights"]["canary"] = 0.2
    elif part == "min_span":
        data["graph"]["min_span"] = 9
    elif part == "selector":
        data["selector"]["name"] = "full_prefix"
    else:
        data["tools"]["send_email"]["severity"] = 2
    with pytest.raises(ArtifactError, match=rf"{path.name}.*another pipeline.*{expected}"):
        load_artifact(path, parse_policy(data))


# --------------------------------------------------------------------------- proposals and results

TEN_MB = "x" * 10_000_000


class Opaque:
    """Not JSON."""


_leaf = st.one_of(
    _scalar,
    st.sampled_from([b"bytes", {1, 2}, Opaque(), complex(1, 2), ("a", "b"), TEN_MB, "CANARY-0badcafe"]),
    st.integers(min_value=MAX_DEPTH - 2, max_value=100).map(_nested),
)
_args = st.one_of(
    st.dictionaries(st.sampled_from(["to", "subject", "body", "name", "title", "x"]), _leaf, max_size=4),
    st.dictionaries(st.text(max_size=6), _json_like, max_size=3),
    st.dictionaries(st.one_of(st.integers(), st.tuples(st.integers())), _scalar, min_size=1, max_size=2),
    st.sampled_from([None, "not a mapping", ["a"], 7, TEN_MB, {"body": TEN_MB}]),
)
_tool = st.one_of(
    st.sampled_from(sorted(BASE_POLICY["tools"])),
    st.sampled_from(sorted(BASE_POLICY["tools"])),
    _text,
    st.sampled_from([None, 3, ["send_email"], "send_email\x00", "SEND_EMAIL"]),
)
_call_id = st.one_of(st.sampled_from(["c1", "c2", "c3"]), _text, st.sampled_from([None, 0, "", ["c1"], b"c1"]))
_result_call_id = st.one_of(st.sampled_from(["c1", "c2", "c3", "c9"]), _text, st.sampled_from([None, 0, "", b"c1"]))
_good_args = st.dictionaries(
    st.sampled_from(["to", "subject", "body", "name", "title"]),
    st.one_of(st.text(max_size=40), st.integers(), st.sampled_from(["X4821-99317", "CANARY-0badcafe", "a@b.example"])),
    max_size=3,
)
_op = st.one_of(
    st.tuples(st.just("decide"), st.sampled_from(sorted(BASE_POLICY["tools"])), _good_args, _result_call_id),
    st.tuples(st.just("decide"), _tool, _args, _call_id),
    st.tuples(st.just("decide"), _tool, _args, _call_id),
    st.tuples(
        st.just("result"),
        _result_call_id,
        st.one_of(st.text(max_size=2000), _text, st.none(), st.integers()),
        st.sampled_from(["ok", "error", "weird", None]),
    ),
    st.tuples(st.just("user"), st.one_of(_text, st.none(), st.integers())),
    st.tuples(st.just("final"), st.one_of(_text, st.none())),
)


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH + 1:
        return level
    if isinstance(value, Mapping):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _valid_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def understood(
    policy: Policy, tool: Any, args: Any, call_id: Any, seen: dict[str, Any], answered: frozenset[str] = frozenset()
) -> bool:
    """Whether the guard can understand this proposal (the only input allowed to execute): plain-str
    tool and call id, JSON arguments, and a call id that has no result yet and was not used for another call."""
    if type(call_id) is not str or not call_id or not _valid_text(call_id) or call_id in answered:
        return False
    if type(tool) is not str or tool not in policy.tools:
        return False
    if not isinstance(args, Mapping):
        return False
    try:
        text = json.dumps(args, allow_nan=False, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return False
    if not _valid_text(text) or len(text) > MAX_ARG_CHARS or _depth(args) > MAX_DEPTH:
        return False
    canonical = (tool, json.loads(text))
    return seen.setdefault(call_id, canonical) == canonical


@fuzz(250)
@given(ops=st.lists(_op, min_size=1, max_size=10))
def test_fuzz_proposals_and_results(ops: list[tuple[Any, ...]], fuzz_counts: Counter[str]) -> None:
    """decide never raises and never executes what it did not understand; observe_* raise only InputError."""
    fuzz_counts["proposal_sequences"] += 1
    policy = parse_policy(copy.deepcopy(BASE_POLICY))
    audit = MemoryAudit()
    session = Guard(policy, threshold=0.5, audit=audit).session("fuzz")
    seen: dict[str, Any] = {}
    answered: set[str] = set()
    decisions = 0
    for op in ops:
        fuzz_counts["proposal_operations"] += 1
        if op[0] == "decide":
            _, tool, args, call_id = op
            ok = understood(policy, tool, args, call_id, seen, frozenset(answered))
            decision = session.decide(tool, args, call_id)
            decisions += 1
            assert isinstance(decision, Decision)
            fuzz_counts[f"proposal_operations/{'understood' if ok else 'not_understood'}_{decision.verdict}"] += 1
            if not ok:
                assert decision.verdict is not Verdict.EXECUTE, (tool, call_id, decision.message)
                assert decision.reason in (
                    Reason.BAD_ARGUMENTS,
                    Reason.UNKNOWN_TOOL,
                    Reason.INTERNAL_ERROR,
                    Reason.CALL_REUSED,
                )
            else:
                assert decision.reason is not Reason.INTERNAL_ERROR, decision.message
            continue
        try:
            if op[0] == "result":
                session.observe_result(op[1], op[2], op[3])
                answered.add(op[1])
            elif op[0] == "user":
                session.observe_user(op[1])
            else:
                session.observe_final(op[1])
        except InputError:
            fuzz_counts["proposal_operations/observe_input_error"] += 1
    assert len(audit.entries) == decisions
    json.dumps(audit.entries)  # every entry is JSON


# --------------------------------------------------------------------------- AgentDojo run files


@st.composite
def run_mutations(draw: st.DrawFn) -> tuple[str, bytes]:
    source = draw(st.sampled_from(RUN_FILES))
    raw = (RUNS / source).read_bytes()
    if draw(st.booleans()):
        return source, _mutate(raw, draw)
    data = json.loads(raw)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        target = data
        messages = data.get("messages") if isinstance(data, dict) else None
        if isinstance(messages, list) and messages and draw(st.booleans()):
            k = draw(st.integers(min_value=0, max_value=len(messages) - 1))
            op = draw(st.sampled_from(["drop", "duplicate", "swap", "edit", "replace"]))
            if op == "drop":
                del messages[k]
                continue
            if op == "duplicate":
                messages.insert(k, copy.deepcopy(messages[k]))
                continue
            if op == "swap":
                j = draw(st.integers(min_value=0, max_value=len(messages) - 1))
                messages[k], messages[j] = messages[j], messages[k]
                continue
            if op == "replace":
                messages[k] = draw(_json_like)
                continue
            target = messages[k]
            calls = target.get("tool_calls") if isinstance(target, dict) else None
            if isinstance(calls, list) and calls and draw(st.booleans()):
                target = calls[draw(st.integers(min_value=0, max_value=len(calls) - 1))]
        if not isinstance(target, dict) or not target:
            continue
        key = draw(st.sampled_from([*sorted(target), "extra"]))
        if draw(st.booleans()) and key in target:
            del target[key]
        else:
            target[key] = draw(_VALUES)
    try:
        return source, json.dumps(data, allow_nan=True).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError):
        return source, raw[:100]


@fuzz(200)
@given(case=run_mutations())
def test_fuzz_agentdojo_run_files(
    case: tuple[str, bytes], tmp_path_factory: pytest.TempPathFactory, fuzz_counts: Counter[str]
) -> None:
    """A mutated run file is loaded, dropped or listed as failed with a reason; load_runs never raises."""
    fuzz_counts["agentdojo_run_files"] += 1
    source, raw = case
    root = tmp_path_factory.mktemp("runs")
    path = root / source
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    try:
        report = load_runs(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert len(report.episodes) + len(report.dropped_error) + len(report.failed) == 1
    outcome = "loaded" if report.episodes else "dropped" if report.dropped_error else "failed"
    fuzz_counts[f"agentdojo_run_files/{outcome}"] += 1
    for _, reason in report.failed:
        assert isinstance(reason, str) and reason


# --------------------------------------------------------------------------- former defects (now fixed)

_DEEP = 100_000
_BIG = "9" * 5_000


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
def test_fixed_deeply_nested_policy(fmt: str, tmp_path: Path) -> None:
    body = "[" * _DEEP + "]" * _DEEP
    text = body if fmt == "json" else (f"a: {body}\n" if fmt == "yaml" else f"a = {body}\n")
    path = tmp_path / f"deep.{fmt}"
    path.write_text(text)
    with pytest.raises(PolicyError):
        load_policy(path)


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
def test_fixed_huge_integer_in_policy(fmt: str, tmp_path: Path) -> None:
    text = {
        "json": f'{{"version": 1, "name": "x", "tools": {{"t": {{"kind": "sink", "severity": {_BIG}}}}}}}',
        "yaml": f"version: 1\nname: x\ntools: {{t: {{kind: sink, severity: {_BIG}}}}}\n",
        "toml": f'version = 1\nname = "x"\n[tools.t]\nkind = "sink"\nseverity = {_BIG}\n',
    }[fmt]
    path = tmp_path / f"bigint.{fmt}"
    path.write_text(text)
    with pytest.raises(PolicyError):
        load_policy(path)


@pytest.mark.parametrize("kind", ["deep", "bigint"])
def test_fixed_artifact_parser_errors(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "artifact.json"
    path.write_text("[" * _DEEP + "]" * _DEEP if kind == "deep" else f'{{"n": {_BIG}}}')
    with pytest.raises(ArtifactError):
        load_artifact(path)


def test_fixed_artifact_with_a_lone_surrogate(
    artifact_setup: tuple[Policy, dict[str, Any], Path], tmp_path: Path
) -> None:
    policy, body, _ = artifact_setup
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps({**body, "command": "\ud800"}), encoding="utf-8")
    with pytest.raises(ArtifactError):
        load_artifact(path, policy)


STRUCTURAL_EDITS: dict[str, dict[str, Any]] = {
    "n_missing": {"n": None},
    "n_string": {"n": "many"},
    "n_list": {"n": [1]},
    "selector_string": {"selector": "gcarb"},
    "pipeline_entry_int": {"pipelines": {"fuzz": 3}},
    "components_list": {"pipelines": {"fuzz": {"components": []}}},
    "rule_missing": {"rule": None},
}


@pytest.mark.parametrize("name", sorted(STRUCTURAL_EDITS))
def test_fixed_checksum_consistent_structural_edits(
    name: str, artifact_setup: tuple[Policy, dict[str, Any], Path], tmp_path: Path
) -> None:
    policy, body, _ = artifact_setup
    edited = copy.deepcopy(body)
    for key, value in STRUCTURAL_EDITS[name].items():
        if value is None:
            del edited[key]
        else:
            edited[key] = value
    path = tmp_path / f"{name}.json"
    write_artifact(_rechecksum(edited), path)
    with pytest.raises(ArtifactError):
        load_artifact(path, policy)


def test_fixed_deeply_nested_run_file(tmp_path: Path) -> None:
    path = tmp_path / RUN_FILES[0]
    path.parent.mkdir(parents=True)
    path.write_text('{"messages": ' + "[" * _DEEP + "]" * _DEEP + "}")
    report = load_runs(tmp_path)
    assert len(report.failed) == 1


def test_fixed_value_token_regex_is_quadratic() -> None:
    policy = parse_policy(copy.deepcopy(BASE_POLICY))
    session = Guard(policy, threshold=0.5).session("slow")
    session.decide("read_inbox", {}, "c1")
    start = time.perf_counter()
    session.observe_result("c1", "a" * 40_000)
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("call_id", [["c1"], {"id": "c1"}])
def test_fixed_unhashable_result_call_id(call_id: Any) -> None:
    session = Guard(parse_policy(copy.deepcopy(BASE_POLICY)), threshold=0.5).session("ids")
    with pytest.raises(InputError):
        session.observe_result(call_id, "text")


def test_guard_errors_are_the_only_clear_errors() -> None:
    """The error classes the fuzz targets accept are GuardError subclasses with useful messages."""
    assert all(issubclass(e, GuardError) for e in (PolicyError, ArtifactError, InputError))
