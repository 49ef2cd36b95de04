"""The same prefixes through invariant-ai's local analyzer: ``python -m benchmarks.peer [--json] [--quick]``.

For every measured decision, the peer gets the whole prefix as an OpenAI-style message list plus
the proposed call (``LOCAL_POLICY=1``, ``Policy.from_string(RULES).analyze(trace)``), with a rule
set equivalent to the benchmark policy's private-source → sink check: one flow rule per
private-source tool, ``(out: ToolOutput) -> (call: ToolCall)``, ``out is tool:<source>``,
``call.function.name in [<sinks>]``, both lists read from the same policy file as ours.  Their
``->`` is temporal order (the output came before the call), not value reuse: the rule fires on any
private read before a sink, as our ``private_in_context`` does over a full prefix.

The analyzer enumerates (output, call) pairs and stops with "Maximum checking cycles exceeded"
once a trace has more pairs than its cap (``INVARIANT_MAX_ITERATIONS``, default 100).  Two runs:
with the cap as shipped (what the peer's users get) — where a decision fails, the T is reported as
failed, its ratio is ``null``, and the largest prefix (in records) that completes is found by walking
one episode's decisions in order — and with the cap raised to :data:`RAISED_CAP`, so every T
completes and gets a ratio; the raised run samples fewer decisions at large T (one analysis of a
1,000-record trace takes minutes) and stops a T after :data:`RAISED_BUDGET_S` seconds once it has
one sample.
Our side (G-CARB on the incremental graph, observe + decide as in :mod:`benchmarks.latency`) is
measured in the same run on the same decisions, paired: each episode goes through our session,
then its window's decisions through the peer, so drifting machine load hits both alike.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import latency
from guard.policy import Policy, ToolKind
from guard.records import Episode, Record, RecordKind
from guard.runtime import Guard

PEER_T: tuple[int, ...] = (10, 100, 1000)
RAISED_CAP = 10**9
RAISED_WANT = {10: 200, 100: 20, 1000: 2}
RAISED_WANT_QUICK = {10: 40, 100: 3}
RAISED_BUDGET_S = 600.0
CYCLES = "Maximum checking cycles exceeded"
INSTALL_HINT = "the peer benchmark needs invariant-ai: pip install invariant-ai"


def rules_for(policy: Policy) -> str:
    """Invariant rules equivalent to ``policy``'s private-source → sink check."""
    sources = sorted(n for n, s in policy.tools.items() if s.source_kind is ToolKind.PRIVATE_SOURCE)
    sinks = json.dumps(sorted(n for n, s in policy.tools.items() if s.kind is ToolKind.SINK))
    return "\n".join(
        f'raise "private data from {src} may reach a sink" if:\n'
        f"    (out: ToolOutput) -> (call: ToolCall)\n"
        f"    out is tool:{src}\n"
        f"    call.function.name in {sinks}\n"
        for src in sources
    )


def to_messages(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Our records as the OpenAI-style message list the analyzer reads."""
    out: list[dict[str, Any]] = []
    for r in records:
        if r.kind is RecordKind.USER:
            out.append({"role": "user", "content": r.text})
        elif r.kind is RecordKind.PROPOSAL:
            function = {"name": r.tool, "arguments": json.loads(r.args_json())}
            call = {"id": r.call_id, "type": "function", "function": function}
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif r.kind is RecordKind.RESULT:
            out.append({"role": "tool", "tool_call_id": r.call_id, "content": r.text})
        else:
            out.append({"role": "assistant", "content": r.text})
    return out


class PeerUnavailableError(RuntimeError):
    """invariant-ai is not installed, or was imported without ``LOCAL_POLICY=1``."""


def load_peer(policy: Policy) -> Any:
    """``Policy.from_string(rules)`` of invariant's local analyzer (import deferred, hint if missing)."""
    os.environ["LOCAL_POLICY"] = "1"  # must be set before invariant.analyzer is imported
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # its failed sub-tasks log on garbage collection
    try:
        from invariant.analyzer import Policy as PeerPolicy
        from invariant.analyzer.policy import LocalPolicy
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise PeerUnavailableError(f"{INSTALL_HINT} ({exc})") from None
    if PeerPolicy is not LocalPolicy:
        raise PeerUnavailableError("invariant.analyzer was imported before LOCAL_POLICY=1 was set; use a fresh process")
    return PeerPolicy.from_string(rules_for(policy))


def analyze_once(peer: Any, messages: list[dict[str, Any]]) -> tuple[float, str | None]:
    """Microseconds for one ``analyze`` and the error (None when it completed)."""
    start = time.perf_counter_ns()
    try:
        peer.analyze(messages)
    except RuntimeError as exc:
        if CYCLES not in str(exc):
            raise
        return (time.perf_counter_ns() - start) / 1000.0, str(exc).split(" (")[0]
    return (time.perf_counter_ns() - start) / 1000.0, None


def _decision_points(episode: Episode, start: int) -> list[int]:
    return [i for i, r in enumerate(episode.records) if r.kind is RecordKind.PROPOSAL and i >= start]


def largest_completed(peer: Any, episode: Episode) -> tuple[int, int | None]:
    """Walk the decisions of ``episode`` in order: (largest trace length in records that completed, first failing)."""
    messages = to_messages(episode.records)
    best = 0
    for i in _decision_points(episode, 0):
        _, error = analyze_once(peer, messages[: i + 1])
        if error is not None:
            return best, i + 1
        best = i + 1
    return best, None


def measure(
    peer: Any, guard: Guard, episodes: Sequence[Episode], t: int, want: int, budget_s: float = float("inf")
) -> dict[str, Any]:
    """Paired per-decision latency at T: each episode goes through our session, then each of its
    decisions in the window through the peer, so both see the same prefixes under the same load.
    Stops at the first decision the peer cannot complete, or after ``budget_s`` seconds."""
    start = latency.window(t)
    began = time.perf_counter()
    theirs: list[float] = []
    ours: list[float] = []
    ours_incl: list[float] = []
    for episode in episodes:
        messages = to_messages(episode.records)
        timing = latency.time_session(guard, episode)
        mine, mine_incl = dict(timing.decide_only), dict(timing.samples)
        for i in _decision_points(episode, start):
            took, error = analyze_once(peer, messages[: i + 1])
            if error is not None:
                return {
                    "T": t,
                    "completed": False,
                    "error": error,
                    "n": len(theirs),
                    "failed_after_us": round(took, 1),
                    "ours_p50_us": round(statistics.median([mine[i], *ours]), 1),
                    "ours_incl_p50_us": round(statistics.median([mine_incl[i], *ours_incl]), 1),
                }
            theirs.append(took)
            ours.append(mine[i])
            ours_incl.append(mine_incl[i])
            if len(theirs) >= want or time.perf_counter() - began > budget_s:
                break
        if len(theirs) >= want or time.perf_counter() - began > budget_s:
            break
    return {
        "T": t,
        "completed": True,
        "p50_us": round(statistics.median(theirs), 1),
        "p99_us": round(latency.percentile(theirs, 0.99), 1),
        "n": len(theirs),
        "ours_p50_us": round(statistics.median(ours), 1),
        "ours_p99_us": round(latency.percentile(ours, 0.99), 1),
        "ours_incl_p50_us": round(statistics.median(ours_incl), 1),
    }


def warm_up(peer: Any, policy: Policy) -> None:
    """A few analyses of a short trace (first calls pay for imports and caches)."""
    messages = to_messages(latency.make_episode(8, 999, policy).records)
    for _ in range(5):
        analyze_once(peer, messages)


def run(quick: bool = False, progress: bool = True) -> dict[str, Any]:
    """Peer and G-CARB latency at each T, paired on the same decisions, and the ratios."""
    policy = latency.bench_policy()
    peer = load_peer(policy)
    guard = Guard(policy, threshold=latency.THRESHOLD)
    plan = latency.QUICK if quick else latency.FULL
    want = 40 if quick else 200
    warm_up(peer, policy)
    rows: list[dict[str, Any]] = []
    for t in PEER_T:
        if quick and rows and not rows[-1]["completed"]:
            rows.append(
                {"T": t, "completed": False, "error": f"not run (--quick): capped at T={rows[-1]['T']} already"}
            )
            continue
        episodes = [latency.make_episode(t, seed, policy) for seed in range(plan.episodes[t])]
        began = time.perf_counter()
        rows.append(measure(peer, guard, episodes, t, want))
        shown = rows[-1].get("p50_us", rows[-1].get("error"))
        latency.say(progress, f"T={t:>5} invariant          {shown}  ({time.perf_counter() - began:.1f} s)")
    probe = latency.make_episode(200, 0, policy)
    best, first_fail = largest_completed(peer, probe)
    raised = run_raised(peer, guard, policy, plan, quick, progress)
    return {
        "peer": rows,
        "peer_ratio": _ratios(rows, "ours_p50_us"),
        "peer_ratio_inclusive": _ratios(rows, "ours_incl_p50_us"),
        "peer_raised": raised,
        "peer_ratio_raised": _ratios(raised, "ours_p50_us"),
        "peer_ratio_raised_inclusive": _ratios(raised, "ours_incl_p50_us"),
        "raised_cycle_cap": RAISED_CAP,
        "largest_T_completed": best,
        "first_T_capped": first_fail,
        "rules": rules_for(policy),
        "invariant_version": _version(),
        "cycle_cap": int(os.environ.get("INVARIANT_MAX_ITERATIONS", 100)),
    }


def _ratios(rows: Sequence[dict[str, Any]], ours: str) -> dict[str, float | None]:
    """ours/theirs per T, three significant digits (the raised-cap ratios are far below 1e-4)."""
    return {str(r["T"]): float(f"{r[ours] / r['p50_us']:.3g}") if r["completed"] else None for r in rows}


def run_raised(peer: Any, guard: Guard, policy: Policy, plan: Any, quick: bool, progress: bool) -> list[dict[str, Any]]:
    """The same paired measurement with the peer's cycle cap raised to :data:`RAISED_CAP`."""
    wants = RAISED_WANT_QUICK if quick else RAISED_WANT
    saved = os.environ.get("INVARIANT_MAX_ITERATIONS")
    os.environ["INVARIANT_MAX_ITERATIONS"] = str(RAISED_CAP)  # read per analysis by the peer's evaluation context
    rows: list[dict[str, Any]] = []
    try:
        for t, want in wants.items():
            episodes = [latency.make_episode(t, seed, policy) for seed in range(plan.episodes[t])]
            began = time.perf_counter()
            rows.append(measure(peer, guard, episodes, t, want, RAISED_BUDGET_S))
            shown = rows[-1].get("p50_us", rows[-1].get("error"))
            latency.say(progress, f"T={t:>5} invariant (raised cap) {shown}  ({time.perf_counter() - began:.1f} s)")
    finally:
        if saved is None:
            os.environ.pop("INVARIANT_MAX_ITERATIONS", None)
        else:
            os.environ["INVARIANT_MAX_ITERATIONS"] = saved
    return rows


def latency_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The peer's rows in the latency contract (completed T only)."""
    return [
        {"method": "invariant", "T": r["T"], "p50_us": r["p50_us"], "p99_us": r["p99_us"], "n": r["n"]}
        for r in result["peer"]
        if r["completed"]
    ]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("invariant-ai")
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


def format_peer(result: dict[str, Any]) -> str:
    """The peer tables (cap as shipped, cap raised): their latency, ours on the same decisions, the ratios."""
    lines = [
        f"Against invariant-ai {result['invariant_version']} "
        f"(local analyzer, cycle cap {result['cycle_cap']}, as shipped), paired on the same decisions",
        *_peer_table(result["peer"], result["peer_ratio"], result["peer_ratio_inclusive"]),
    ]
    if result.get("peer_raised"):
        lines += [
            f"With the cycle cap raised (INVARIANT_MAX_ITERATIONS={result['raised_cycle_cap']}), paired the same way",
            *_peer_table(result["peer_raised"], result["peer_ratio_raised"], result["peer_ratio_raised_inclusive"]),
        ]
    lines.append(
        f"largest trace the peer completes with the shipped cap: {result['largest_T_completed']} records "
        f"(first capped at {result['first_T_capped']} records)"
    )
    return "\n".join(lines)


def _peer_table(
    rows: Sequence[dict[str, Any]], ratio: dict[str, float | None], ratio_incl: dict[str, float | None]
) -> list[str]:
    lines = [
        f"{'T':>6} {'invariant p50':>14} {'p99':>10} {'n':>4} {'G-CARB p50':>11} {'ratio':>8} "
        f"{'G-CARB incl.':>13} {'ratio':>8}"
    ]
    for r in rows:
        ours = [r.get(k) or float("nan") for k in ("ours_p50_us", "ours_incl_p50_us")]
        if r["completed"]:
            a, b = ratio[str(r["T"])], ratio_incl[str(r["T"])]
            lines.append(
                f"{r['T']:>6} {r['p50_us']:>14.1f} {r['p99_us']:>10.1f} {r['n']:>4} "
                f"{ours[0]:>11.1f} {a:>8.3g} {ours[1]:>13.1f} {b:>8.3g}"
            )
        else:
            lines.append(
                f"{r['T']:>6} {'failed':>14} {'':>10} {r.get('n', 0):>4} {ours[0]:>11.1f} {'null':>8} "
                f"{ours[1]:>13.1f} {'null':>8}   {r['error']}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.peer [--json] [--quick]``: the same as ``carbguard bench peer``."""
    from guard.cli import bench_main

    return bench_main("peer", argv)


if __name__ == "__main__":
    raise SystemExit(main())
