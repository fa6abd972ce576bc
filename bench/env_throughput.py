"""Tool calls per second and latency of our MCP env stack, against plain JSON-over-HTTP on the same stack.

    .venv/bin/python bench/env_throughput.py [--calls-per-session 200] [--concurrency 1 16 32 64]

Starts the hotel MCP server (``toolenvs.local.server``) and a minimal baseline server (uvicorn + starlette, one
JSON route, the same IPPROTO_TCP listening socket) as separate processes, then for each concurrency drives
that many episodes at once through ``EnvClient`` (each seeded on the server, ``search_hotels`` calls as
one MCP ``tools/call`` POST each, 8 episodes to an HTTP client) and the same number of plain keep-alive
``httpx2`` clients posting a JSON-RPC-sized body to the baseline. Opening episodes is not timed, only calls. Prints a table and the MCP calls/s as a ratio of the baseline's, and
ends with one line of JSON: ``{"bench": "env_throughput", ...}``. Client and servers share the machine's
cores, as they do in a CPU trial. Wall figures move with whatever else runs; the client and server CPU
milliseconds per call do much less, so the table gives both, plus the rate they imply on 2 idle cores.
Leaves out: verifier cost; opening a session is reported apart (``open_ms``), not in the call figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import record  # noqa: E402
from toolenvs.client import EnvClient  # noqa: E402
from toolenvs.local.launch import LocalEnvServer  # noqa: E402
from toolenvs.task import Task  # noqa: E402

TASK = Task(
    task_key="bench",
    prompt="Find hotels.",
    env_key="hotel",
    verifier={"type": "booking_made"},
    env_variables={"CURRENT_DATE": "2026-01-01", "LOGGED_IN_USER": "alice"},
)
CALL = ("search_hotels", {"city": "Paris"})
BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": CALL[0], "arguments": CALL[1]}}


def serve_baseline() -> None:
    """The baseline server: one JSON route on uvicorn + starlette, the listening socket made like ours."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from toolenvs.lifeline import exit_with_parent
    from toolenvs.local.server import _listen_socket

    async def rpc(request: Request) -> JSONResponse:
        body = await request.json()
        text = json.dumps(
            [{"hotel_id": "H02", "name": "Louvre Inn", "price": 140}, {"hotel_id": "H01", "name": "Seine Lodge", "price": 180}]
        )
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": {"content": [{"type": "text", "text": text}], "isError": False}})

    exit_with_parent(os.getppid())
    sock = _listen_socket()
    print(f"READY {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/rpc", rpc, methods=["POST"])]), log_level="warning", access_log=False)).run(
        sockets=[sock]
    )


def process_cpu_s(pid: int | None = None) -> float:
    """User + system CPU seconds of a process (this one when ``pid`` is None)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Client and server CPU milliseconds per call from now on.

    CPU per call is the figure that survives a busy machine: wall figures move with other processes'
    load, while what a call costs client and server in CPU bounds what 2 idle cores can do."""

    def __init__(self, server_pid: int):
        self.server_pid = server_pid
        self.client0, self.server0 = process_cpu_s(), process_cpu_s(server_pid)

    def per_call(self, calls: int) -> dict[str, float]:
        return {
            "client_cpu_ms": round(1000 * (process_cpu_s() - self.client0) / calls, 3),
            "server_cpu_ms": round(1000 * (process_cpu_s(self.server_pid) - self.server0) / calls, 3),
        }


class Baseline:
    def __enter__(self) -> Baseline:
        self.process = subprocess.Popen([sys.executable, __file__, "--serve-baseline"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        line = self.process.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError("baseline server did not start")
        self.url, self.pid = f"http://127.0.0.1:{int(line.split()[1])}", self.process.pid
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait()
        self.process.stdout.close()


def summary(latencies_s: list[float], wall_s: float) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies_s)
    return {
        "calls_per_s": round(len(ms) / wall_s, 1),
        "p50_ms": round(statistics.median(ms), 3),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3),
    }


async def run_mcp(url: str, sessions: int, calls: int, server_pid: int) -> tuple[dict[str, float], float]:
    """``sessions`` episodes at once, each ``calls`` tool calls; returns the call summary and the mean open time."""
    client = EnvClient(url, max_concurrent=max(sessions, 1))
    latencies: list[float] = []
    opens: list[float] = []
    ready, go, all_called = asyncio.Barrier(sessions + 1), asyncio.Event(), asyncio.Event()

    async def episode() -> None:
        started = time.perf_counter()
        async with client.episode(TASK) as session:
            opens.append(time.perf_counter() - started)
            await ready.wait()
            await go.wait()
            for _ in range(calls):
                t = time.perf_counter()
                result = await session.call_tool(*CALL)
                latencies.append(time.perf_counter() - t)
                assert not result.is_error, result.text
            if len(latencies) == sessions * calls:
                all_called.set()

    tasks = [asyncio.create_task(episode()) for _ in range(sessions)]
    await ready.wait()
    cpu = CpuMeter(server_pid)
    started = time.perf_counter()
    go.set()
    await all_called.wait()  # calls only: closing the sessions is not timed
    result = summary(latencies, time.perf_counter() - started) | cpu.per_call(len(latencies))
    await asyncio.gather(*tasks)
    return result, statistics.mean(opens)


async def run_baseline(url: str, sessions: int, calls: int, server_pid: int) -> dict[str, float]:
    import httpx2

    latencies: list[float] = []
    clients = [httpx2.AsyncClient(base_url=url) for _ in range(sessions)]
    for c in clients:  # warm the keep-alive connections, like an opened session
        (await c.post("/rpc", json=BODY)).raise_for_status()

    async def session(c) -> None:
        for _ in range(calls):
            t = time.perf_counter()
            response = await c.post("/rpc", json=BODY)
            response.json()
            latencies.append(time.perf_counter() - t)

    cpu = CpuMeter(server_pid)
    started = time.perf_counter()
    await asyncio.gather(*[session(c) for c in clients])
    result = summary(latencies, time.perf_counter() - started) | cpu.per_call(len(latencies))
    for c in clients:
        await c.aclose()
    return result


def _cpu(summary_: dict) -> float:
    return summary_["client_cpu_ms"] + summary_["server_cpu_ms"]


def render(results: dict[str, dict]) -> None:
    print(
        f"{'sessions':>8} | {'mcp calls/s':>11} {'p50 ms':>7} {'p95 ms':>7} {'cpu ms/call':>11} | "
        f"{'http calls/s':>12} {'p50 ms':>7} {'cpu ms/call':>11} | {'ratio':>5} {'cpu ratio':>9} {'open ms':>7} {'idle 2-core':>11}"
    )
    for n, r in results.items():
        m, b = r["mcp"], r["baseline"]
        print(
            f"{n:>8} | {m['calls_per_s']:>11} {m['p50_ms']:>7} {m['p95_ms']:>7} {_cpu(m):>11.3f} | "
            f"{b['calls_per_s']:>12} {b['p50_ms']:>7} {_cpu(b):>11.3f} | {r['ratio']:>5} {r['cpu_ratio']:>9} {r['open_ms']:>7} {r['idle_2core_calls_per_s']:>11}"
        )
    print(
        "cpu ms/call = client + server CPU per call; cpu ratio = baseline's CPU per call / ours (load-independent);\n"
        "idle 2-core = 1000 / max(client, server CPU ms per call): the rate with one idle core each"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls-per-session", type=int, default=200)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 32, 64])
    parser.add_argument("--serve-baseline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_baseline:
        serve_baseline()
        return 0
    results: dict[str, dict] = {}
    with LocalEnvServer("hotel") as server, Baseline() as baseline:
        baseline_url = baseline.url
        asyncio.run(run_mcp(server.base_url, 4, 20, server.process.pid))  # warm-up: imports, first requests
        asyncio.run(run_baseline(baseline_url, 4, 20, baseline.pid))
        load_before = os.getloadavg()[0]
        for n in args.concurrency:
            calls = max(20, args.calls_per_session // max(1, n // 8))  # similar total work at every level
            mcp, open_s = asyncio.run(run_mcp(server.base_url, n, calls, server.process.pid))
            base = asyncio.run(run_baseline(baseline_url, n, calls, baseline.pid))
            results[str(n)] = {
                "mcp": mcp,
                "baseline": base,
                "ratio": round(mcp["calls_per_s"] / base["calls_per_s"], 3),
                "cpu_ratio": round(_cpu(base) / _cpu(mcp), 3),
                "open_ms": round(open_s * 1000, 1),
                # client and server each on its own core: the busier one bounds the rate
                "idle_2core_calls_per_s": round(1000 / max(mcp["client_cpu_ms"], mcp["server_cpu_ms"])),
            }
    render(results)
    record("env_throughput", [{"sessions": int(n), **row} for n, row in results.items()], {
        "cpus": os.cpu_count(),
        "loadavg_1m_before": round(load_before, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "calls_per_s": {n: row["mcp"]["calls_per_s"] for n, row in results.items()},
        "ratio_to_plain_http": {n: row["ratio"] for n, row in results.items()},
        "p50_ms": {n: row["mcp"].get("p50_ms") for n, row in results.items()},
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
