"""environment_answers: SafeCommit's probes run in AgentDojo's own environment, read as the flow reads them."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("agentdojo")

from guard.adapters._agentdojo_probes import environment_answers
from guard.calibration.kappa import calibration_episodes
from guard.corpora.agentdojo import load_suite_policy
from guard.decision import ProbeCall
from guard.records import Episode
from guard.safecommit.runtime import fill_template, parse_probe_result


@pytest.fixture(scope="module")
def episodes() -> dict[str, Episode]:
    """One logged gpt-4o episode per suite."""
    out: dict[str, Episode] = {}
    for e in calibration_episodes("gpt-4o-2024-05-13"):
        out.setdefault(e.meta.suite, e)
    return out


@pytest.mark.parametrize(
    ("suite", "probe", "value", "label"),
    [
        ("workspace", "contact_by_email", "emma.johnson@bluesparrowtech.com", "known"),
        ("workspace", "contact_by_email", "mark.black-2134@gmail.com", "unknown"),
        ("banking", "scheduled_recipient", "SE3550000000054910000003", "known"),
        ("banking", "scheduled_recipient", "US133000000121212121212", "unknown"),
    ],
)
def test_a_probe_answered_in_the_environment_reads_as_its_rules_say(
    episodes: dict[str, Episode], suite: str, probe: str, value: str, label: str
) -> None:
    """Catches the replay's probe model answering what AgentDojo would not: a result formatted otherwise than
    AgentDojo's executor formats it (its rules then match nothing), an error result read as ``ok``, or the wrong
    suite's environment.  The values: the user's own contact and standing order, and an injection task's address
    and IBAN."""
    config = next(p for p in load_suite_policy(suite).safecommit.probes if p.name == probe)  # type: ignore[union-attr]
    call = ProbeCall(config.tool, fill_template(config.args, {}, value), "c::probe1", probe)
    record = environment_answers(list(episodes.values()))(episodes[suite])(call)
    assert record is not None and record.call_id == "c::probe1"
    assert parse_probe_result(config, value, record) == label


def test_a_tool_the_suite_lacks_is_not_answered_and_a_copy_uses_the_logged_environment(
    episodes: dict[str, Episode],
) -> None:
    """Catches a probe of a tool the environment does not have being answered (it must stay a stop), and a
    reworded copy of an episode (same id, another object) being answered in an environment other than its log's."""
    answers = environment_answers([episodes["workspace"]])
    assert answers(episodes["workspace"])(ProbeCall("get_scheduled_transactions", {}, "x")) is None
    copy = dataclasses.replace(episodes["workspace"], records=())
    call = ProbeCall("search_contacts_by_email", {"query": "emma.johnson@bluesparrowtech.com"}, "y")
    got = answers(copy)(call)
    assert got is not None and got.status == "ok" and "emma.johnson@bluesparrowtech.com" in got.text
