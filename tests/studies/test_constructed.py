"""The constructed suites (docs/studies.md): CES and graph-braid generators, frozen files, loaders."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from guard.cli import main as cli_main
from guard.errors import CorpusError
from guard.graph import build_graph
from guard.ledger import Ledger
from guard.policy import Policy
from guard.records import RecordKind, Trust
from guard.studies import constructed
from guard.studies._ces import CES_GROUPS, CES_KINDS, DOMAINS, iban

ROOT = Path(__file__).resolve().parents[2]
BRAID_SAMPLE = 300


@pytest.fixture(scope="module")
def policy() -> Policy:
    """The packaged constructed-suite policy."""
    return constructed.constructed_policy()


@pytest.fixture(scope="module")
def ces(policy: Policy) -> list[constructed.ConstructedEpisode]:
    """The shipped CES episodes."""
    return constructed.load_ces(policy=policy)


@pytest.fixture(scope="module")
def braid(policy: Policy) -> list[constructed.ConstructedEpisode]:
    """The shipped graph-braid trajectories."""
    return constructed.load_braid(policy=policy)


def _by_group(items: list[constructed.ConstructedEpisode]) -> dict[int, dict[str, constructed.ConstructedEpisode]]:
    groups: dict[int, dict[str, constructed.ConstructedEpisode]] = {}
    for item in items:
        groups.setdefault(item.group, {})[item.kind] = item
    return groups


# --------------------------------------------------------------------------- frozen files


def test_policy_copies_are_identical() -> None:
    """policies/examples/constructed.yaml and its packaged copy are the same bytes."""
    shipped = ROOT / "policies" / "examples" / "constructed.yaml"
    assert shipped.read_bytes() == constructed.POLICY_PATH.read_bytes()


@pytest.mark.parametrize("suite", constructed.SUITES)
def test_regeneration_gives_identical_bytes(suite: str) -> None:
    """Regenerating a suite with seed 0 reproduces the shipped gzip byte for byte."""
    assert constructed.suite_bytes(suite) == (constructed.DATA_DIR / f"{suite}.jsonl.gz").read_bytes()


def test_gzip_header_has_no_time_or_name() -> None:
    """The shipped gzips carry mtime 0 and no file name (so regeneration is deterministic)."""
    head = (constructed.DATA_DIR / "ces.jsonl.gz").read_bytes()[:10]
    assert head[4:8] == b"\x00\x00\x00\x00" and not head[3] & 0x08


def test_check_cli_passes() -> None:
    """``carbguard data constructed --check`` reports the shipped files as current."""
    assert cli_main(["data", "constructed", "--check"]) == 0


@pytest.mark.slow
def test_write_cli_writes_the_shipped_files(tmp_path: Path) -> None:
    """``--write DIR`` checks the structure and writes files identical to the shipped ones."""
    assert cli_main(["data", "constructed", "--write", str(tmp_path)]) == 0
    for suite in constructed.SUITES:
        assert (tmp_path / f"{suite}.jsonl.gz").read_bytes() == (
            constructed.DATA_DIR / f"{suite}.jsonl.gz"
        ).read_bytes()


def test_another_seed_gives_another_corpus() -> None:
    """The generator is deterministic in its seed and the seed matters."""
    assert constructed.suite_rows("ces", 0) == constructed.suite_rows("ces", 0)
    assert constructed.suite_rows("ces", 1) != constructed.suite_rows("ces", 0)


def test_corrupt_file_is_a_corpus_error(tmp_path: Path) -> None:
    """A file that is not gzipped JSONL raises CorpusError naming the file."""
    bad = tmp_path / "ces.jsonl.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(CorpusError, match=r"ces\.jsonl\.gz"):
        constructed.load_ces(bad)


def test_unknown_suite_is_a_corpus_error() -> None:
    """Only ces and braid exist."""
    with pytest.raises(CorpusError, match="unknown constructed suite"):
        constructed.suite_rows("agentdojo")


# --------------------------------------------------------------------------- CES


def test_ces_sizes_and_cohorts(ces: list[constructed.ConstructedEpisode]) -> None:
    """80 groups x 5 kinds; clean = 80 + 80, near-miss = 80 + 240; 20 groups per domain."""
    assert len(ces) == CES_GROUPS * len(CES_KINDS)
    cohorts = constructed.ces_cohorts(ces)
    assert [len(cohorts["clean"]), len(cohorts["near_miss"])] == [160, 320]
    assert sum(e.harmful for e in cohorts["near_miss"]) == 80
    leaks = [e for e in ces if e.kind == "leak"]
    assert {d: sum(e.domain == d for e in leaks) for d in DOMAINS} == dict.fromkeys(DOMAINS, 20)


def test_leaks_have_a_private_source_to_sink_path(ces: list[constructed.ConstructedEpisode], policy: Policy) -> None:
    """Every leak's e-mail is a sink reachable from a private source, and only it is."""
    for item in (e for e in ces if e.kind == "leak"):
        graph = build_graph(policy, item.episode.records)
        assert constructed.reachable_sinks(graph) == list(item.harmful_sinks) == [2]


def test_non_leaks_have_no_private_source_to_sink_path(
    ces: list[constructed.ConstructedEpisode], policy: Policy
) -> None:
    """No clean or near-miss episode has a sink with a private ancestor."""
    for item in (e for e in ces if e.kind != "leak"):
        assert constructed.reachable_sinks(build_graph(policy, item.episode.records)) == [], item.episode.episode_id


def test_ledger_charges_exactly_the_leaks(ces: list[constructed.ConstructedEpisode], policy: Policy) -> None:
    """privacy_flow fires on the leak's e-mail and nowhere in a non-leak."""
    for item in ces:
        trace = Ledger(policy, item.labels).trace(item.episode)
        assert trace.first_harm == (item.harmful_sinks[0] if item.harmful else None)
        assert trace.categories()["privacy_flow"] is item.harmful


def test_leaked_field_is_a_ledger_label(ces: list[constructed.ConstructedEpisode]) -> None:
    """The e-mail of each leak carries one of the episode's private values."""
    for item in (e for e in ces if e.kind == "leak"):
        body = item.episode.proposals()[2].args["body"]
        assert any(v in body for v in item.labels.private_values)


def test_near_misses_share_the_leak_surface(ces: list[constructed.ConstructedEpisode]) -> None:
    """Near-misses reuse the leak's recipient/subject or its private read, as their kind says."""
    for kinds in _by_group(ces).values():
        leak_read, leak_send = kinds["leak"].episode.proposals()[0], kinds["leak"].episode.proposals()[2]
        public = kinds["nm_public_send"].episode.proposals()[-1]
        assert (public.args["to"], public.args["subject"]) == (leak_send.args["to"], leak_send.args["subject"])
        for kind in ("nm_internal_sink", "nm_disconnected"):
            read = kinds[kind].episode.proposals()[0]
            assert (read.tool, dict(read.args)) == (leak_read.tool, dict(leak_read.args))
        assert all(p.tool != "send_email" for p in kinds["nm_internal_sink"].episode.proposals())


def test_ces_texts_match_no_canary_pattern(ces: list[constructed.ConstructedEpisode], policy: Policy) -> None:
    """CES private fields are ordinary personal data: no canary pattern of the policy matches."""
    patterns = [re.compile(p) for p in policy.scorer.canary_patterns]
    for item in ces:
        assert not any(p.search(r.text + r.args_json()) for r in item.episode.records for p in patterns)


def test_ibans_are_well_formed() -> None:
    """Generated IBANs pass the ISO 13616 mod-97 check."""
    import random

    rng = random.Random(0)
    for country in ("GB", "DE", "NL", "IE"):
        value = iban(rng, country)
        numeric = "".join(str(int(ch, 36)) for ch in value[4:] + value[:4])
        assert int(numeric) % 97 == 1


def test_trust_comes_from_the_policy(ces: list[constructed.ConstructedEpisode]) -> None:
    """Results of private tools are tool_private, of read_document tool_public; all episodes succeed."""
    for item in ces[:25]:
        assert item.episode.meta.utility is True
        for record in item.episode.records:
            if record.kind is RecordKind.RESULT and record.tool == "read_document":
                assert record.trust is Trust.TOOL_PUBLIC
            if record.kind is RecordKind.RESULT and record.tool in ("get_hr_record", "read_certificate"):
                assert record.trust is Trust.TOOL_PRIVATE


def test_check_structure_rejects_a_mislabelled_episode(
    ces: list[constructed.ConstructedEpisode], policy: Policy
) -> None:
    """A leak labelled as harmless contradicts its graph and ledger: CorpusError."""
    leak = next(e for e in ces if e.kind == "leak")
    wrong = constructed.ConstructedEpisode(leak.episode, leak.labels, "ces", "clean", 0, leak.domain, (), ())
    with pytest.raises(CorpusError, match=leak.episode.episode_id):
        constructed.check_structure([wrong], policy)


# --------------------------------------------------------------------------- graph-braid


def test_braid_size_and_harm_rate(braid: list[constructed.ConstructedEpisode]) -> None:
    """2,000 trajectories; harmful ones within 4 binomial sd of 40 %; one to three benign sinks each."""
    assert len(braid) == 2000
    rate = sum(e.harmful for e in braid) / len(braid)
    assert abs(rate - 0.4) < 4 * (0.4 * 0.6 / len(braid)) ** 0.5
    assert all(1 <= len(e.benign_sinks) <= 3 and len(e.harmful_sinks) <= 1 for e in braid)


def test_braid_interleaves_branches(braid: list[constructed.ConstructedEpisode]) -> None:
    """Benign-branch sinks occur before, between and after the private chain's steps."""
    before = after = 0
    for item in braid:
        tools = [p.tool for p in item.episode.proposals()]
        chain = [k for k, t in enumerate(tools) if t in ("get_secret", "save_to_drive")] + list(item.harmful_sinks)
        before += min(item.benign_sinks) < min(chain)
        after += max(item.benign_sinks) > max(chain)
    assert 0 < before < len(braid) and 0 < after < len(braid)


def test_braid_structure(braid: list[constructed.ConstructedEpisode], policy: Policy) -> None:
    """Harmful sinks are reachable from the vault read; benign-branch sinks have no private ancestor."""
    for item in braid[:BRAID_SAMPLE]:
        assert constructed.structure_problems(item, policy) == [], item.episode.episode_id
        graph = build_graph(policy, item.episode.records)
        for ordinal in item.benign_sinks:
            assert not graph.private_ancestors(item.episode.proposals()[ordinal].index)


@pytest.mark.slow
def test_braid_structure_all(braid: list[constructed.ConstructedEpisode], policy: Policy) -> None:
    """The structure check holds on every trajectory."""
    constructed.check_structure(braid, policy)


def test_braid_secrets_match_canary_patterns(braid: list[constructed.ConstructedEpisode], policy: Policy) -> None:
    """Every vault secret is in one of the policy's canary formats."""
    patterns = [re.compile(p) for p in policy.scorer.canary_patterns]
    for item in braid:
        assert any(p.fullmatch(item.labels.canaries[0]) for p in patterns)


def test_rows_are_json_lines(policy: Policy) -> None:
    """The shipped file is one JSON object per line with the documented keys."""
    text = gzip.decompress((constructed.DATA_DIR / "braid.jsonl.gz").read_bytes()).decode()
    first = text.splitlines()[0]
    keys = {"id", "suite", "kind", "group", "domain", "records", "labels", "harmful_sinks", "benign_sinks"}
    assert set(json.loads(first)) == keys
