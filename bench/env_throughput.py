"""Tool calls per second and latency of our MCP env stack, against plain JSON-over-HTTP on the same stack.

    .venv/bin/python bench/env_throughput.py [--calls-per-session 200] [--concurrency 1 16 32 64]

Starts the hotel MCP server (``envs.local.server``) and a minimal baseline server (uvicorn + starlette, one
JSON route, the same IPPROTO_TCP listening socket) as separate processes, then for each concurrency drives
that many episodes at once through ``EnvClient`` (one MCP session each, ``search_hotels`` calls) and the
same number of plain keep-alive ``httpx2`` clients posting a JSON-RPC-sized body to the baseline. Opening
sessions is not timed, only calls. Prints a table and the MCP calls/s as a ratio of the baseline's, and
ends with one line of JSON: ``{"bench": "env_throughput", ...}``. Client and servers share the machine's
cores, as they do in a CPU trial. Leaves out: verifier and episode-open cost (~27 ms per open, measured
separately by ``open_ms``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envs.client import EnvClient  # noqa: E402
from envs.local.launch import LocalEnvServer  # noqa: E402
from envs.task import Task  # noqa: E402

TASK = Task(task_key="bench", prompt="Find hotels.", env_key="hotel", verifier={"type": "booking_made"},
            env_variables={"CURRENT_DATE": "2026-01-01", "LOGGED_IN_USER": "alice"})
CALL = ("search_hotels", {"city": "Paris"})
BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": CALL[0], "arguments": CALL[1]}}


def serve_baseline() -> None:
    """The baseline server: one JSON route on uvicorn + starlette, the listening socket made like ours."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from envs.local.server import _exit_with_parent, _listen_socket

    async def rpc(request: Request) -> JSONResponse:
        body = await request.json()
        text = json.dumps([{"hotel_id": "H02", "name": "Louvre Inn", "price": 140}, {"hotel_id": "H01", "name": "Seine Lodge", "price": 180}])
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": {"content": [{"type": "text", "text": text}], "isError": False}})

    _exit_with_parent(os.getppid())
    sock = _listen_socket()
    print(f"READY {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/rpc", rpc, methods=["POST"])]), log_level="warning", access_log=False)).run(sockets=[sock])


class Baseline:
    def __enter__(self) -> str:
        self.process = subprocess.Popen([sys.executable, __file__, "--serve-baseline"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        line = self.process.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError("baseline server did not start")
        return f"http://127.0.0.1:{int(line.split()[1])}"

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


async def run_mcp(url: str, sessions: int, calls: int) -> tuple[dict[str, float], float]:
    """``sessions`` episodes at once, each ``calls`` tool calls; returns the call summary and the mean open time."""
    client = EnvClient(url, max_concurrent=max(sessions, 1))
    latencies: list[float] = []
    opens: list[float] = []
    ready, go = asyncio.Barrier(sessions + 1), asyncio.Event()

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

    tasks = [asyncio.create_task(episode()) for _ in range(sessions)]
    await ready.wait()
    started = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    return summary(latencies, time.perf_counter() - started), statistics.mean(opens)


async def run_baseline(url: str, sessions: int, calls: int) -> dict[str, float]:
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

    started = time.perf_counter()
    await asyncio.gather(*[session(c) for c in clients])
    wall = time.perf_counter() - started
    for c in clients:
        await c.aclose()
    return summary(latencies, wall)


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
    with LocalEnvServer("hotel") as server, Baseline() as baseline_url:
        asyncio.run(run_mcp(server.base_url, 4, 20))  # warm-up: imports, first requests
        asyncio.run(run_baseline(baseline_url, 4, 20))
        for n in args.concurrency:
            calls = max(20, args.calls_per_session // max(1, n // 8))  # similar total work at every level
            mcp, open_s = asyncio.run(run_mcp(server.base_url, n, calls))
            base = asyncio.run(run_baseline(baseline_url, n, calls))
            results[str(n)] = {"mcp": mcp, "baseline": base, "ratio": round(mcp["calls_per_s"] / base["calls_per_s"], 3),
                               "open_ms": round(open_s * 1000, 1)}
    print(f"{'sessions':>8} {'mcp calls/s':>12} {'p50 ms':>8} {'p95 ms':>8} {'http calls/s':>13} {'p50 ms':>8} {'ratio':>6} {'open ms':>8}")
    for n, r in results.items():
        m, b = r["mcp"], r["baseline"]
        print(f"{n:>8} {m['calls_per_s']:>12} {m['p50_ms']:>8} {m['p95_ms']:>8} {b['calls_per_s']:>13} {b['p50_ms']:>8} {r['ratio']:>6} {r['open_ms']:>8}")
    load = os.getloadavg()[0]
    print(json.dumps({"bench": "env_throughput", "cpus": os.cpu_count(), "loadavg_1m": round(load, 2), "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
