"""A policy typo gets a "did you mean" (guard/policy/suggest.py, used by the policy loader's error text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard.errors import PolicyError
from guard.policy import Policy, load_policy
from guard.policy.suggest import accepted_keys, did_you_mean

TYPOS = """\
version: 1
name: t
tools:
  send_email: {kind: sink, identifer_args: [to]}
scorer:
  wieghts: {canary: 0.1}
ledger:
  destructive: {tools: [send_email], object_arg: {send_email: [to]}}
selectr: {name: gcarb}
"""


@pytest.mark.parametrize(
    ("loc", "hint"),
    [
        (("tools", "send_email", "identifer_args"), "; did you mean 'identifier_args'?"),
        (("scorer", "wieghts"), "; did you mean 'weights' or 'tool_weights'?"),
        (("ledger", "destructive", "object_arg"), "; did you mean 'object_args'?"),
        (("selectr",), "; did you mean 'selector'?"),
        (("tools", "send_email", "zzzzzz"), ""),
    ],
)
def test_did_you_mean_walks_models_mappings_and_optionals(loc: tuple[str, ...], hint: str) -> None:
    """Catches a walk that stops at a dict of models or an optional section, or suggests a far-off key."""
    assert did_you_mean(Policy, loc) == hint


def test_accepted_keys_are_the_owning_models_fields() -> None:
    """Catches suggestions drawn from the wrong model (the parent's keys instead of the tool's)."""
    keys = accepted_keys(Policy, ("tools", "send_email", "x"))
    assert "identifier_args" in keys and "payload_args" in keys and "scorer" not in keys


def test_a_policy_file_typo_names_line_and_suggestion(tmp_path: Path) -> None:
    """Catches the loader dropping the suggestion from the located error line."""
    path = tmp_path / "p.yaml"
    path.write_text(TYPOS, encoding="utf-8")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    text = str(info.value)
    line = "tools.send_email.identifer_args (line 4): Extra inputs are not permitted; did you mean 'identifier_args'?"
    assert line in text
    assert "selectr (line 9): Extra inputs are not permitted; did you mean 'selector'?" in text
