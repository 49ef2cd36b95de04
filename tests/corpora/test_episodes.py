"""The episode format's reading side (guard.corpora.episodes): round trip, errors, schema, AgentDojo parity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from guard.calibration.jobs import calibrate, load_corpus, load_episodes_corpus
from guard.corpora import agentdojo as ad
from guard.corpora.convert_agentdojo import convert_agentdojo
from guard.corpora.episodes import episodes_json_schema, load_episodes, read_episodes
from guard.episode_json import episode_line
from guard.errors import CorpusError
from guard.policy import load_policy

REPO = Path(__file__).resolve().parents[2]
RUNS = REPO / "tests" / "fixtures" / "agentdojo_runs"
FIX = REPO / "tests" / "fixtures" / "episodes"
POLICY = FIX / "assistant_policy.yaml"
PROVENANCE = ("command", "corpus", "n_dropped", "checksum")


def _write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "e.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def _good() -> dict[str, Any]:
    return json.loads((FIX / "assistant.jsonl").read_text().splitlines()[1])


def test_round_trip_keeps_every_record_field(tmp_path: Path) -> None:
    """AgentDojo episodes written by episode_line read back equal (records, trust, utility): catches a dropped field."""
    report = ad.load_runs(RUNS)
    policies = [ad.load_suite_policy(s) for s in ("banking", "slack")]
    lines = [episode_line(e, policy=ad.load_suite_policy(e.meta.suite).name) for e in report.episodes]
    back = load_episodes(_write(tmp_path, lines), policies)
    assert [b.episode_id for b in back] == [e.episode_id for e in report.episodes]
    for original, read in zip(report.episodes, back, strict=True):
        assert read.records == original.records
        assert read.meta.utility == original.meta.utility and read.meta.attack == original.meta.attack


def test_trust_comes_from_the_policy(tmp_path: Path) -> None:
    """A result's trust follows its tool's kind in the policy given, not the file: catches trust stored or defaulted."""
    episode = load_episodes(FIX / "assistant.jsonl", load_policy(POLICY))[1]
    trusts = {r.tool: r.trust.value for r in episode.records if r.kind.value == "result"}
    assert trusts == {"read_inbox": "tool_untrusted", "read_file": "tool_private", "send_email": "tool_public"}


def _mutate(change: Any) -> dict[str, Any]:
    data = _good()
    change(data)
    return data


BAD: list[tuple[str, Any, str]] = [
    ("malformed JSON", '{"format": "carbguard-episodes/1", "id": ', "not valid JSON"),
    ("missing id", _mutate(lambda d: d.pop("id")), "id: missing"),
    ("unknown top field", _mutate(lambda d: d.update(extra=1)), "extra: unknown field"),
    ("unknown meta field", _mutate(lambda d: d["meta"].update(colour="red")), "meta.colour: unknown field"),
    ("wrong format", _mutate(lambda d: d.update(format="other/1")), "format: must be"),
    ("unknown record kind", _mutate(lambda d: d["records"][0].update(kind="thought")), "records[0].kind"),
    ("unknown record field", _mutate(lambda d: d["records"][0].update(trust="user")), "records[0].trust: unknown"),
    ("result for unknown call", _mutate(lambda d: d["records"][2].update(call_id="zz")), "records[2].call_id"),
    ("result before proposal", _mutate(lambda d: d["records"].insert(1, d["records"][2])), "records[1].call_id"),
    ("answered twice", _mutate(lambda d: d["records"].insert(3, d["records"][2])), "answered twice"),
    ("proposed twice", _mutate(lambda d: d["records"][3].update(call_id="c1")), "proposed twice"),
    ("undeclared tool", _mutate(lambda d: d["records"][1].update(tool="rm_rf")), "records[1].tool"),
    ("bad status", _mutate(lambda d: d["records"][2].update(status="maybe")), "records[2].status"),
    ("args not object", _mutate(lambda d: d["records"][3].update(args=[1])), "records[3].args"),
    ("unknown policy", _mutate(lambda d: d["meta"].update(policy="other")), "meta.policy"),
    ("utility not bool", _mutate(lambda d: d["meta"].update(utility="yes")), "meta.utility"),
]


@pytest.mark.parametrize(("case", "line", "needle"), BAD, ids=[b[0] for b in BAD])
def test_errors_name_file_line_and_field(tmp_path: Path, case: str, line: Any, needle: str) -> None:
    """Each malformed line is a CorpusError naming file:line and the field: catches a silent skip or a vague error."""
    path = _write(tmp_path, [_good() | {"id": "first"}, line])
    with pytest.raises(CorpusError) as err:
        load_episodes(path, load_policy(POLICY))
    assert f"{path}:2:" in str(err.value) and needle in str(err.value)


def test_duplicate_episode_id_names_both_lines(tmp_path: Path) -> None:
    """A reused episode id is refused naming the earlier line: catches last-one-wins."""
    path = _write(tmp_path, [_good(), "", _good()])
    with pytest.raises(CorpusError, match=r"e\.jsonl:3: id: .* already used on line 1"):
        load_episodes(path, load_policy(POLICY))


def test_several_policies_need_meta_policy(tmp_path: Path) -> None:
    """With two policies an episode that names none is refused: catches routing to an arbitrary policy."""
    banking, slack = ad.load_suite_policy("banking"), ad.load_suite_policy("slack")
    line = episode_line(ad.load_runs(RUNS).episodes[0])
    with pytest.raises(CorpusError, match=r"meta\.policy: missing"):
        load_episodes(_write(tmp_path, [line]), [banking, slack])


def test_schema_accepts_what_the_reader_accepts_and_refuses_an_unknown_field() -> None:
    """Fixture lines validate against the JSON Schema, a line with an extra field does not: catches schema drift."""
    schema = episodes_json_schema()
    for line in (FIX / "assistant.jsonl").read_text().splitlines():
        jsonschema.validate(json.loads(line), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(_good() | {"extra": 1}, schema)
    bad_record = _mutate(lambda d: d["records"][1].pop("call_id"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_record, schema)


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    """An artifact without the fields that record where it came from."""
    return {k: v for k, v in body.items() if k not in PROVENANCE}


def _converted(tmp_path: Path) -> tuple[Path, Path, list[Any]]:
    out, labels = tmp_path / "ad.jsonl", tmp_path / "ad.labels.jsonl"
    convert_agentdojo(str(RUNS), out, labels)
    return out, labels, [ad.load_suite_policy(s) for s in ("banking", "slack")]


@pytest.mark.parametrize("workers", [1, 2])
def test_calibrating_the_converted_file_gives_the_runs_artifact(tmp_path: Path, workers: int) -> None:
    """Converted AgentDojo episodes + labels give the --runs artifact bar provenance: catches record/id/ledger drift."""
    out, labels, policies = _converted(tmp_path)
    from_runs = calibrate(load_corpus(str(RUNS), None), alpha=0.5, selector="gcarb")
    from_file = calibrate(
        load_episodes_corpus(policies, str(out), str(labels)), alpha=0.5, selector="gcarb", workers=workers
    )
    assert from_runs["calibration_set"] == from_file["calibration_set"]
    assert _strip(from_runs) == _strip(from_file)
    assert json.dumps(_strip(from_runs), sort_keys=True) == json.dumps(_strip(from_file), sort_keys=True)


def test_without_the_labels_the_artifact_differs(tmp_path: Path) -> None:
    """Negative control: the episodes without the AgentDojo labels calibrate another set: the parity test can fail."""
    out, _, policies = _converted(tmp_path)
    from_runs = calibrate(load_corpus(str(RUNS), None), alpha=0.5, selector="gcarb")
    bare = calibrate(load_episodes_corpus(policies, str(out), None), alpha=0.5, selector="gcarb")
    assert from_runs["calibration_set"] != bare["calibration_set"]


def test_read_episodes_reports_each_episodes_policy(tmp_path: Path) -> None:
    """Converted AgentDojo episodes go to their own suite policy: catches every episode read under the first policy."""
    out, _, policies = _converted(tmp_path)
    read = read_episodes(out, policies)
    assert {eid.split("/")[1]: p.name for eid, p in read.policy_of.items()} == {
        "banking": "agentdojo-banking",
        "slack": "agentdojo-slack",
    }
