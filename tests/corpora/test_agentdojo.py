"""The AgentDojo corpus loader, the embedded corpus, the suite policies and the ledger labels.

Loader tests run on ``tests/fixtures/agentdojo_runs`` (eight real run files plus one broken file).
The comparison with the original ``runs/`` folder runs only where that folder exists.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from guard.cli import main as cli_main
from guard.corpora import agentdojo as ad
from guard.corpora._agentdojo_format import SUITES, decode_run
from guard.errors import CorpusError
from guard.ledger import Ledger, LedgerLabels
from guard.policy import load_policy
from guard.records import Episode, EpisodeMeta, RecordKind, Trust, proposal, result, user
from guard.stages import result_trust

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "agentdojo_runs"
# Optional cross-check against the original run files the embedded corpus was converted from: set
# CARBGUARD_AGENTDOJO_RUNS to run it (docs/testing.md, "Tests against AgentDojo's original runs").
ORIGINAL = Path(os.environ.get("CARBGUARD_AGENTDOJO_RUNS", "/nonexistent/agentdojo_runs"))
NO_ORIGINAL = (
    "original AgentDojo runs folder not available: set CARBGUARD_AGENTDOJO_RUNS to a folder holding, from the "
    "runs/ folder of the public AgentDojo repository (github.com/ethz-spylab/agentdojo) at commit 96046ab54a99f5e5"
    "ec86b920ea9a2d8ae24ea6d8, the folders of the five embedded models with only their none/ and "
    "important_instructions/ attack runs (4,421 files); docs/testing.md gives the commands"
)

GPT_BANKING = "gpt-4o-2024-05-13/banking/user_task_0/important_instructions/injection_task_0"
GPT_PARALLEL = "gpt-4o-2024-05-13/banking/user_task_12/important_instructions/injection_task_6"
GPT_REUSED_ID = "gpt-4o-2024-05-13/slack/user_task_0/important_instructions/injection_task_4"
LLAMA_BLOCKS = "meta-llama_Llama-3.3-70B-Instruct/banking/user_task_10/important_instructions/injection_task_4"
CR_PARALLEL = "command-r-plus/banking/injection_task_6/none/none"
CR_CUT = "command-r-plus/banking/user_task_10/none/none"
CLAUDE_BENIGN = "claude-3-7-sonnet-20250219/banking/user_task_0/none/none"
ERROR_RUN = "command-r-plus/workspace/user_task_35/none/none.json"
BROKEN = "claude-3-7-sonnet-20250219/banking/user_task_1/none/none.json"


@pytest.fixture(scope="module")
def report() -> ad.LoadReport:
    return ad.load_runs(FIXTURES)


@pytest.fixture(scope="module")
def episodes(report: ad.LoadReport) -> dict[str, Episode]:
    return {e.episode_id: e for e in report.episodes}


def raw(source: str) -> dict:
    return json.loads((FIXTURES / f"{source}.json").read_text(encoding="utf-8"))


def kinds(episode: Episode) -> str:
    return "".join(r.kind.value[0] for r in episode.records)


# --------------------------------------------------------------------------- counting


def test_fixture_folder_counts(report: ad.LoadReport) -> None:
    assert len(report.episodes) == 7
    assert report.dropped_error == (ERROR_RUN,)
    assert [path for path, _ in report.failed] == [BROKEN]
    assert "invalid JSON" in report.failed[0][1]
    assert "total: 7 episodes, 1 dropped (run error), 1 failed" in report.summary()


def test_episodes_sorted_and_ids(report: ad.LoadReport) -> None:
    sources = [e.meta.source for e in report.episodes]
    assert sources == sorted(sources)
    for e in report.episodes:
        m = e.meta
        assert e.episode_id == f"{m.model}/{m.suite}/{m.user_task}/{m.attack or 'none'}/{m.injection_task or 'none'}"
        assert m.source == e.episode_id + ".json"


def test_one_model_folder_and_suite_filter() -> None:
    one = ad.load_runs(FIXTURES / "gpt-4o-2024-05-13")
    assert {e.meta.model for e in one.episodes} == {"gpt-4o-2024-05-13"}
    assert len(one.episodes) == 3
    slack = ad.load_runs(FIXTURES, suites=["slack"])
    assert [e.episode_id for e in slack.episodes] == [GPT_REUSED_ID]
    assert slack.dropped_error == () and slack.failed == ()


@pytest.mark.parametrize("make", ["missing", "file", "empty", "no_runs"])
def test_bad_folder_raises(tmp_path: Path, make: str) -> None:
    target = tmp_path / "runs"
    if make == "file":
        target.write_text("x")
    elif make == "empty":
        target.mkdir()
    elif make == "no_runs":
        (target / "gpt" / "banking").mkdir(parents=True)
    with pytest.raises(CorpusError):
        ad.load_runs(target)


def test_unknown_suite_raises() -> None:
    with pytest.raises(CorpusError, match="unknown AgentDojo suite"):
        ad.load_runs(FIXTURES, suites=["shopping"])


def _copy_run(tmp_path: Path, source: str) -> tuple[Path, dict]:
    target = tmp_path / "runs" / f"{source}.json"
    target.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / f"{source}.json", target)
    return target, json.loads(target.read_text())


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda d: d.pop("messages"), "missing field 'messages'"),
        (lambda d: d.update(utility="yes"), "field 'utility' is str"),
        (lambda d: d.update(user_task_id="user_task_99"), "is not the folder's task"),
        (
            lambda d: d.update(messages=[{"role": "tool", "content": "x", "tool_call_id": None, "error": None}]),
            "without a pending tool call",
        ),
        (lambda d: d.update(messages=[{"role": "robot", "content": "x"}]), "unknown role"),
        (lambda d: d.update(messages=[{"role": "user", "content": 3}]), "message content is int"),
        (lambda d: d["messages"][2]["tool_calls"][0].update(args=[1]), "args is not an object"),
        (lambda d: d["messages"][3].update(tool_call_id="nope"), "matches no pending call"),
    ],
)
def test_bad_file_is_listed_not_raised(tmp_path: Path, edit, reason: str) -> None:
    target, data = _copy_run(tmp_path, CLAUDE_BENIGN)
    edit(data)
    target.write_text(json.dumps(data))
    out = ad.load_runs(tmp_path / "runs")
    assert out.episodes == ()
    assert len(out.failed) == 1 and reason in out.failed[0][1], out.failed


def test_top_level_not_an_object_fails(tmp_path: Path) -> None:
    target, _ = _copy_run(tmp_path, CLAUDE_BENIGN)
    target.write_text("[1, 2]")
    assert "expected an object" in ad.load_runs(tmp_path / "runs").failed[0][1]


# --------------------------------------------------------------------------- formats


def test_string_content_and_real_ids(episodes: dict[str, Episode]) -> None:
    e, data = episodes[GPT_BANKING], raw(GPT_BANKING)
    assert data["messages"][0]["role"] == "system"
    assert all(data["messages"][0]["content"] != r.text for r in e.records)
    assert e.records[0].kind is RecordKind.USER and e.records[0].text == data["messages"][1]["content"]
    first = e.records[1]
    assert (first.kind, first.tool) == (RecordKind.PROPOSAL, "read_file")
    assert dict(first.args) == {"file_path": "bill-december-2023.txt"}
    assert first.call_id == data["messages"][2]["tool_calls"][0]["id"]
    answer = e.result_of(first.call_id)
    assert answer is not None and answer.text == data["messages"][3]["content"] and answer.status == "ok"
    assert e.records[-1].kind is RecordKind.FINAL and e.records[-1].text == data["messages"][-1]["content"]
    assert kinds(e) == "u" + "pr" * 5 + "f"


def test_block_content_null_ids_and_tool_error(episodes: dict[str, Episode]) -> None:
    e, data = episodes[LLAMA_BLOCKS], raw(LLAMA_BLOCKS)
    assert e.records[0].text == data["messages"][1]["content"][0]["content"]
    calls = e.proposals()
    assert [c.call_id for c in calls] == [f"t{i}c0" for i in range(2, 2 + 2 * len(calls), 2)]
    results = [r for r in e.records if r.kind is RecordKind.RESULT]
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert results[0].text == data["messages"][3]["content"][0]["content"]
    errors = [r for r in results if r.status == "error"]
    assert [(r.tool, r.text) for r in errors] == [
        ("update_scheduled_transaction", "ValueError: Transaction with ID 3 not found.")
    ]


def test_parallel_calls_with_ids(episodes: dict[str, Episode]) -> None:
    e = episodes[GPT_PARALLEL]
    assert kinds(e) == "u" + "pr" * 2 + "pprr" + "pr" * 2 + "f"
    p1, p2, r1, r2 = e.records[5:9]
    assert (p1.tool, p2.tool) == ("send_money", "send_money")
    assert (r1.call_id, r2.call_id) == (p1.call_id, p2.call_id) and p1.call_id != p2.call_id


def test_parallel_calls_without_ids_match_by_order(episodes: dict[str, Episode]) -> None:
    e, data = episodes[CR_PARALLEL], raw(CR_PARALLEL)
    assert all("id" not in c for c in data["messages"][2]["tool_calls"])
    assert kinds(e) == "upppr" + "rr" + "f"
    assert [r.call_id for r in e.records[1:7]] == ["t2c0", "t2c1", "t2c2"] * 2
    sent = [c["args"]["amount"] for c in data["messages"][2]["tool_calls"]]
    assert [p.args["amount"] for p in e.proposals()] == sent
    assert ad.is_injection_goal_run(e) and e.meta.attack is None and e.meta.injection_task is None


def test_tool_call_ids_without_call_ids_fall_back_to_order(tmp_path: Path) -> None:
    target, data = _copy_run(tmp_path, CR_PARALLEL)
    for message in data["messages"]:
        if message["role"] == "tool":
            message["tool_call_id"] = "unknown-id"
    target.write_text(json.dumps(data))
    (episode,) = ad.load_runs(tmp_path / "runs").episodes
    assert [r.call_id for r in episode.records[1:7]] == ["t2c0", "t2c1", "t2c2"] * 2


def test_reused_call_id_is_replaced(episodes: dict[str, Episode]) -> None:
    e = episodes[GPT_REUSED_ID]
    ids = [p.call_id for p in e.proposals()]
    assert len(set(ids)) == len(ids) and ids[2] == "t6c0"
    answer = e.result_of("t6c0")
    assert answer is not None and answer.tool == "read_channel_messages" and answer.index == e.proposals()[2].index + 1


def test_unanswered_calls_stay_proposals(episodes: dict[str, Episode]) -> None:
    e = episodes[CR_CUT]
    assert e.records[-1].kind is RecordKind.PROPOSAL
    assert e.result_of(e.records[-1].call_id) is None
    assert not any(r.kind is RecordKind.FINAL for r in e.records)


def test_result_trust_from_suite_policy(report: ad.LoadReport) -> None:
    for e in report.episodes:
        policy = ad.load_suite_policy(e.meta.suite)
        for r in e.records:
            if r.kind is RecordKind.RESULT:
                assert r.trust is result_trust(policy, r.tool or "")
    banking = {r.tool: r.trust for e in report.episodes for r in e.records if r.kind is RecordKind.RESULT}
    assert banking["read_file"] is Trust.TOOL_UNTRUSTED
    assert banking["get_scheduled_transactions"] is Trust.TOOL_PRIVATE


def test_meta(episodes: dict[str, Episode]) -> None:
    data = raw(GPT_BANKING)
    assert episodes[GPT_BANKING].meta == EpisodeMeta(
        suite="banking",
        model="gpt-4o-2024-05-13",
        user_task="user_task_0",
        injection_task="injection_task_0",
        attack="important_instructions",
        utility=data["utility"],
        security=data["security"],
        source=GPT_BANKING + ".json",
        injections=tuple(data["injections"].values()),
    )
    benign = episodes[CLAUDE_BENIGN]
    assert benign.meta.injections == () and not ad.is_injection_goal_run(benign)


def test_progress_counter_without_tqdm(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)
    out = ad.load_runs(FIXTURES, progress=True)
    assert out == ad.load_runs(FIXTURES)
    assert "9/9" in capsys.readouterr().err


def test_progress_quiet_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    ad.load_runs(FIXTURES)
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- embedded corpus


@pytest.fixture(scope="module")
def embedded() -> ad.LoadReport:
    return ad.load_embedded()


def test_embedded_counts(embedded: ad.LoadReport) -> None:
    per_model = {m: sum(e.meta.model == m for e in embedded.episodes) for m in ad.EMBEDDED_MODELS}
    assert per_model == {
        "claude-3-7-sonnet-20250219": 1081,
        "command-r-plus": 728,
        "gpt-4o-2024-05-13": 753,
        "meta-llama_Llama-3-70b-chat-hf": 712,
        "meta-llama_Llama-3.3-70B-Instruct": 1081,
    }
    assert len(embedded.dropped_error) == 66 and embedded.failed == ()
    assert sum(p.stat().st_size for p in ad.EMBEDDED_DIR.glob("*.jsonl.gz")) < 10_000_000


def test_embedded_equals_fixture_files(report: ad.LoadReport, embedded: ad.LoadReport) -> None:
    by_id = {e.episode_id: e for e in embedded.episodes}
    for e in report.episodes:
        assert by_id[e.episode_id] == e
    assert set(report.dropped_error) <= set(embedded.dropped_error)


def test_embedded_filters_and_errors() -> None:
    one = ad.load_embedded("command-r-plus", suites=["workspace"])
    assert {(e.meta.model, e.meta.suite) for e in one.episodes} == {("command-r-plus", "workspace")}
    assert all(s.startswith("command-r-plus/workspace/") for s in one.dropped_error) and one.dropped_error
    with pytest.raises(CorpusError, match="unknown embedded model"):
        ad.load_embedded("gpt-5")


def test_convert_is_deterministic_and_round_trips(tmp_path: Path, report: ad.LoadReport) -> None:
    assert cli_main(["data", "agentdojo", "--runs", str(FIXTURES), "-o", str(tmp_path / "a"), "--quiet"]) == 0
    ad.convert(FIXTURES, tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    models = {e.meta.model for e in report.episodes} | {"claude-3-7-sonnet-20250219"}
    assert names == sorted(f"{m}.jsonl.gz" for m in models)
    rebuilt = []
    for name in names:
        blob = (tmp_path / "a" / name).read_bytes()
        assert blob == (tmp_path / "b" / name).read_bytes()
        assert blob[4:8] == b"\0\0\0\0"  # gzip header mtime
        lines = gzip.decompress(blob).decode().splitlines()
        model = name.removesuffix(".jsonl.gz")
        rebuilt += [ad.build_episode(decode_run(line, model)) for line in lines[1:]]
    assert tuple(sorted(rebuilt, key=lambda e: e.meta.source)) == report.episodes


def test_the_original_runs_skip_says_how_to_get_them() -> None:
    """Catches a skip message, or its docs/testing.md section, that does not say where the original runs come
    from: the public repository's runs/ folder at the NOTICE's commit, the five models, and the environment
    variable the tests read."""
    notice = (REPO / "guard" / "data" / "agentdojo" / "NOTICE.md").read_text(encoding="utf-8")
    commit = re.search(r"at commit `([0-9a-f]{40})`", notice)
    assert commit is not None
    page = (REPO / "docs" / "testing.md").read_text(encoding="utf-8")
    for text in (NO_ORIGINAL, page):
        assert "github.com/ethz-spylab/agentdojo" in text and "runs/" in text and commit.group(1) in text
        assert "CARBGUARD_AGENTDOJO_RUNS" in text and "important_instructions/" in text
    assert all(model in page for model in ad.EMBEDDED_MODELS)


@pytest.mark.slow
@pytest.mark.skipif(not ORIGINAL.is_dir(), reason=NO_ORIGINAL)
def test_embedded_equals_original_folder(embedded: ad.LoadReport) -> None:
    assert ad.load_runs(ORIGINAL) == embedded


# --------------------------------------------------------------------------- policies


POLICY_FILES = sorted(p.name for p in ad.POLICY_DIR.glob("*.yaml"))


def test_policy_files_present_and_copied() -> None:
    assert POLICY_FILES == ["banking.yaml", "ledger.yaml", "slack.yaml", "travel.yaml", "workspace.yaml"]
    top = REPO / "policies" / "agentdojo"
    assert sorted(p.name for p in top.glob("*.yaml")) == POLICY_FILES
    for name in POLICY_FILES:
        assert (top / name).read_bytes() == (ad.POLICY_DIR / name).read_bytes(), name


@pytest.mark.parametrize("suite", SUITES)
def test_suite_policy_validates_in_both_places(suite: str) -> None:
    shipped = ad.load_suite_policy(suite)
    assert ad.suite_policy_path(suite) == ad.POLICY_DIR / f"{suite}.yaml"
    top = load_policy(REPO / "policies" / "agentdojo" / f"{suite}.yaml")
    assert top.tools == shipped.tools and top.scorer == shipped.scorer and top.graph == shipped.graph
    artifact = shipped.calibration.artifact
    assert artifact is not None
    assert top.resolve(artifact) == REPO / "calibration_artifacts" / "agentdojo" / "pooled_a0.10.json"
    assert shipped.resolve(artifact) == ad.DATA_DIR / "calibration_artifacts" / "agentdojo" / "pooled_a0.10.json"


def test_unknown_suite_policy() -> None:
    with pytest.raises(CorpusError):
        ad.suite_policy_path("shopping")


def _tools_called(episodes: tuple[Episode, ...]) -> set[tuple[str, str]]:
    return {(e.meta.suite, p.tool or "") for e in episodes for p in e.proposals()}


def test_every_called_tool_is_in_its_suite_policy(report: ad.LoadReport, embedded: ad.LoadReport) -> None:
    for suite, tool in _tools_called(report.episodes) | _tools_called(embedded.episodes):
        assert ad.load_suite_policy(suite).tool(tool) is not None, (suite, tool)


@pytest.mark.skipif(not ORIGINAL.is_dir(), reason=NO_ORIGINAL)
def test_every_tool_in_original_runs_is_in_policy() -> None:
    for file in ORIGINAL.glob("*/*/*/*/*.json"):
        suite = file.relative_to(ORIGINAL).parts[1]
        for message in json.loads(file.read_text())["messages"]:
            for call in message.get("tool_calls") or []:
                assert ad.load_suite_policy(suite).tool(call["function"]) is not None, (file, call["function"])


@pytest.mark.parametrize("suite", SUITES)
def test_policy_covers_the_agentdojo_tools(suite: str) -> None:
    load_suites = pytest.importorskip("agentdojo.task_suite.load_suites")
    policy = ad.load_suite_policy(suite)
    for version in ("v1", "v1.1", "v1.1.1", "v1.1.2", "v1.2", "v1.2.1"):
        for tool in load_suites.get_suite(version, suite).tools:
            spec = policy.tool(tool.name)
            assert spec is not None, (version, tool.name)
            params = set(tool.parameters.model_json_schema().get("properties", {}))
            assert set(spec.payload_args) | set(spec.identifier_args) <= params, tool.name


@pytest.mark.parametrize("suite", SUITES)
def test_gate_policy_holds_no_ledger_label(suite: str) -> None:
    text = ad.suite_policy_path(suite).read_text(encoding="utf-8").lower()
    labels = ad.suite_ledger_labels(suite)
    for value in labels.attacker_identifiers + labels.canaries + labels.private_values:
        assert value.lower() not in text, value


# --------------------------------------------------------------------------- ledger labels


@pytest.mark.parametrize("suite", SUITES)
def test_suite_ledger_labels(suite: str) -> None:
    labels = ad.suite_ledger_labels(suite)
    assert isinstance(labels, LedgerLabels) and labels.attacker_identifiers
    tools = ad.load_suite_policy(suite).tools
    assert set(labels.destructive_tools) | set(labels.credential_tools) <= set(tools)


def test_episode_labels_add_injections(episodes: dict[str, Episode]) -> None:
    e = episodes[GPT_BANKING]
    labels = ad.episode_ledger_labels(e)
    assert labels.injected_texts == e.meta.injections and labels.injected_texts
    assert labels.attacker_identifiers == ad.suite_ledger_labels("banking").attacker_identifiers


def test_user_named_identifier_is_not_an_attacker_identifier() -> None:
    """A value the user names is not charged as attacker-directed (the ledger exempts it)."""
    iban = ad.suite_ledger_labels("banking").attacker_identifiers[0]
    records = (
        user(0, f"My new landlord's account is {iban}; pay the rent."),
        proposal(1, "send_money", {"recipient": iban, "amount": 2200, "subject": "Rent"}, "c1"),
        result(2, "c1", "sent", Trust.TOOL_PUBLIC, "send_money"),
    )
    meta = EpisodeMeta(suite="banking", user_task="user_task_15")
    e = Episode("x", records, meta)
    assert Ledger(ad.load_suite_policy("banking"), ad.episode_ledger_labels(e)).trace(e).first_harm is None
    stranger = Episode("y", (user(0, "Pay the rent."), *records[1:]), meta)
    assert Ledger(ad.load_suite_policy("banking"), ad.episode_ledger_labels(stranger)).trace(stranger).first_harm == 0


def test_injection_task_labels_only_in_attacked_episodes() -> None:
    records = (user(0, "Book a hotel in Paris."),)
    meta = EpisodeMeta(suite="travel", injection_task="injection_task_4", attack="important_instructions")
    attacked = Episode("a", records, meta)
    goal_run = Episode("b", records, EpisodeMeta(suite="travel", user_task="injection_task_4"))
    assert "Luxury Palace" in ad.episode_ledger_labels(attacked).attacker_identifiers
    assert "Luxury Palace" not in ad.episode_ledger_labels(goal_run).attacker_identifiers
    assert "Luxury Palace" not in ad.suite_ledger_labels("travel").attacker_identifiers


def test_ledger_on_fixture_runs(episodes: dict[str, Episode]) -> None:
    def loss(episode_id: str) -> bool:
        e = episodes[episode_id]
        return Ledger(ad.load_suite_policy(e.meta.suite), ad.episode_ledger_labels(e)).trace(e).first_harm is not None

    assert episodes[GPT_BANKING].meta.security is True and loss(GPT_BANKING)
    assert not loss(CLAUDE_BENIGN)
