"""Per-call overhead of the MCP guard proxy against a direct MCP call.

Run: ``python -m benchmarks.mcp_overhead [--json] [--quick]``.

Real ``mcp`` stdio clients are open at once on the same machine: one talks to the fixture server
(``tests/fixtures/mcp_server.py``) directly, the other to ``carbguard mcp-proxy`` in front of its
own copy of that server (policy ``tests/fixtures/mcp_policy.yaml``, threshold 0.5, audit to a
temporary JSON-lines file).  Calls rotate between the clients (each goes first in turn), so both
see the same machine load; each is timed from ``call_tool`` to its result (wall clock).  The calls
are ``read_record`` (decided ``execute``, forwarded, result observed), so the proxied path pays
decide + authorize + audit + observe + one more stdio hop; the session grows by two records per
call, so the last calls are decided on the longest prefix.  A third client talks to a proxy
without an audit file, which separates the proxy's own cost from the audit log's fsync per decision.
Reported: median and p90 latency of each path, the median per-call ratio proxy/direct (calls paired
by round), and the median added milliseconds (overall, first and last tenth of the calls).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "fixtures" / "mcp_server.py"
POLICY = ROOT / "tests" / "fixtures" / "mcp_policy.yaml"


def _q(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _params(args: list[str]) -> Any:
    from mcp.client.stdio import StdioServerParameters

    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")}
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))


def _proxy_args(audit: Path | None) -> list[str]:
    head = ["-m", "guard", "mcp-proxy", "--policy", str(POLICY), "--threshold", "0.5"]
    return [*head, *(["--audit", str(audit)] if audit else []), "--", sys.executable, str(SERVER)]


async def _measure(calls: int, warmup: int, audit: Path) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    paths = {
        "direct": _params([str(SERVER)]),
        "proxy": _params(_proxy_args(audit)),
        "proxy_no_audit": _params(_proxy_args(None)),
    }
    times: dict[str, list[float]] = {name: [] for name in paths}
    with open(os.devnull, "w") as quiet:
        async with AsyncExitStack() as stack:
            clients = {}
            for name, params in paths.items():
                read, write = await stack.enter_async_context(stdio_client(params, errlog=quiet))
                clients[name] = await stack.enter_async_context(ClientSession(read, write))
                await clients[name].initialize()

            async def timed(client: Any, i: int) -> float:
                start = time.perf_counter_ns()
                result = await client.call_tool("read_record", {"name": "bob" if i % 2 else "alice"})
                elapsed = (time.perf_counter_ns() - start) / 1e6
                if result.is_error:
                    raise RuntimeError(f"call {i} was refused: {result.content[0].text}")
                return elapsed

            names = list(paths)
            for i in range(warmup + calls):
                order = names[i % 3 :] + names[: i % 3]  # every path goes first, second and third in turn
                for name in order:
                    elapsed = await timed(clients[name], i)
                    if i >= warmup:
                        times[name].append(elapsed)
    return _summary(times, calls, warmup, audit)


def _summary(times: dict[str, list[float]], calls: int, warmup: int, audit: Path) -> dict[str, Any]:
    direct = times["direct"]
    out: dict[str, Any] = {"calls": calls, "warmup": warmup, "audit_entries": sum(1 for _ in audit.open())}
    tenth = max(1, calls // 10)
    for name, values in times.items():
        entry: dict[str, Any] = {"p50_ms": statistics.median(values), "p90_ms": _q(values, 0.9)}
        if name != "direct":
            added = [b - a for a, b in zip(direct, values, strict=True)]
            entry["median_ratio"] = statistics.median(b / a for a, b in zip(direct, values, strict=True))
            entry["median_added_ms"] = statistics.median(added)
            entry["median_added_ms_first_tenth"] = statistics.median(added[:tenth])
            entry["median_added_ms_last_tenth"] = statistics.median(added[-tenth:])
        out[name] = entry
    return out


def run(quick: bool = False, progress: bool = False) -> dict[str, Any]:
    """Measure both paths side by side in one run."""
    import anyio

    calls, warmup = (60, 5) if quick else (400, 20)
    with tempfile.TemporaryDirectory() as tmp:
        return anyio.run(_measure, calls, warmup, Path(tmp) / "audit.jsonl")


def render(out: dict[str, Any]) -> str:
    lines = [
        f"MCP proxy overhead: {out['calls']} read_record calls per path, interleaved, after {out['warmup']} warm-up",
        f"{'path':<16}{'p50 ms':>9}{'p90 ms':>9}{'ratio':>8}{'added ms':>10}{'first 10%':>11}{'last 10%':>10}",
    ]
    for name in ("direct", "proxy", "proxy_no_audit"):
        e = out[name]
        row = f"{name:<16}{e['p50_ms']:>9.3f}{e['p90_ms']:>9.3f}"
        if name != "direct":
            row += (
                f"{e['median_ratio']:>7.2f}x{e['median_added_ms']:>10.3f}"
                f"{e['median_added_ms_first_tenth']:>11.3f}{e['median_added_ms_last_tenth']:>10.3f}"
            )
        lines.append(row)
    lines.append(f"ratio = median per-call proxy/direct; audit entries written (fsync'ed): {out['audit_entries']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.mcp_overhead [--json] [--quick]``: the same as ``carbguard bench mcp``."""
    from guard.cli import bench_main

    return bench_main("mcp", argv)


if __name__ == "__main__":
    raise SystemExit(main())
