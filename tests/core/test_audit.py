"""The hash-chained audit log and its verifier (docs/audit.md)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.audit import GENESIS, AuditLog, MemoryAudit, entry_hash, read_entries, verify
from guard.errors import AuditError
from guard.policy import Policy
from guard.runtime import Guard

ENTRY_FIELDS = {
    "ts", "session", "proposal_index", "call_id", "tool", "args", "verdict", "reason", "message", "score",
    "threshold", "artifact", "selected", "features", "safecommit", "probes", "latency_us", "error", "prev", "hash",
}  # fmt: skip


def _log(path: Path, n: int) -> list[bytes]:
    log = AuditLog(path, fsync=False)
    for k in range(n):
        log.write({"n": k, "verdict": "execute"})
    return path.read_bytes().splitlines(keepends=True)


def test_written_log_verifies(tmp_path: Path) -> None:
    """A log written by AuditLog verifies, entry by entry."""
    _log(tmp_path / "a.jsonl", 4)
    report = verify(tmp_path / "a.jsonl")
    assert (report.ok, report.entries, report.torn_tail) == (True, 4, False)
    assert report.describe() == (
        "OK: 4 entries verify; chain intact; NOT checked: truncation, re-chaining"
        " (unkeyed log; use a key and checkpoints)"
    )


def test_entries_are_chained(tmp_path: Path) -> None:
    """Each entry's ``prev`` is the previous entry's hash, starting from the genesis hash."""
    _log(tmp_path / "a.jsonl", 3)
    entries = read_entries(tmp_path / "a.jsonl")
    assert [e["prev"] for e in entries] == [GENESIS, entries[0]["hash"], entries[1]["hash"]]
    assert all(entry_hash(e) == e["hash"] for e in entries)


def test_log_creates_parent_folder(tmp_path: Path) -> None:
    """The audit file's folder is created on demand."""
    AuditLog(tmp_path / "deep" / "er" / "a.jsonl", fsync=False).write({"n": 0})
    assert verify(tmp_path / "deep" / "er" / "a.jsonl").ok


def test_edited_line_detected(tmp_path: Path) -> None:
    """Editing a field of a line fails that line's hash."""
    path = tmp_path / "a.jsonl"
    lines = _log(path, 3)
    lines[1] = lines[1].replace(b'"execute"', b'"escalate"')
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert (report.ok, report.line, report.entries) == (False, 2, 1)
    assert "entry edited" in (report.problem or "")


@given(
    n=st.integers(min_value=2, max_value=7),
    op=st.sampled_from(["edit", "rehash", "remove", "swap"]),
    where=st.integers(min_value=0, max_value=6),
)
def test_tampering_is_detected(n: int, op: str, where: int) -> None:
    """Edited (even with a recomputed hash), removed and reordered lines all fail verification."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "a.jsonl"
        lines = _log(path, n)
        i = where % (n - 1)  # a line that has a successor, so the chain can expose it
        if op == "edit":
            lines[i] = lines[i].replace(b'"execute"', b'"abstain"')
        elif op == "rehash":
            entry = json.loads(lines[i])
            entry["verdict"] = "abstain"
            entry["hash"] = entry_hash(entry)
            lines[i] = json.dumps(entry).encode() + b"\n"
        elif op == "remove":
            del lines[i]
        else:
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        path.write_bytes(b"".join(lines))
        report = verify(path)
    assert not report.ok
    assert report.line in (i + 1, i + 2)
    assert report.describe().startswith("FAILED at line")


def test_torn_last_line_is_torn_not_tampered(tmp_path: Path) -> None:
    """A final line without its newline (a crash mid-write) is reported as torn, not as tampering."""
    path = tmp_path / "a.jsonl"
    lines = _log(path, 3)
    path.write_bytes(b"".join(lines[:2]) + lines[2][:25])
    report = verify(path)
    assert (report.ok, report.entries, report.torn_tail) == (True, 2, True)
    assert "torn" in report.describe()


def test_write_after_torn_line_recovers(tmp_path: Path) -> None:
    """The next write drops the torn bytes, records how many, and the chain verifies again."""
    path = tmp_path / "a.jsonl"
    lines = _log(path, 2)
    path.write_bytes(lines[0] + lines[1][:10])
    AuditLog(path, fsync=False).write({"n": 9})
    entries = read_entries(path)
    assert [e.get("n") for e in entries] == [0, 9]
    assert entries[-1]["recovered_torn_bytes"] == 10
    report = verify(path)
    assert (report.ok, report.entries, report.torn_tail) == (True, 2, False)


def test_garbage_line_detected(tmp_path: Path) -> None:
    """A line that is not JSON fails verification."""
    path = tmp_path / "a.jsonl"
    lines = _log(path, 2)
    path.write_bytes(lines[0] + b"not json\n" + lines[1])
    report = verify(path)
    assert (report.ok, report.line) == (False, 2)


def test_verify_missing_file_is_audit_error(tmp_path: Path) -> None:
    """Verifying a missing log raises AuditError."""
    with pytest.raises(AuditError, match="cannot read audit log"):
        verify(tmp_path / "absent.jsonl")


def test_write_nan_is_audit_error(tmp_path: Path) -> None:
    """An entry that is not strict JSON is refused with AuditError and leaves the log valid."""
    log = AuditLog(tmp_path / "a.jsonl", fsync=False)
    log.write({"n": 0})
    with pytest.raises(AuditError, match="cannot write audit entry"):
        log.write({"score": float("nan")})
    assert verify(tmp_path / "a.jsonl").entries == 1


def test_memory_audit_keeps_chain() -> None:
    """The in-memory sink chains entries exactly like the file sink."""
    sink = MemoryAudit()
    for k in range(3):
        sink.write({"n": k})
    assert sink.entries[0]["prev"] == GENESIS
    assert [e["prev"] for e in sink.entries[1:]] == [e["hash"] for e in sink.entries[:-1]]
    assert all(entry_hash(e) == e["hash"] for e in sink.entries)


def test_guard_writes_one_entry_per_decision(tmp_path: Path, small_policy: Policy) -> None:
    """A guard with an audit path writes one verified entry with every field of docs/audit.md per decision."""
    path = tmp_path / "audit.jsonl"
    session = Guard(small_policy, threshold=0.5, audit=path).session("s1")
    session.decide("read_document", {"path": "a.md"}, "c1")
    session.decide("nope", {}, "c2")
    entries = read_entries(path)
    assert verify(path).entries == 2
    assert set(entries[0]) >= ENTRY_FIELDS
    assert [(e["call_id"], e["verdict"], e["reason"]) for e in entries] == [
        ("c1", "execute", "under_threshold"),
        ("c2", "escalate", "unknown_tool"),
    ]


def test_audit_hashes_argument_values(small_policy: Policy) -> None:
    """Argument values are hashed in the audit entry unless the policy allows them raw."""
    sink = MemoryAudit()
    Guard(small_policy, threshold=0.5, audit=sink).session("s").decide("read_document", {"path": "secret.md"}, "c")
    assert sink.entries[0]["args"]["path"].startswith("sha256:")
    assert "secret.md" not in json.dumps(sink.entries[0])


def test_audit_raw_args_allowed_by_policy(small_policy: Policy) -> None:
    """Arguments the policy lists under audit.raw_args are logged raw."""
    policy = small_policy.model_copy(update={"audit": small_policy.audit.model_copy(update={"raw_args": ("path",)})})
    sink = MemoryAudit()
    Guard(policy, threshold=0.5, audit=sink).session("s").decide("read_document", {"path": "public.md"}, "c")
    assert sink.entries[0]["args"] == {"path": "public.md"}


def test_audit_records_infinite_threshold_as_text(small_policy: Policy) -> None:
    """An infinite threshold is written as text, keeping the entry strict JSON."""
    sink = MemoryAudit()
    Guard(small_policy, threshold=float("inf"), audit=sink).session("s").decide("read_document", {"path": "a"}, "c")
    assert sink.entries[0]["threshold"] == "inf"


def test_audit_survives_lone_surrogates(small_policy: Policy) -> None:
    """A tool name and call id holding lone surrogates are refused and still audited."""
    sink = MemoryAudit()
    decision = Guard(small_policy, threshold=0.5, audit=sink).session("s").decide("bad\ud800tool", {}, "c\udfff")
    assert decision.reason.value in ("unknown_tool", "bad_arguments")
    assert len(sink.entries) == 1
    assert sink.entries[0]["verdict"] == "escalate"
    assert sink.entries[0]["error"] is None


# --------------------------------------------------------------------------- keyed chain, checkpoints, strict lines

KEY = b"deployment-key-0123456789abcdef"


def _keyed(path: Path, n: int, key: bytes = KEY) -> list[bytes]:
    log = AuditLog(path, fsync=False, key=key)
    for k in range(n):
        log.write({"n": k, "verdict": "execute", "args": {"pin": "sha256:x"}})
    return path.read_bytes().splitlines(keepends=True)


def test_keyed_log_verifies_only_with_its_key(tmp_path: Path) -> None:
    """A keyed log verifies with its key only, naming the key check otherwise (no keyed chain before)."""
    path = tmp_path / "k.jsonl"
    _keyed(path, 3)
    assert verify(path, key=KEY).describe() == "OK: 3 entries verify (keyed chain)"
    without = verify(path)
    assert (without.ok, without.line, without.check) == (False, 1, "key")
    other = verify(path, key=b"another-key-0123456789abcdef")
    assert (other.ok, other.line, other.check) == (False, 1, "key") and "another key" in (other.problem or "")
    assert KEY.decode() not in path.read_text(encoding="utf-8")


def test_rechained_log_passes_unkeyed_but_fails_keyed(tmp_path: Path) -> None:
    """Dropping a line and re-chaining fools the unkeyed check, not the keyed one (verified OK before)."""
    plain, keyed = tmp_path / "plain.jsonl", tmp_path / "keyed.jsonl"
    _log(plain, 4)
    _keyed(keyed, 4)
    for path, key in ((plain, None), (keyed, None)):
        entries = [json.loads(line) for line in path.read_bytes().splitlines()]
        del entries[1]
        prev, out = GENESIS, []
        for entry in entries:
            entry["prev"] = prev
            entry["hash"] = prev = entry_hash(entry, key)
            out.append(json.dumps(entry))
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
    assert verify(plain).ok  # what an unkeyed chain does not prove
    report = verify(keyed, key=KEY)
    assert (report.ok, report.line, report.check) == (False, 1, "hash")


def test_checkpoint_shows_entries_cut_at_a_line_boundary(tmp_path: Path) -> None:
    """Cutting the last entries verifies alone, fails against a checkpoint naming the line (unseen before)."""
    from guard.audit import checkpoint

    for key in (None, KEY):
        path = tmp_path / f"cut-{key is None}.jsonl"
        lines = _keyed(path, 5) if key else _log(path, 5)
        point = checkpoint(path, key=key)
        assert point["entries"] == 5 and verify(path, key=key, checkpoint=point).ok
        path.write_bytes(b"".join(lines[:3]))
        assert verify(path, key=key).ok
        report = verify(path, key=key, checkpoint=point)
        assert (report.ok, report.line, report.check) == (False, 4, "checkpoint")
        assert "records 5 entries; the log ends after 3" in report.describe()
        path.write_bytes(b"".join(lines[:3]) + lines[3][:20])  # a cut inside line 4: torn, still short
        assert not verify(path, key=key, checkpoint=point).ok


def test_keyed_checkpoint_cannot_be_edited(tmp_path: Path) -> None:
    """A keyed checkpoint carries a MAC: lowering its entry count to hide a cut is detected."""
    from guard.audit import checkpoint

    path = tmp_path / "k.jsonl"
    lines = _keyed(path, 4)
    point = checkpoint(path, key=KEY)
    path.write_bytes(b"".join(lines[:2]))
    forged = {**point, "entries": 2, "last_hash": json.loads(lines[1])["hash"]}
    report = verify(path, key=KEY, checkpoint=forged)
    assert (report.ok, report.check) == (False, "checkpoint") and "MAC" in (report.problem or "")
    assert not verify(path, checkpoint=point).ok  # a keyed checkpoint needs the key


def test_a_writer_refuses_to_mix_keyed_and_unkeyed_entries(tmp_path: Path) -> None:
    """Appending unkeyed entries to a keyed log (or with another key) is an AuditError, not a silent downgrade."""
    path = tmp_path / "k.jsonl"
    _keyed(path, 1)
    with pytest.raises(AuditError, match="keyed"):
        AuditLog(path, fsync=False).write({"n": 1})
    with pytest.raises(AuditError, match="another key"):
        AuditLog(path, fsync=False, key=b"another-key-0123456789abcdef").write({"n": 1})
    with pytest.raises(AuditError, match="at least 16 bytes"):
        AuditLog(path, key=b"short")
    assert verify(path, key=KEY).entries == 1


@pytest.mark.parametrize(
    ("planted", "why"),
    [
        (b'"score":NaN', "non-finite number NaN"),
        (b'"score":1e999', "overflows to infinity"),
        (b'"note":"\\ud800"', "lone surrogate"),
        (b'"verdict":"escalate","verdict":"execute"', "duplicate key 'verdict'"),
    ],
    ids=["nan", "overflow", "surrogate", "duplicate"],
)
def test_non_strict_lines_fail_naming_the_line(tmp_path: Path, planted: bytes, why: str) -> None:
    """NaN, 1e999, a lone surrogate, a duplicate key: "FAILED at line N: why" (traceback or OK before)."""
    path = tmp_path / "a.jsonl"
    lines = _log(path, 3)
    lines[1] = lines[1].replace(b'"verdict":"execute"', planted).replace(b'"verdict": "execute"', planted)
    assert planted in lines[1]
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert (report.ok, report.line, report.check) == (False, 2, "parse")
    assert report.describe().startswith("FAILED at line 2: parse check: not strict JSON: ") and why in report.describe()
    with pytest.raises(AuditError, match=f"line 2: .*{why[:12]}"):
        read_entries(path)
