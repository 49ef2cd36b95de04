"""``carbguard monitor`` with its state file against a full re-read of a growing audit log.

Run: ``python -m benchmarks.monitor_incremental [--json] [--quick]`` (``carbguard bench monitor``).

Builds a valid, hash-chained audit log of 100,000 entries (``--quick``: 10,000) in a temporary folder:
the real guard decides the fixture episodes (``tests/fixtures/episodes``) under an artifact calibrated
on them, and those entries are the templates; the log interleaves 16 concurrent sessions cycling through
them (fresh session ids and timestamps), each entry chained with :func:`guard.audit.entry_hash` and
written as :class:`guard.audit.AuditLog` writes it, so some sessions are still open at the end.  Then:

1. one ``carbguard monitor --json`` over the whole log writes the state file (``first_run_s``);
2. 100 entries are appended through :class:`guard.audit.AuditLog` itself (the open sessions go on and
   close, new ones start);
3. side by side, ``repeats`` times each (median wall-clock and CPU seconds reported): the *incremental*
   run (the state of step 1 put back before each repeat, so every repeat reads the 100 new entries) and
   the *full* run
   (``--no-state``).  Both print the same bytes (checked), and ``bytes_read`` counts what the
   incremental run read of the log.

Both runs go through :func:`guard.cli.main` in this process (stdout captured); the interpreter's
start-up and imports (what a cron job also pays) are not in the times.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "episodes"
POLICY, EPISODES = FIX / "assistant_policy.yaml", FIX / "assistant.jsonl"
WORKERS, APPENDED = 16, 100


def _quiet(argv: list[str]) -> tuple[int, str]:
    from guard.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    if code not in (0, 3, 5):
        raise RuntimeError(f"carbguard {' '.join(argv)} exited {code}: {err.getvalue().strip()}")
    return code, out.getvalue()


def _templates(artifact: Path) -> list[list[dict[str, Any]]]:
    """Per fixture episode, the entries the real guard writes for it (decisions, then session_end), unchained."""
    from guard.artifact import load_artifact
    from guard.audit import MemoryAudit
    from guard.calibration.replay import feed
    from guard.corpora.episodes import load_episodes
    from guard.policy import load_policy
    from guard.runtime import Guard

    policy = load_policy(POLICY)
    art = load_artifact(artifact, policy)
    sink = MemoryAudit()
    guard = Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id, audit=sink)
    out = []
    for episode in load_episodes(EPISODES, policy):
        before = len(sink.entries)
        session = guard.session(episode.episode_id)
        feed(session, episode)
        session.close()
        out.append([{k: v for k, v in e.items() if k not in ("prev", "hash")} for e in sink.entries[before:]])
    return out


def _sessions(templates: list[list[dict[str, Any]]], seed: int) -> Any:
    """An endless stream of entries: ``WORKERS`` sessions at a time, each a template with a fresh id."""
    rng = random.Random(seed)
    started = 0
    slots: list[list[dict[str, Any]]] = []
    while True:
        while len(slots) < WORKERS:
            slots.append([{**e, "session": f"s{started}"} for e in templates[started % len(templates)]])
            started += 1
        slot = rng.randrange(len(slots))
        yield slots[slot].pop(0)
        if not slots[slot]:
            slots.pop(slot)


def _write_log(path: Path, stream: Any, entries: int, t0: float) -> None:
    """``entries`` chained entries as AuditLog writes them (unkeyed; canonical hash, sorted-keys JSON lines)."""
    from guard.audit import GENESIS, entry_hash

    prev = GENESIS
    with open(path, "w", encoding="utf-8") as handle:
        for k in range(entries):
            event = {**next(stream), "ts": t0 + k * 1e-3, "prev": prev}
            event["hash"] = prev = entry_hash(event)
            handle.write(json.dumps(event, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n")


def _restore(state: Path, saved: bytes, counted: list[int]) -> None:
    """Put the state of the first run back (so the next run reads the appended entries) and reset the count."""
    state.write_bytes(saved)
    counted.clear()


def _time(argv: list[str], repeats: int, before: Any = None) -> tuple[list[float], str, list[float]]:
    """Wall-clock seconds per repeat, the last output, and this process's CPU seconds per repeat."""
    times, text, cpu = [], "", []
    for _ in range(repeats):
        if before is not None:
            before()
        start, used = time.perf_counter(), time.process_time()
        _, text = _quiet(argv)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - used)
    return times, text, cpu


def run(quick: bool = False, progress: bool = False) -> dict[str, Any]:
    """Build the log, run the monitor once, append, and time incremental against full runs."""
    from guard.audit import AuditLog
    from guard.cli import monitor_state

    entries, repeats = (10_000, 3) if quick else (100_000, 5)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        artifact, log = folder / "a.json", folder / "audit.jsonl"
        base = ["calibrate", "--policy", str(POLICY), "--episodes", str(EPISODES), "--alpha", "0.3"]
        _quiet([*base, "--out", str(artifact)])
        stream = _sessions(_templates(artifact), seed=0)
        began = time.perf_counter()
        _write_log(log, stream, entries, t0=time.time() - 60.0)
        built = time.perf_counter() - began
        argv = ["monitor", str(log), "--artifact", str(artifact), "--json"]
        state = Path(f"{log}{monitor_state.SUFFIX}")
        first, _, _ = _time(argv, 1)
        saved = state.read_bytes()
        writer = AuditLog(log, fsync=False)
        for _ in range(APPENDED):
            writer.write(next(stream))
        counted: list[int] = []
        reader = monitor_state.read_bytes

        def counting(path: str | Path, start: int, length: int | None = None) -> bytes:
            data = reader(path, start, length)
            counted.append(len(data))
            return data

        monitor_state.read_bytes = counting
        try:
            incremental, text, incremental_cpu = _time(argv, repeats, before=lambda: _restore(state, saved, counted))
        finally:
            monitor_state.read_bytes = reader
        full, full_text, full_cpu = _time([*argv, "--no-state"], repeats)
        if text != full_text:
            raise RuntimeError("the incremental run's output differs from the full run's")
        report = json.loads(text)
        return {
            "entries": entries + APPENDED,
            "appended": APPENDED,
            "log_bytes": log.stat().st_size,
            "state_bytes": len(saved),
            "sessions": report["deployed"]["n"],
            "build_s": round(built, 3),
            "repeats": repeats,
            "first_run_s": round(first[0], 4),
            "incremental_s": round(statistics.median(incremental), 4),
            "full_s": round(statistics.median(full), 4),
            "speedup": round(statistics.median(full) / statistics.median(incremental), 1),
            "incremental_cpu_s": round(statistics.median(incremental_cpu), 4),
            "full_cpu_s": round(statistics.median(full_cpu), 4),
            "bytes_read": sum(counted),
            "identical_output": True,
        }


def format_monitor(out: dict[str, Any]) -> str:
    """The side-by-side table."""
    return "\n".join(
        [
            f"carbguard monitor on an audit log of {out['entries']} entries ({out['log_bytes'] / 1e6:.1f} MB, "
            f"{out['sessions']} closed sessions), {out['appended']} of them appended after the state was written",
            f"{'run':<34}{'median s':>10}{'CPU s':>10}",
            f"{'incremental (state file)':<34}{out['incremental_s']:>10.4f}{out['incremental_cpu_s']:>10.4f}",
            f"{'full (--no-state)':<34}{out['full_s']:>10.4f}{out['full_cpu_s']:>10.4f}",
            f"full / incremental: {out['speedup']}x over {out['repeats']} repeats each; identical output: "
            f"{out['identical_output']}",
            f"the incremental run read {out['bytes_read']} bytes of the log; state file {out['state_bytes']} bytes; "
            f"first run (writes the state) {out['first_run_s']:.3f} s; log built in {out['build_s']:.1f} s",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.monitor_incremental [--json] [--quick]``: the same as ``carbguard bench monitor``."""
    from guard.cli import bench_main

    return bench_main("monitor", argv)


if __name__ == "__main__":
    raise SystemExit(main())
