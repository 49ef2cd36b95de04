"""`carbguard monitor`'s state file (guard/cli/monitor_state.py): each run reads and verifies only the entries
appended since the last run and prints exactly what a run over the whole log (`--no-state`) prints; a state
that does not match the log, the artifact or the key, or that cannot be read, is ignored with a warning."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given as hypothesis_given
from hypothesis import settings
from hypothesis import strategies as st

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


# --------------------------------------------------------------------------- an attacker who can write the state


@dataclass(frozen=True)
class Alarming:
    """An unkeyed log whose score monitor alarms (25 refused calls, statistic +inf), its state, and the full run."""

    argv: list[str]
    state: Path
    saved: bytes
    full: tuple[int, str]


def _quiet(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` with its stdout and stderr (for property tests, where capsys cannot be used)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def alarming(policy: Policy, artifacts: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Alarming:
    audit = tmp_path_factory.mktemp("alarm") / "audit.jsonl"
    dep = Deployment(policy, artifacts[0], audit)
    dep.closed(3)
    for k in range(60):
        with dep.guard.session(f"refused-{k}") as session:
            session.decide("wipe_disk", {}, "c0")  # an unknown tool: refused before scoring, statistic +inf
    dep.closed(2)
    argv = ["monitor", str(audit), "--artifact", str(artifacts[0]), "--json"]
    code, out, _ = _quiet([*argv, "--no-state"])
    assert code == 3 and json.loads(out)["alarm"]
    assert _quiet(argv)[:2] == (code, out)
    state = Path(f"{audit}{monitor_state.SUFFIX}")
    return Alarming(argv, state, state.read_bytes(), (code, out))


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a leaf (or an empty container) of a JSON value."""
    if isinstance(value, dict) and value:
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list) and value:
        return [p for k, v in enumerate(value) for p in _leaves(v, (*path, k))]
    return [path]


def _changed(value: Any, how: int) -> Any:
    """Another value of a state field: the same type where there is one to pick (a number moved, a flag flipped,
    a string edited), else null."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float) and not (isinstance(value, float) and value != value):
        return [value + 1, value - 1, 0, 1e9, -1.0][how % 5]
    if isinstance(value, str):
        return [value + "x", value[:-1], "", "A"][how % 4]
    return [0, "x", [], None][how % 4]


def _edit_field(data: bytes, leaf: int, how: int) -> bytes:
    """``data`` with one field of its header or body changed (re-encoded as the state encodes it)."""
    head, _, body = data.partition(b"\n")
    parts = [json.loads(head), json.loads(body)]
    paths = [(0, *p) for p in _leaves(parts[0])] + [(1, *p) for p in _leaves(parts[1])]
    path = paths[leaf % len(paths)]
    node: Any = parts
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = _changed(node[path[-1]], how)
    body_text = json.dumps(parts[1], separators=(",", ":"), ensure_ascii=False).encode()
    return json.dumps(parts[0]).encode() + b"\n" + body_text


def _same_content(data: bytes, saved: bytes) -> bool:
    """Whether an edited state says what the saved one says (its body bytes, and its header as JSON)."""
    head, _, body = data.partition(b"\n")
    saved_head, _, saved_body = saved.partition(b"\n")
    try:
        return body == saved_body and json.loads(head) == json.loads(saved_head)
    except ValueError:
        return False


_byte_edit = st.tuples(st.sampled_from(["replace", "delete", "insert"]), st.integers(0), st.integers(0, 255))


@settings(max_examples=150)
@hypothesis_given(edit=st.one_of(st.tuples(st.just("field"), st.integers(0), st.integers(0, 19)), _byte_edit))
def test_any_edit_of_the_state_is_ignored_or_changes_nothing(alarming: Alarming, edit: tuple[str, int, int]) -> None:
    """Property: ANY edit of an unkeyed log's state file (any field of its header or body changed, any byte
    replaced, deleted or inserted) leaves the monitor's exit code and output those of ``--no-state``; an edit that
    changes what the state says is reported on stderr as ignored.

    Catches: the state's tally trusted as input (planted: the MAC left out for an unkeyed log, as before: `decode`
    skips the check when ``key.key_id is None`` -> an edited score, count or id is printed, or a crash)."""
    kind, where, value = edit
    data = alarming.saved
    if kind == "field":
        data = _edit_field(data, where, value)
    else:
        at, new = where % (len(data) + 1), bytes([value])
        data = {"replace": data[:at] + new + data[at + 1 :], "delete": data[:at] + data[at + 1 :]}.get(
            kind, data[:at] + new + data[at:]
        )
    alarming.state.write_bytes(data)
    code, out, err = _quiet(alarming.argv)
    assert (code, out) == alarming.full
    if not _same_content(data, alarming.saved):
        assert "warning: monitor state" in err and "ignored" in err


def test_an_edited_tally_does_not_silence_an_alarm(alarming: Alarming) -> None:
    """The attack on an unkeyed log: every session's statistic in the state set to 0 (and the MAC left as it was,
    or dropped): the run still alarms (exit 3) and says the state was ignored.

    Catches: an unkeyed log's state used without a MAC (planted: `decode` skips the MAC check when
    ``key.key_id is None`` -> exit 0, "no alarm")."""
    header, body = alarming.saved.split(b"\n", 1)
    state = json.loads(body)
    state["sessions"]["end"] = [0.0 for _ in state["sessions"]["end"]]
    edited = json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode()
    for head in (header, json.dumps({**json.loads(header), "mac": None}).encode()):
        alarming.state.write_bytes(head + b"\n" + edited)
        code, out, err = _quiet(alarming.argv)
        assert code == 3 and (code, out) == alarming.full and "MAC does not verify" in err


def _relink(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


def test_the_key_file_is_made_private_and_checked(
    policy: Policy, artifacts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unkeyed log's state has its own key, ``STATE.key``: 32 random bytes made with mode 0600.  A key file that
    others can read or write, a symlink, or one of the wrong length is not used: a warning, the whole log read
    (output as --no-state), and no state read or written.  A missing key with a state present: the state fails
    its MAC (ignored with a warning) and a new key is made.  No output option may name the key file.

    Catches: a key anyone can read or replace (planted: the mode check in `monitor_key._read` removed -> the
    0644 key is used and no warning), a key file followed through a symlink (planted: O_NOFOLLOW dropped), a
    key made with the umask's mode (planted: 0o644 in `_create`), and --plot over the key (planted: the key not
    among `_monitor`'s inputs -> the PNG replaces it)."""
    audit = tmp_path / "audit.jsonl"
    Deployment(policy, artifacts[0], audit).closed(3)
    argv = ["monitor", str(audit), "--artifact", str(artifacts[0]), "--json"]
    state = Path(f"{audit}{monitor_state.SUFFIX}")
    key = Path(f"{state}.key")
    full = _run([*argv, "--no-state"], capsys)[:2]
    assert _run(argv, capsys)[:2] == full and state.exists()
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    saved, secret = state.read_bytes(), key.read_bytes()
    elsewhere = tmp_path / "elsewhere.key"
    elsewhere.write_bytes(secret)
    elsewhere.chmod(0o600)
    bad: list[tuple[str, Any]] = [
        ("mode 0600", lambda: key.chmod(0o644)),
        ("mode 0600", lambda: key.chmod(0o620)),
        ("cannot be opened", lambda: _relink(key, elsewhere)),
        ("32 bytes", lambda: key.write_bytes(secret + b"\n")),
    ]
    for message, damage in bad:
        state.write_bytes(saved)
        damage()
        code, out, err = _run(argv, capsys)
        assert (code, out) == full and message in err and "no state written" in err
        assert state.read_bytes() == saved
        key.unlink()
        key.write_bytes(secret)
        key.chmod(0o600)
    key.unlink()
    code, out, err = _run(argv, capsys)
    assert (code, out) == full and "MAC does not verify under its key file" in err
    assert key.read_bytes() != secret and _run(argv, capsys)[2] == ""
    secret = key.read_bytes()
    code, _, err = _run([*argv, "--plot", str(key)], capsys)
    assert code == 2 and "is the input" in err and key.read_bytes() == secret


def test_conversations_run_twice_under_one_id_reach_the_monitor_as_two_units(
    policy: Policy, artifacts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Forty conversations, each run twice under one id (the exfiltration episode, then a benign one): by one guard
    (its next segment) and by two guards writing one log (two processes: the monitor's next run,
    ``<id>#run-2``), with a second run left open across a monitor run: `carbguard monitor` sees 80 units at
    intervention rate 0.500 in both, with and without the state.

    Catches: the monitor keying units by the audit id (planted: `UnitIds.of` ignores ``ending`` -> 40 units
    at 0.000 for the two-guard log), and the unit map not carried in the state (planted: `_read_units` returns
    an empty map -> the open second run gets another unit id than a full run gives it)."""
    episodes = {e.episode_id: e for e in load_episodes(EPISODES, policy)}
    for processes in (1, 2):
        audit = tmp_path / f"audit-{processes}.jsonl"
        guards = [Deployment(policy, artifacts[0], audit).guard for _ in range(processes)]
        argv = ["monitor", str(audit), "--artifact", str(artifacts[0]), "--json"]
        for k in range(40):
            for run, name in enumerate(("exfiltration", "benign-inbox")):
                session = guards[run % processes].session(f"conv-{k}")
                feed(session, episodes[name])
                if k == 20 and run == 1:
                    _same_as_full(argv, capsys)  # the second run of conv-20 is open across this monitor run
                session.close()
            if k % 10 == 9:
                _same_as_full(argv, capsys)
        out = json.loads(_same_as_full(argv, capsys)[1])
        assert out["deployed"]["n"] == 80 and out["deployed"]["intervention_rate"] == 0.5
