"""All performance benchmarks: ``python -m benchmarks.perf [--json] [--quick]`` (``carbguard bench perf``).

Runs :mod:`benchmarks.latency`, :mod:`benchmarks.peer` (G-CARB and the peer paired on the same
decisions) and :mod:`benchmarks.calibration`, then prints the tables, or with ``--json`` one JSON
object::

    {"latency": [{"method": "gcarb_incremental"|"full_prefix"|"rebuild"|"invariant", "T": int,
                  "p50_us": float, "p99_us": float}, ...],
     "growth": {"gcarb_incremental": float, "full_prefix": float, "rebuild": float},
     "flatness": {"p50_ratio": float, "p99_over_p50": float, "first_pass_p99_over_p50": float},
     "peer_ratio": {"10": float|null, "100": float|null, "1000": float|null},
     "peer_ratio_raised_cap": {"10": float|null, "100": float|null, "1000": float|null},
     "records_per_episode": [{"T": int, "gcarb": int, "full_prefix": int}, ...],
     "crc_seconds_1e6x200": float, "episodes_per_second": float,
     "machine": {"cores": int, ...}, "details": {...}}

``growth`` = p50 at T=1000 / p50 at T=10; ``flatness`` = G-CARB p50 at T=5000 / p50 at T=10 and
p99 / p50 at T=5000; ``peer_ratio`` = our G-CARB p50 / invariant's p50 at that
T, both over the same decisions measured back to back (``null`` where the peer stops at its shipped
cycle cap); ``peer_ratio_raised_cap`` the same with the peer's cap raised (fewer decisions at large T).  ``details``
holds what the tables show beyond the contract (sample counts, decide-only latency, the peer's
largest completed trace, memory, the speed-up with two local workers).  A full run takes a few
minutes; ``--quick`` uses small repeat counts.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Any

from benchmarks import calibration, latency, peer

CONTRACT_ROW = ("method", "T", "p50_us", "p99_us")


def machine() -> dict[str, Any]:
    """Cores, CPU model, Python, and the load average (the box may be shared)."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    except OSError:
        model = platform.processor()
    return {
        "cores": os.cpu_count() or 1,
        "cpu": model or platform.machine(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "loadavg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def run(quick: bool = False, progress: bool = False) -> dict[str, Any]:
    """Every benchmark; the JSON object of the issue's contract plus ``machine`` and ``details``."""
    began = time.perf_counter()
    host = machine()
    lat = latency.run(quick, progress=progress)
    try:
        peer_result: dict[str, Any] | None = peer.run(quick, progress=progress)
        peer_note = None
    except peer.PeerUnavailableError as exc:
        peer_result, peer_note = None, str(exc)
    cal = calibration.run(quick, progress=progress)
    rows = [{k: r[k] for k in CONTRACT_ROW} for r in lat["latency"]]
    if peer_result is not None:
        rows += [{k: r[k] for k in CONTRACT_ROW} for r in peer.latency_rows(peer_result)]
    host["loadavg_1m_end"] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    host["seconds"] = round(time.perf_counter() - began, 1)
    return {
        "latency": rows,
        "growth": lat["growth"],
        "flatness": flatness(lat["latency"]),
        "peer_ratio": peer_result["peer_ratio"] if peer_result else {str(t): None for t in peer.PEER_T},
        "peer_ratio_raised_cap": (
            peer_result["peer_ratio_raised"] if peer_result else {str(t): None for t in peer.PEER_T}
        ),
        "records_per_episode": lat["records_per_episode"],
        "crc_seconds_1e6x200": cal["crc"]["seconds"],
        "episodes_per_second": cal["scoring"]["episodes_per_second"],
        "machine": host,
        "details": {
            "quick": quick,
            "latency": lat["latency"],
            "growth_inclusive": lat["growth_inclusive"],
            "samples": lat["samples"],
            "window": lat["window"],
            "policy": lat["policy"],
            "peer": _peer_details(peer_result, peer_note),
            "calibration": cal,
        },
    }


def flatness(rows: list[dict[str, Any]], method: str = "gcarb_incremental") -> dict[str, float | None]:
    """p50 at T=5000 over p50 at T=10, and p99 over p50 at T=5000 (``Session.decide``; per-decision
    medians where T=5000 is timed in several passes, and then also the first pass alone)."""
    by_t = {r["T"]: r for r in rows if r["method"] == method}
    low, high = by_t.get(10), by_t.get(5000)
    if low is None or high is None:
        return {"p50_ratio": None, "p99_over_p50": None}
    out = {
        "p50_ratio": round(high["p50_us"] / low["p50_us"], 2),
        "p99_over_p50": round(high["p99_us"] / high["p50_us"], 2),
    }
    if "first_pass_p99_us" in high:
        out["first_pass_p99_over_p50"] = round(high["first_pass_p99_us"] / high["first_pass_p50_us"], 2)
    return out


def _peer_details(result: dict[str, Any] | None, note: str | None) -> dict[str, Any]:
    if result is None:
        return {"available": False, "note": note}
    keep = (
        "peer",
        "peer_ratio_inclusive",
        "largest_T_completed",
        "first_T_capped",
        "invariant_version",
        "cycle_cap",
        "rules",
        "peer_raised",
        "peer_ratio_raised",
        "peer_ratio_raised_inclusive",
        "raised_cycle_cap",
    )
    return {"available": True, **{k: result[k] for k in keep}}


def format_perf(result: dict[str, Any]) -> str:
    """All tables as text, with the machine and the targets."""
    d, m = result["details"], result["machine"]
    lat = {
        "latency": d["latency"],
        "growth": result["growth"],
        "growth_inclusive": d["growth_inclusive"],
        "samples": d["samples"],
        "records_per_episode": result["records_per_episode"],
        "window": d["window"],
        "policy": d["policy"],
    }
    parts = [
        f"Machine: {m['cores']} cores ({m['cpu']}), Python {m['python']}, {m['platform']}; "
        f"load average {m['loadavg_1m']} → {m['loadavg_1m_end']}; run took {m['seconds']} s"
        + (" (--quick)" if d["quick"] else ""),
        "",
        latency.format_latency(lat),
        "",
    ]
    for label, growth in (("Session.decide", result["growth"]), ("incl. observe", d["growth_inclusive"])):
        g = growth.get("gcarb_incremental")
        verdict = "met" if g is not None and g <= 3 else "NOT met"
        parts.append(f"Target G-CARB growth ≤ 3× ({label}): {g}× — {verdict}")
    flat = result["flatness"]
    for key, label, bound in (("p50_ratio", "p50(T=5000)/p50(T=10)", 3), ("p99_over_p50", "p99/p50 at T=5000", 4)):
        value = flat.get(key)
        verdict = "met" if value is not None and value <= bound else "NOT met"
        parts.append(f"Target G-CARB {label} ≤ {bound}×: {value}× — {verdict}")
    if "first_pass_p99_over_p50" in flat:
        parts.append(
            f"  (p99/p50 at T=5000 is over per-decision medians of {d['samples']['5000'].get('passes', 1)} passes;"
            f" the first pass alone: {flat['first_pass_p99_over_p50']}×)"
        )
    peer_d = d["peer"]
    if peer_d["available"]:
        parts += ["", peer.format_peer({**peer_d, "peer_ratio": result["peer_ratio"]})]
        ratios: list[tuple[str, dict[str, Any]]] = [
            ("Session.decide", result["peer_ratio"]),
            ("incl. observe", peer_d["peer_ratio_inclusive"]),
            ("Session.decide, cap raised", peer_d.get("peer_ratio_raised") or {}),
        ]
        for t in ("10", "100", "1000"):
            for label, by_t in ratios:
                ratio = by_t.get(t)
                verdict = "met" if ratio is not None and ratio <= 0.1 else "NOT met"
                if ratio is None:
                    verdict = "not measurable: the peer stops at this T"
                parts.append(f"Target ours/invariant ≤ 0.1 at T={t} ({label}): {ratio} — {verdict}")
    else:
        parts += ["", f"Peer not measured: {peer_d['note']}"]
    parts += ["", calibration.format_calibration(d["calibration"])]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.perf [--json] [--quick]``: the same as ``carbguard bench perf``."""
    from guard.cli import bench_main

    return bench_main("perf", argv)


if __name__ == "__main__":
    raise SystemExit(main())
