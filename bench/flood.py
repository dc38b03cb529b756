"""Streams `/flood N` through the gateway, a bare Litestar floor and an ag-ui SDK server, and prints each figure with
its ratios: events/s at C=1 N=10000 and C=50 N=200, streams/s at C=200 N=20, time to first event (p50, p99) at C=1.

Usage: (cd bench/node && npm ci) && python -m bench.flood [--store memory|file|redis] [--config c1|ttfe|c50|c200|all]
       [--baseline DIR] [--logged] [--public]
Each server runs in its own process on loopback (redis: a redis-server of the bench's own); with --store file or
redis, the gateway on the memory store runs beside it, for the ratio of the two stores. The client is Node
(bench/node/load_client.mjs), so that it is not the bottleneck; rounds interleave the servers so drift hits all alike.
--baseline DIR adds the gateway of another checkout (e.g. `git worktree add /tmp/before <commit>`) on the same
store, for a before/after measured in one run: on a shared machine, figures of two runs apart drift by 20%.
Each ratio is given twice: of the servers' medians, and round by round (the median of each round's ratio, and its range),
which a drift of the machine's speed from one round to the next does not move.
--public adds the gateway with `--tuning off` (the libraries' public paths only): what the tuning annex buys.
--logged adds the gateway at the default `--log-level info` (an access line, a run's start and its end, each run;
written to /dev/null) beside the one at `warning`: what the logs cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVER_CORE, CLIENT_CORE = 0, min(1, (os.cpu_count() or 1) - 1)  # on 2 cores: servers on one, the load on the other


def pinned(core: int):
    """A preexec_fn that keeps a child process on one core, so that a server and its load never share one."""
    return lambda: os.sched_setaffinity(0, {core})


def spawn(
    cmd: list[str], port: int, probe: str = "/", env: dict[str, str] | None = None, *, cwd: str = ROOT, core: int | None = None
) -> tuple[subprocess.Popen, str]:
    """Start a server process on loopback, on the servers' core unless `core` says another, from `cwd` (another
    checkout's gateway: `-m server` imports from its directory first), and wait until `probe` answers (any HTTP
    status)."""
    on = SERVER_CORE if core is None else core
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, preexec_fn=pinned(on))
    return _answering(proc, f"http://127.0.0.1:{port}", probe)


def _answering(proc: subprocess.Popen, url: str, probe: str) -> tuple[subprocess.Popen, str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(url + probe, timeout=0.5)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{' '.join(proc.args[:3])} did not start")


def gateway_command(port: int, state_dir: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "server",
        "--port",
        str(port),
        "--state-dir",
        state_dir,
        "--log-level",
        "warning",
        "--allowed-cwd",
        "/tmp",
        *extra,
    ]


def start(kind: str, state_dir: str, store: str = "memory", baseline: str | None = None) -> tuple[subprocess.Popen, str]:
    os.makedirs(WORKSPACE, exist_ok=True)
    port = free_port()
    if kind == "baseline":  # the gateway of another checkout
        assert baseline is not None
        return spawn(gateway_command(port, os.path.join(state_dir, "baseline"), "--store", store), port, "/ping", cwd=baseline)
    if kind in ("gateway", "memory"):  # "memory": the gateway on the memory store, beside a file or Redis one
        return spawn(gateway_command(port, state_dir, "--store", store if kind == "gateway" else "memory"), port, "/ping")
    if kind == "public":  # the gateway on the libraries' public paths (no tuning annex)
        return spawn(gateway_command(port, os.path.join(state_dir, "public"), "--store", store, "--tuning", "off"), port, "/ping")
    if kind == "logged":  # the gateway at the default log level, its lines written (to /dev/null)
        return spawn(gateway_command(port, state_dir, "--store", store, "--log-level", "info"), port, "/ping")
    if kind == "h11":  # the gateway on the pure-Python stack (--http h11 --loop asyncio), for the before/after
        return spawn(gateway_command(port, state_dir, "--store", store, "--http", "h11", "--loop", "asyncio"), port, "/ping")
    return spawn([sys.executable, "-m", "bench.servers", kind, str(port)], port)


def start_redis(directory: str) -> tuple[subprocess.Popen, str]:
    """A redis-server of the benchmark's own on a free loopback port (no persistence: the bench measures the path)."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory],
        stdout=subprocess.DEVNULL,
        preexec_fn=pinned(CLIENT_CORE),  # beside the load client: the gateway's core is the one measured
    )
    deadline = time.monotonic() + 10
    while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() != "PONG":
        if time.monotonic() > deadline:
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)
    return proc, f"redis://127.0.0.1:{port}/0"


# The workspace every run names (the node clients too). A deployment's workspaces exist, so it is made before a
# server starts: the gateway's check of it costs what it costs there, not what a missing directory costs.
WORKSPACE = "/tmp/bench"


def body(count: int) -> dict:
    return demo_body(f"/flood {count}")


def demo_body(text: str) -> dict:
    """A run of the demo agent on a new thread, with `text` as the user's message."""
    return {
        "threadId": "bench-" + uuid.uuid4().hex,
        "runId": "run-" + uuid.uuid4().hex,
        "state": {},
        "messages": [{"id": "m", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "bench", "cwd": WORKSPACE}},
    }


async def one_stream(client: httpx.AsyncClient, url: str, count: int) -> int:
    events = 0
    async with client.stream("POST", url + "/", json=body(count), headers={"accept": "text/event-stream"}) as response:
        assert response.status_code == 200
        async for chunk in response.aiter_raw():
            events += chunk.count(b"\n\n")
    assert events >= count, (url, events)
    return events


async def measure(url: str, count: int, streams: int) -> float:
    async with httpx.AsyncClient(timeout=120) as client:
        await one_stream(client, url, 1000)  # warm-up
        started = time.perf_counter()
        totals = await asyncio.gather(*(one_stream(client, url, count // streams) for _ in range(streams)))
        return sum(totals) / (time.perf_counter() - started)


# name -> (concurrent streams, events per run, runs per round, what is compared)
CONFIGS = {
    "c1": (1, 10_000, 3, "events/s"),
    "ttfe": (1, 20, 1000, "first event"),  # rounds of about half a second: shorter ones were mostly noise
    "c50": (50, 200, 500, "events/s"),
    "c200": (200, 20, 3000, "streams/s"),
}
NODE_CLIENT = os.path.join(ROOT, "bench", "node", "load_client.mjs")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(url: str, streams: int, count: int, runs: int, pid: int | None = None) -> dict:
    """One round of the Node load client against one server; with `pid`, also the server's CPU time per run."""
    before = cpu_seconds(pid) if pid else 0.0
    done = subprocess.run(
        ["node", NODE_CLIENT, url, str(streams), str(count), str(runs)],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=pinned(CLIENT_CORE),
    )
    result = json.loads(done.stdout)
    if pid:
        result["cpu_us_per_run"] = (cpu_seconds(pid) - before) * 1e6 / max(1, result["runs"])
    return result


def figure(result: dict, metric: str) -> float:
    if metric == "events/s":
        return result["events"] / result["seconds"]
    if metric == "streams/s":
        return (result["runs"] - result["failures"]) / result["seconds"]
    return result["ttfe"]["p50"]


def paired(rows: list[dict], base: list[dict], metric: str, *, shorter_better: bool = False) -> str:
    """The ratio of two servers round by round (each round runs them back to back, so a drift of the machine's speed
    between rounds cancels out): its median and its range over the rounds."""
    ratios = sorted(figure(row, metric) / figure(other, metric) for row, other in zip(rows, base, strict=True))
    if shorter_better:
        ratios = sorted(1 / ratio for ratio in ratios)
    return f"round by round {statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}x)"


def interleaved(servers: dict[str, tuple[subprocess.Popen, str]], configs: list[str], rounds: int) -> dict[str, dict[str, list[dict]]]:
    """Each config's load on each server, after a warm-up, `rounds` times over: the servers interleaved within a round,
    so that a drift of the machine's speed hits them all alike. Results by config, then server."""
    results: dict[str, dict[str, list[dict]]] = {name: {kind: [] for kind in servers} for name in configs}
    for proc_url in servers.values():
        load(proc_url[1], 10, 20, 200)  # warm-up
    for _ in range(rounds):
        for name in configs:
            streams, count, runs, _ = CONFIGS[name]
            for kind, (proc, url) in servers.items():
                results[name][kind].append(load(url, streams, count, runs, proc.pid))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["memory", "file", "redis"], default="memory")
    parser.add_argument("--config", choices=[*CONFIGS, "all"], default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--h11", action="store_true", help="also the gateway on the pure-Python stack (--http h11 --loop asyncio)")
    parser.add_argument("--baseline", metavar="DIR", help="also the gateway of another checkout, on the same store (before/after)")
    parser.add_argument("--plain", action="store_true", help="plain AG-UI requests (their threads keep a conversation)")
    parser.add_argument("--logged", action="store_true", help="also the gateway at --log-level info (what its logs cost)")
    parser.add_argument("--public", action="store_true", help="also the gateway with --tuning off (what the annex buys)")
    args = parser.parse_args()
    os.environ["BENCH_PLAIN"] = "1" if args.plain else ""  # read by the Node load client
    if not os.path.exists(os.path.join(ROOT, "bench", "node", "node_modules")):
        raise SystemExit("run (cd bench/node && npm ci) first")
    configs = list(CONFIGS) if args.config == "all" else [args.config]
    kinds = [
        "gateway",
        "bare",
        "sdk",
        *(["memory"] if args.store != "memory" else []),
        *(["h11"] if args.h11 else []),
        *(["baseline"] if args.baseline else []),
        *(["logged"] if args.logged else []),
        *(["public"] if args.public else []),
    ]
    with tempfile.TemporaryDirectory() as state_dir:
        redis = start_redis(state_dir) if args.store == "redis" else None
        store = redis[1] if redis else args.store
        servers = {kind: start(kind, state_dir, store, args.baseline) for kind in kinds}
        try:
            results = interleaved(servers, configs, args.rounds)
        finally:
            for proc, _ in [*servers.values(), *([redis] if redis else [])]:
                proc.terminate()
                proc.wait()
    print(
        f"gateway store: {args.store}; median of {args.rounds} rounds, servers interleaved, servers on core {SERVER_CORE} and the"
        f" client on core {CLIENT_CORE}; floor = bare Litestar route on uvicorn with uvloop and httptools, sdk = ag-ui SDK encoder"
    )
    for name in configs:
        streams, count, runs, metric = CONFIGS[name]
        print(f"{name}: C={streams}, N={count}, {runs} runs per round ({metric})")
        medians: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for kind in kinds:
            rows = results[name][kind]
            medians[kind] = statistics.median(figure(row, metric) for row in rows)
            p50 = statistics.median(row["ttfe"]["p50"] for row in rows)
            p99 = statistics.median(row["ttfe"]["p99"] for row in rows)
            failed = sum(row["failures"] for row in rows)
            cpu[kind] = statistics.median(row["cpu_us_per_run"] for row in rows)
            print(
                f"  {kind:8s} {medians[kind]:>12,.1f}   first event p50 {p50:6.2f} ms p99 {p99:7.2f} ms"
                f"   server CPU {cpu[kind]:6.0f} us/run   failed runs {failed}"
            )
        rows = results[name]
        print(
            f"  gateway / floor = {medians['gateway'] / medians['bare']:.2f}x, {paired(rows['gateway'], rows['bare'], metric)}"
            f"   gateway / sdk = {medians['gateway'] / medians['sdk']:.2f}x"
            f"   server CPU per run: gateway / floor = {cpu['gateway'] / cpu['bare']:.2f}x"
        )
        if "h11" in medians:
            print(f"  gateway on h11 and asyncio / floor = {medians['h11'] / medians['bare']:.2f}x")
        # (label, the server compared, the one it is compared with, whether that one's ratio to the floor follows)
        pairs = [
            ("gateway / baseline", "gateway", "baseline", True),
            ("tuning on / off", "gateway", "public", True),
            ("logs at info / at warning", "logged", "gateway", False),
            (f"{args.store} store / memory store", "gateway", "memory", False),
        ]
        for label, one, other, floor in pairs:
            if other in medians and one in medians:
                more = f"   {other} / floor = {medians[other] / medians['bare']:.2f}x" if floor else ""
                print(f"  {label} = {compared(rows, medians, cpu, one, other, metric)}{more}")


def compared(rows: dict, medians: dict, cpu: dict, one: str, other: str, metric: str) -> str:
    """`one` against `other`: the ratio of the medians, round by round, and the server CPU a run (a shorter first
    event is better: its ratios are turned over)."""
    first = metric == "first event"
    ratio = medians[one] / medians[other]
    ratio = 1 / ratio if first else ratio
    return (
        f"{ratio:.2f}x, {paired(rows[one], rows[other], metric, shorter_better=first)}   server CPU per run: {cpu[one] / cpu[other]:.2f}x"
    )


if __name__ == "__main__":
    main()
