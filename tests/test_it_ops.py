"""The IT-ops worked deployment (examples/it_ops, docs/it-ops.md): its commands run as written, the page's
results block and every number its prose quotes are what they print, and the properties the page claims
(no benign internal send stopped without untrusted provenance, harm within alpha, the fallbacks differ) fail
under planted bugs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.it_ops import run
from examples.it_ops.labels import unscoped, write_labels
from guard import Guard
from guard.policy import Policy, parse_policy

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "it-ops.md").read_text(encoding="utf-8")
RESULTS = PAGE.split("## Results", 1)[1].split("\n## ", 1)[0]
pytestmark = pytest.mark.slow


def _commands() -> list[str]:
    block = re.search(r"```bash \{\.notest\}\n(.*?)```", PAGE, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def _argv(command: str) -> list[str]:
    words = [str(ROOT / w) if w.startswith("examples/") else w for w in shlex.split(command)]
    if words[0] == ".venv/bin/carbguard":
        return [sys.executable, "-m", "guard", *words[1:]]
    assert words[0] == ".venv/bin/python"
    return [sys.executable, *words[1:]]


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the page's commands in order in a fresh folder; the stdout of each (by step word, numbered when the
    step repeats), and the folder."""
    where = tmp_path_factory.mktemp("it_ops")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out: dict[str, Any] = {"_dir": where / "od" / "it_ops"}
    for command in _commands():
        argv = _argv(command)
        done = subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, (command, done.stderr[-2000:])
        step = argv[3]
        out[step if step not in out else f"{step}2"] = done.stdout
    return out


def _json(steps: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((steps["_dir"] / name).read_text(encoding="utf-8"))
    return found


def test_results_block_is_what_results_prints(steps: dict[str, Any]) -> None:
    """Catches a results block on the page that the `results` command does not print, line for line."""
    block = re.search(r"```text\n(.*?)```", RESULTS, re.S)
    assert block is not None
    assert block.group(1).strip() == steps["results"].strip()


def test_prose_numbers_are_printed(steps: dict[str, Any]) -> None:
    """Catches a number in the page's prose that no command printed (each quoted figure, against its source)."""
    deployed = [_json(steps, f"deploy_a{a}.json") for a in ("0.05", "0.1")]
    record, brk, kappa = _json(steps, "record.json"), _json(steps, "breaker.json"), _json(steps, "kappa.json")
    cases, cover = kappa["cases"], kappa["coverage_in_sample"]
    quiet, loud = deployed[0]["sends_trusted"], deployed[0]["sends_untrusted"]
    before = [d["threshold_before_slack"] for d in deployed]
    share = record["harmed"] / record["episodes"]
    claims = [
        f"{record['harmed']} of the {record['episodes']} recorded episodes ({share:.3f})",
        f"{deployed[0]['harmed']} of the {deployed[0]['episodes']} deployed episodes did, at either α",
        f"{kappa['kappa']:g} at α = 0.10, from {cases['used']} cases",
        f"({cases['unsafe']} unsafe, {cases['legit']} legit), against the 1.25",
        f"for {round(100 * cover['all'])} % of the cases",
        f"for only {round(100 * cover['unsafe'])} % of the unsafe ones",
        f"CRC gives {before[0]:g} at α = 0.05 and {before[1]:g} at α = 0.10",
        f"lowers both\n  to {deployed[0]['threshold']:g}",
        f"{quiet[0]} of {quiet[1]} were stopped",
        f"{loud[0]} of {loud[1]} was stopped",
        f"- **Override labels needed.** {record['labels']}. ",
        f"the same truth needs {record['labels_unscoped']} labels",
        f"complete ({brk['escalate']:.3f})",
        f"complete too ({brk['escalate_risky']:.3f})",
    ]
    assert deployed[0]["harmed"] == deployed[1]["harmed"] and deployed[0]["threshold"] == deployed[1]["threshold"]
    for claim in claims:
        assert claim in RESULTS, claim
    assert f"{record['episodes']} episodes through a shadow-mode guard" in PAGE
    assert "1 red-team" not in PAGE  # labels are override labels for the rules' exceptions, not red-team adds


def test_harm_within_alpha_and_internal_sends_run(steps: dict[str, Any]) -> None:
    """Catches a deployment whose harm rate exceeds alpha, or that stops a benign internal send with nothing
    untrusted before it (the wrongly-stopped password post), or that proposes no such send at all."""
    for alpha in ("0.05", "0.1"):
        found = _json(steps, f"deploy_a{alpha}.json")
        assert found["harm_rate"] <= float(alpha)
        stopped, proposed = found["sends_trusted"]
        assert stopped == 0 and proposed >= 30
        assert found["sends_untrusted"][1] >= 30


def test_labels_are_only_exceptions(steps: dict[str, Any]) -> None:
    """Catches labels written for episodes the rules already get right (every followed injection labelled), and
    scopes that save nothing."""
    lines = (steps["_dir"] / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    record = _json(steps, "record.json")
    assert len(lines) == record["labels"] < record["harmed"] / 4
    assert all(json.loads(line)["mode"] == "override" for line in lines)
    assert record["labels_unscoped"] > 10 * max(record["labels"], 1)


def _breaker_ok(found: dict[str, Any]) -> bool:
    """The claims about the breaker: a trip lowers completion, escalate_risky keeps more work going than escalate,
    and under escalate only the tasks without sinks or side effects complete."""
    ordered = bool(found["before"] > found["escalate_risky"] > found["escalate"] > 0)
    return ordered and found["escalate_tasks"] == ["kb"]


def test_breaker_fallbacks(steps: dict[str, Any]) -> None:
    """Catches a breaker whose fallbacks do not differ as the page says."""
    assert _breaker_ok(_json(steps, "breaker.json"))


@pytest.fixture
def artifact(steps: dict[str, Any]) -> Path:
    path: Path = steps["_dir"] / "artifact_a0.10.json"
    return path


def _without_internal(policy: Policy) -> Policy:
    data = policy.model_dump(mode="json", exclude={"base_dir"}, exclude_unset=True)
    data["trust"] = {}
    return parse_policy(data, source="planted: no trust.internal")


@pytest.fixture
def planted_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Patch the steps' guard factory; the test names what to drop from its keyword arguments or the policy."""
    dropped: list[str] = []
    real = run._guard

    def factory(artifact: Path, **kwargs: Any) -> Guard:
        if "internal" in dropped:
            return Guard(_without_internal(run._policy()), threshold=real(artifact).threshold)
        return real(artifact, **{k: v for k, v in kwargs.items() if k not in dropped})

    monkeypatch.setattr(run, "_guard", factory)
    yield dropped


def test_planted_internal_sends_not_internal_are_caught(
    artifact: Path, tmp_path: Path, planted_guard: list[str]
) -> None:
    """Planted: the gate no longer knows the internal destinations -> password posts and credential mails to
    #ops / ops.example are stopped, which the internal-sends check catches."""
    planted_guard.append("internal")
    found = run.deploy(artifact, tmp_path, 60, 1)
    assert found["sends_trusted"][0] > 0


def test_planted_ledger_without_internal_needs_labels(steps: dict[str, Any], tmp_path: Path) -> None:
    """Planted: the ledger's privacy_flow charges sends to internal destinations (allowed_destinations: {}) ->
    the labels needed jump, which the labels check catches."""
    truth = [json.loads(x) for x in (steps["_dir"] / "truth.jsonl").read_text(encoding="utf-8").splitlines()]
    policy = run._policy()
    data = policy.model_dump(mode="json", exclude={"base_dir"}, exclude_unset=True)
    data["ledger"]["privacy_flow"]["allowed_destinations"] = {}
    planted = write_labels(
        parse_policy(data, source="planted"), steps["_dir"] / "episodes.jsonl", truth, tmp_path / "l"
    )
    assert planted["labels"] > 10 * max(_json(steps, "record.json")["labels"], 1)
    assert write_labels(unscoped(policy), steps["_dir"] / "episodes.jsonl", truth, tmp_path / "u")["labels"] > 10


def test_planted_fallback_ignored_is_caught(artifact: Path, tmp_path: Path, planted_guard: list[str]) -> None:
    """Planted: the guard ignores the fallback it is given (always the default escalate) -> escalate_risky keeps
    no more work going than escalate, which the breaker check catches."""
    planted_guard.append("fallback")
    assert not _breaker_ok(run.breaker(artifact, tmp_path, 60, 2))


def test_planted_trip_file_ignored_is_caught(artifact: Path, tmp_path: Path, planted_guard: list[str]) -> None:
    """Planted: the guard never reads the trip file -> the breaker step refuses to report completion 'after a
    trip' of a guard that did not trip."""
    planted_guard.append("trip_file")
    with pytest.raises(RuntimeError, match="not tripped"):
        run.breaker(artifact, tmp_path, 20, 2)
