"""`carbguard monitor`'s state file (guard/cli/monitor_state.py): each run reads and verifies only the entries
appended since the last run and prints exactly what a run over the whole log (`--no-state`) prints; a state
that does not match the log, the artifact or the key, or that cannot be read, is ignored with a warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guard.artifact import load_artifact
from guard.audit import AuditLog
from guard.calibration.replay import feed
from guard.cli import main, monitor_state
from guard.corpora.episodes import load_episodes
from guard.policy import Policy, load_policy
from guard.runtime import Guard

FIX = Path(__file__).resolve().parent / "fixtures" / "episodes"
POLICY, EPISODES = FIX / "assistant_policy.yaml", FIX / "assistant.jsonl"
KEY = b"k" * 32


@pytest.fixture(scope="module")
def policy() -> Policy:
    """The seven-tool assistant fixture policy."""
    return load_policy(POLICY)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two artifacts calibrated on the fixture episodes (α = 0.3 and α = 0.2: different checksums)."""
    folder = tmp_path_factory.mktemp("art")
    out = (folder / "a.json", folder / "b.json")
    for alpha, path in zip(("0.3", "0.2"), out, strict=True):
        argv = ["calibrate", "--policy", str(POLICY), "--episodes", str(EPISODES), "--alpha", alpha, "--out", str(path)]
        assert main(argv) == 0
    return out


class Deployment:
    """A guard writing one audit log: closed sessions from the fixture episodes, and sessions left open."""

    def __init__(self, policy: Policy, artifact: Path, audit: Path, key: bytes | None = None) -> None:
        art = load_artifact(artifact, policy)
        sink = AuditLog(audit, fsync=False, key=key)
        self.guard = Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id, audit=sink)
        self.episodes = load_episodes(EPISODES, policy)
        self.count = 0
        self.open: dict[str, Any] = {}

    def closed(self, n: int) -> list[str]:
        """``n`` sessions, each one fixture episode, closed; their ids."""
        ids = []
        for _ in range(n):
            episode = self.episodes[self.count % len(self.episodes)]
            sid = f"{episode.episode_id}#{self.count}"
            self.count += 1
            session = self.guard.session(sid)
            feed(session, episode)
            session.close()
            ids.append(sid)
        return ids

    def start(self, sid: str) -> None:
        """A session that decides one call (``c0``) and stays open."""
        self.open[sid] = self.guard.session(sid)
        self.open[sid].decide("read_inbox", {}, "c0")

    def close(self, sid: str) -> None:
        """Close an open session."""
        self.open.pop(sid).close()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _same_as_full(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run with the state file, then over the whole log (--no-state): same exit code and output; the first run's."""
    code, out, err = _run(argv, capsys)
    full = _run([*argv, "--no-state"], capsys)
    assert (code, out) == full[:2]
    return code, out, err


def _labels(path: Path, rows: list[tuple[str, list[dict[str, object]]]]) -> Path:
    text = "".join(
        json.dumps({"episode": sid, "harms": harms, "mode": "override", "by": "t", "why": "t"}) + "\n"
        for sid, harms in rows
    )
    path.write_text(text)
    return path


@pytest.mark.parametrize("keyed", [False, True])
def test_incremental_runs_print_what_full_runs_print(
    policy: Policy, artifacts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], keyed: bool
) -> None:
    """Four runs on a growing log (unkeyed, and keyed with --key-file), in table and --json form, with labels, a
    session open across every run boundary until the last, and --open-bound 10 (entry counts matter): each prints
    byte for byte what a run over the whole log prints, and the state is brought up to date.

    Catches: open sessions frozen or dropped from the state (planted: `_table` keeps closed sessions only -> A's
    call c0 is gone and its harm label is refused), the entry count not carried over (planted: `total` not stored
    -> the open-bound verdict differs), new entries not added (planted: `tally.add` skipped)."""
    audit = tmp_path / "audit.jsonl"
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    dep = Deployment(policy, artifacts[0], audit, KEY if keyed else None)
    base = ["monitor", str(audit), "--artifact", str(artifacts[0]), "--open-bound", "10"]
    base += ["--key-file", str(key_file)] if keyed else []
    labels = tmp_path / "labels.jsonl"
    first = dep.closed(2)
    dep.start("A")
    first += dep.closed(1)
    _labels(labels, [(first[1], [])])
    code, out, _ = _same_as_full([*base, "--labels", str(labels), "--json"], capsys)
    assert code == 0 and json.loads(out)["first_open_session"] == "A"
    state = Path(f"{audit}{monitor_state.SUFFIX}")
    assert state.exists()
    dep.start("B")
    more = dep.closed(6)  # A and B stay open: A's last entry falls more than 10 entries back
    _labels(labels, [(first[1], []), (more[0], [{"category": "privacy_flow"}])])
    code, out, _ = _same_as_full([*base, "--labels", str(labels)], capsys)
    assert code == 5 and "still open past the bound" in out
    dep.close("A")
    dep.closed(2)
    harm: list[dict[str, object]] = [{"category": "privacy_flow", "call_id": "c0"}]
    _labels(labels, [("A", harm), (first[1], []), (more[0], [{"category": "privacy_flow"}])])
    code, out, _ = _same_as_full([*base, "--labels", str(labels), "--json"], capsys)
    assert "A" in json.loads(out)["risk"]["sessions"]
    dep.close("B")
    code, out, err = _same_as_full([*base, "--labels", str(labels), "--json"], capsys)
    assert json.loads(out)["first_open_session"] is None and err == ""
    written = json.loads(state.read_bytes().split(b"\n", 1)[1])
    assert written["log"]["offset"] == audit.stat().st_size and written["key_id"] == (
        AuditLog(tmp_path / "x", key=KEY).key.key_id if keyed else None  # type: ignore[union-attr]
    )


def test_a_run_reads_only_the_new_bytes(
    policy: Policy,
    artifacts: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a run, a second run reads the appended bytes and the two anchor lines (first and last verified entry),
    nothing else; a run with nothing new reads the anchors only.

    Catches: the state's offset ignored (planted: `scan` reads from byte 0 -> the whole log is read), and the
    anchors not re-read (then a rewrite before the offset would go unseen)."""
    audit = tmp_path / "audit.jsonl"
    dep = Deployment(policy, artifacts[0], audit)
    dep.closed(20)
    argv = ["monitor", str(audit), "--artifact", str(artifacts[0])]
    _run(argv, capsys)
    lines = audit.read_bytes().splitlines(keepends=True)
    before = audit.stat().st_size
    dep.closed(2)
    new = audit.stat().st_size - before
    reads: list[tuple[int, int | None, int]] = []
    reader = monitor_state.read_bytes

    def counting(path: str | Path, start: int, length: int | None = None) -> bytes:
        data = reader(path, start, length)
        reads.append((start, length, len(data)))
        return data

    monkeypatch.setattr(monitor_state, "read_bytes", counting)
    _same_as_full(argv, capsys)  # the --no-state run reads the whole log: count the first run only
    mine = reads[: len(reads) - 1]
    assert sorted(mine) == sorted(
        [
            (0, len(lines[0]), len(lines[0])),
            (before - len(lines[-1]), len(lines[-1]), len(lines[-1])),
            (before, None, new),
        ]
    )
    reads.clear()
    _run(argv, capsys)
    assert sum(n for *_, n in reads) == len(lines[0]) + len(audit.read_bytes().splitlines(keepends=True)[-1])


def test_a_broken_chain_right_after_the_verified_part_is_caught(
    policy: Policy, artifacts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first new entry must chain from the last verified one: an entry removed just after the state's offset
    fails with the line number of the whole log, as a full run reports it.

    Catches: the new entries verified among themselves only (planted: `scan` takes the first new entry's `prev`
    as given instead of the stored last hash -> the removal is not seen, exit 0)."""
    audit = tmp_path / "audit.jsonl"
    dep = Deployment(policy, artifacts[0], audit)
    dep.closed(3)
    argv = ["monitor", str(audit), "--artifact", str(artifacts[0])]
    assert _run(argv, capsys)[0] == 0
    verified = audit.read_bytes()
    dep.closed(2)
    added = audit.read_bytes()[len(verified) :].splitlines(keepends=True)
    audit.write_bytes(verified + b"".join(added[1:]))
    code, _, err = _run(argv, capsys)
    line = len(verified.splitlines()) + 1
    assert code == 2 and f"FAILED at line {line}: chain check" in err
    assert _run([*argv, "--no-state"], capsys)[2] == err


@pytest.mark.parametrize("where", ["first", "last"])
def test_an_entry_edited_before_the_offset_is_caught(
    policy: Policy, artifacts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """An edit of the first or of the last verified entry that keeps the log's length: the state is ignored (a
    warning says why) and the full re-verification fails at that line (exit 2), as without a state.

    Catches: the anchors not checked (planted: `_anchors_differ` returns None -> the stored tally is trusted and
    the run exits 0 on a log that does not verify)."""
    audit = tmp_path / "audit.jsonl"
    dep = Deployment(policy, artifacts[0], audit)
    dep.closed(4)
    argv = ["monitor", str(audit), "--artifact", str(artifacts[0])]
    assert _run(argv, capsys)[0] == 0
    lines = audit.read_bytes().splitlines(keepends=True)
    k = 0 if where == "first" else len(lines) - 1
    edited = lines[k].replace(b'"ts": 1', b'"ts": 2', 1)
    assert edited != lines[k] and len(edited) == len(lines[k])
    audit.write_bytes(b"".join([*lines[:k], edited, *lines[k + 1 :]]))
    code, _, err = _run(argv, capsys)
    assert code == 2 and f"FAILED at line {k + 1}: hash check" in err
    assert "warning: monitor state" in err and "ignored, verifying the whole log" in err


def test_a_truncated_or_rewritten_tail_is_reverified(
    policy: Policy, artifacts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entries cut at the end (an unkeyed log still verifies): the state is ignored with a warning and the output is
    that of a full run on the shorter log; cut and re-grown past the offset by the writer, likewise.

    Catches: a log shorter than the state's offset trusted (planted: the size check removed -> the stale tally's
    sessions are printed), and a rewritten last verified entry trusted (planted: the head digest not compared)."""
    audit = tmp_path / "audit.jsonl"
    dep = Deployment(policy, artifacts[0], audit)
    dep.closed(6)
    argv = ["monitor", str(audit), "--artifact", str(artifacts[0]), "--json"]
    assert json.loads(_run(argv, capsys)[1])["deployed"]["n"] == 6
    lines = audit.read_bytes().splitlines(keepends=True)
    cut = len(lines) - 1  # the last session_end
    audit.write_bytes(b"".join(lines[:cut]))
    code, out, err = _same_as_full(argv, capsys)
    assert json.loads(out)["deployed"]["n"] == 5 and "fewer than the" in err
    assert _run(argv, capsys)[2] == ""  # the new state matches the shorter log
    audit.write_bytes(b"".join(lines[: cut - 1]))  # the last verified entry removed ...
    dep.closed(2)  # ... and the writer goes on past the old offset
    assert audit.stat().st_size > sum(len(line) for line in lines[:cut])
    code, out, err = _same_as_full(argv, capsys)
    assert code == 0 and "changed (the log was rewritten before it)" in err


def test_a_state_of_another_artifact_or_key_is_ignored(
    policy: Policy, artifacts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state is bound to the artifact and to --key-file: for another artifact it is ignored (warning; the full
    run finds no session of it: exit 2), and a keyed log's state is not used without its key, with another key,
    or after an edit (its MAC).

    Catches: the artifact not compared (planted: the checksum check removed -> the other artifact's tally is
    reported, exit 0), the key id not compared (planted -> a keyed log is monitored without --key-file), and the
    MAC not checked (planted -> an edited statistic is printed)."""
    audit = tmp_path / "audit.jsonl"
    key_file, other = tmp_path / "k", tmp_path / "other"
    key_file.write_bytes(KEY)
    other.write_bytes(b"o" * 32)
    Deployment(policy, artifacts[0], audit, KEY).closed(4)
    argv = ["monitor", str(audit), "--key-file", str(key_file)]
    assert _run([*argv, "--artifact", str(artifacts[0])], capsys)[0] == 0
    state = Path(f"{audit}{monitor_state.SUFFIX}")
    saved = state.read_bytes()
    code, _, err = _run([*argv, "--artifact", str(artifacts[1])], capsys)
    assert code == 2 and "made for another artifact" in err and "no closed sessions decided under" in err
    for given, message in ((None, "verify it with --key-file"), (other, "another key")):
        state.write_bytes(saved)
        run = ["monitor", str(audit), "--artifact", str(artifacts[0])]
        code, _, err = _run([*run, *(["--key-file", str(given)] if given else [])], capsys)
        assert code == 2 and "made with key id" in err and message in err
    header, body = saved.split(b"\n", 1)
    edited = json.loads(body)
    edited["sessions"]["end"][0] = 99.0
    state.write_bytes(header + b"\n" + json.dumps(edited).encode())
    code, _, err = _same_as_full([*argv, "--artifact", str(artifacts[0])], capsys)
    assert code == 0 and "MAC does not verify" in err


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"{not json",
        lambda data: data[: len(data) // 2],
        lambda data: data.replace(b'"first":[', b'"first":["x",', 1),
        lambda data: data.replace(b'"calls":[', b'"calls":[999,', 1),
        lambda data: b"",
    ],
)
def test_a_corrupt_state_means_a_full_run_with_a_warning(
    policy: Policy, artifacts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any
) -> None:
    """A state file that is not JSON, cut short, or well-formed JSON with a value of the wrong type or count: a
    warning on stderr, the output of a full run, and a fresh state written; never a crash.

    Catches: an unreadable state raising (planted: the `except` in `resume` narrowed to JSONDecodeError -> a
    TypeError/ValueError traceback), and values used unchecked (planted: `_column` checks removed -> a crash)."""
    audit = tmp_path / "audit.jsonl"
    dep = Deployment(policy, artifacts[0], audit)
    dep.closed(4)
    argv = ["monitor", str(audit), "--artifact", str(artifacts[0]), "--json"]
    assert _run(argv, capsys)[0] == 0
    state = Path(f"{audit}{monitor_state.SUFFIX}")
    dep.closed(1)
    state.write_bytes(damage(state.read_bytes()))
    code, out, err = _same_as_full(argv, capsys)
    assert code == 0 and json.loads(out)["deployed"]["n"] == 5
    assert "warning: monitor state" in err and "not usable" in err
    assert _run(argv, capsys)[2] == ""  # rewritten: the next run uses it


def test_state_options(
    policy: Policy,
    artifacts: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--no-state neither reads nor writes a state; --state FILE puts it elsewhere; a --state that is one of the
    inputs is refused (exit 2, nothing written); an unwritable state is a warning, not a failure.

    Catches: --no-state writing the default state (planted: `state_path` ignores it), and --state allowed over
    the audit log (planted: the check_output call removed -> the log is overwritten by the state)."""
    audit = tmp_path / "audit.jsonl"
    Deployment(policy, artifacts[0], audit).closed(3)
    argv = ["monitor", str(audit), "--artifact", str(artifacts[0])]
    default = Path(f"{audit}{monitor_state.SUFFIX}")
    assert _run([*argv, "--no-state"], capsys)[0] == 0 and not default.exists()
    elsewhere = tmp_path / "sub" / "m.state"
    assert _run([*argv, "--state", str(elsewhere)], capsys)[0] == 0 and elsewhere.exists() and not default.exists()
    before = audit.read_bytes()
    code, _, err = _run([*argv, "--state", str(audit)], capsys)
    assert code == 2 and "is the input" in err and audit.read_bytes() == before

    def refuse(path: Path, data: bytes) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(monitor_state, "write_atomic", refuse)
    code, out, err = _run([*argv, "--state", str(tmp_path / "new.state")], capsys)
    assert code == 0 and "cannot be written" in err and out == _run([*argv, "--no-state"], capsys)[1]
