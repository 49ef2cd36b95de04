"""The certificate → note → e-mail example (examples/certificate_note_email.py) shows what it claims."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from guard.decision import Verdict

ROOT = Path(__file__).resolve().parents[2]
CERT_RESULT, PUBLIC_CALL, PUBLIC_RESULT, NOTE = 2, 3, 4, 5


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    """The example script, imported from its file (registered while the tests use it)."""
    path = ROOT / "examples" / "certificate_note_email.py"
    spec = importlib.util.spec_from_file_location("certificate_note_email_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def rows(example: ModuleType) -> dict[str, object]:
    """The example's rows keyed by call id (running its main function once)."""
    return {row.call_id: row for row in example.main()}


def test_example_uses_explicit_threshold(example: ModuleType) -> None:
    """The example passes its threshold explicitly (no artifact for the toy policy)."""
    assert example.THRESHOLD == 0.5


def test_every_proposal_is_reported(rows: dict[str, object]) -> None:
    """main() returns one row per proposal of the script."""
    assert list(rows) == ["c1", "c2", "c3", "c4", "c5"]


def test_gcarb_keeps_private_chain_for_leak(rows: dict[str, object]) -> None:
    """For the leaking e-mail G-CARB selects the certificate result and the note carrying its field."""
    assert rows["c4"].selected == (CERT_RESULT, NOTE)  # type: ignore[attr-defined]


def test_gcarb_leaves_out_public_task(rows: dict[str, object]) -> None:
    """The disconnected public read is outside G-CARB's selection for the leak but inside full-prefix's."""
    leak = rows["c4"]
    assert not {PUBLIC_CALL, PUBLIC_RESULT} & set(leak.selected)  # type: ignore[attr-defined]
    assert {PUBLIC_CALL, PUBLIC_RESULT} <= set(leak.full_selected)  # type: ignore[attr-defined]
    assert len(leak.selected) < len(leak.full_selected)  # type: ignore[attr-defined]


def test_leaking_email_is_refused(rows: dict[str, object]) -> None:
    """The leaking e-mail scores above the threshold and is escalated (by both selectors)."""
    leak = rows["c4"]
    assert leak.verdict is Verdict.ESCALATE  # type: ignore[attr-defined]
    assert leak.score > 0.5  # type: ignore[attr-defined]
    assert leak.full_verdict is Verdict.ESCALATE  # type: ignore[attr-defined]


def test_public_email_follows_public_branch_and_executes(rows: dict[str, object]) -> None:
    """The public-only e-mail's G-CARB evidence is the public branch, without the certificate, and it executes."""
    public = rows["c5"]
    assert {PUBLIC_CALL, PUBLIC_RESULT} <= set(public.selected)  # type: ignore[attr-defined]
    assert CERT_RESULT not in public.selected  # type: ignore[attr-defined]
    assert public.verdict is Verdict.EXECUTE  # type: ignore[attr-defined]


def test_full_prefix_scores_public_email_higher(rows: dict[str, object]) -> None:
    """Full-prefix hands the public e-mail the unrelated certificate, which raises its score."""
    public = rows["c5"]
    assert CERT_RESULT in public.full_selected  # type: ignore[attr-defined]
    assert public.full_score > public.score  # type: ignore[attr-defined]


def test_example_prints_the_comparison(example: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """The printed report names the threshold, both verdicts of the e-mails and the selections."""
    example.main()
    out = capsys.readouterr().out
    assert "threshold λ = 0.5" in out
    assert "c4   send_email        escalate (0.70)         [2, 5]" in out
    assert "c5   send_email        execute (0.08)          [0, 3, 4]" in out
