"""What a hostile AG-UI agent costs the replica behind it: for each script of tests/hostile_upstream.py, the run's end,
the slowest `/health` answer while it ran (polled every 50 ms) and the process's RSS growth; with --baseline, the
same against another checkout's gateway, side by side in one run.

Usage: python -m bench.hostile_agents [--baseline DIR] [--scripts doubling,usage,...] [--endless 30]
`--endless N` adds N endless runs at once (each cut by the live runs' budget, SERVICE_QUOTA_EXCEEDED, or read to the
end of the upstream's 100 MiB) and reports the peak RSS growth; the gateways take AGUI_GATEWAY_* variables from the
environment (AGUI_GATEWAY_MAX_LIVE_RUN_BYTES for another budget). A baseline
without the bounds may take the replica's memory or hang on a script: each run is given 120 s.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench.flood import ROOT, free_port, gateway_command, spawn
from tests.hostile_upstream import HostileUpstream

SCRIPTS = ("doubling-21", "copies", "activity", "usage", "duplicate-interrupts", "long-interrupt-id", "values", "trickle")


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1]) * 1024


def terminal_of(url: str, text: str) -> str:
    body = {
        "threadId": f"t-{uuid.uuid4().hex[:10]}",
        "runId": f"r-{uuid.uuid4().hex[:8]}",
        "state": {},
        "messages": [{"id": "m", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "protocolVersion": "1.0",
    }
    last: dict = {}
    try:
        with httpx.stream("POST", url + "/", json=body, timeout=120) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    last = json.loads(line[5:])
    except httpx.HTTPError as exc:
        return type(exc).__name__
    if last.get("type") not in ("RUN_ERROR", "RUN_FINISHED"):
        return "no terminal event"
    return " ".join(filter(None, (last["type"], last.get("code"))))


def measure(url: str, pid: int, work) -> tuple[str, float, int]:
    """The work's result, the slowest /health while it ran, and the RSS growth."""
    worst, stop = [0.0], threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                began = time.monotonic()
                try:
                    client.get(url + "/health")
                except httpx.HTTPError:
                    pass
                worst[0] = max(worst[0], time.monotonic() - began)
                stop.wait(0.05)

    before, peak = rss(pid), [0]
    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss(pid))
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = work()
    finally:
        stop.set()
        watcher.join()
        sampler.join()
    return result, worst[0], max(peak[0], rss(pid)) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="another checkout's directory, measured beside this one")
    parser.add_argument("--scripts", default=",".join(SCRIPTS))
    parser.add_argument("--endless", type=int, default=0)
    args = parser.parse_args()
    upstream = HostileUpstream().start()
    servers = {"gateway": ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    try:
        with tempfile.TemporaryDirectory() as state:
            started = {}
            for name, checkout in servers.items():
                port = free_port()
                proc, url = spawn(gateway_command(port, f"{state}/{name}", "--agent", "agui+" + upstream.url), port, "/ping", cwd=checkout)
                started[name] = (proc, url)
            try:
                print(f"{'script':22} " + "  ".join(f"{name:>44}" for name in started))
                for script in args.scripts.split(","):
                    cells = []
                    for proc, url in started.values():
                        end, worst, grown = measure(url, proc.pid, lambda url=url, script=script: terminal_of(url, script))
                        cells.append(f"{end[:24]:>24} {worst * 1000:7.0f} ms {grown / 2**20:6.0f} MiB")
                    print(f"{script:22} " + "  ".join(cells), flush=True)
                if args.endless:
                    cells = []
                    for proc, url in started.values():

                        def endless(url: str = url) -> str:
                            with ThreadPoolExecutor(args.endless) as pool:
                                ends = list(pool.map(lambda _: terminal_of(url, "endless"), range(args.endless)))
                            return f"{sum(e.endswith('SERVICE_QUOTA_EXCEEDED') for e in ends)}/{len(ends)} cut"

                        end, worst, grown = measure(url, proc.pid, endless)
                        cells.append(f"{end[:24]:>24} {worst * 1000:7.0f} ms {grown / 2**20:6.0f} MiB")
                    print(f"{f'{args.endless} endless runs':22} " + "  ".join(cells), flush=True)
            finally:
                for proc, _ in started.values():
                    proc.terminate()
                    proc.wait()
    finally:
        upstream.stop()


if __name__ == "__main__":
    main()
