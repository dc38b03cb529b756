"""Where a short run's CPU goes: the gateway under the C=200 (or --concurrency) short-run load of bench/flood.py (N=20, or
--events), sampled from
outside by py-spy, each sample given to the component of its innermost frame that belongs to one, and printed as
shares of the gateway's busy time beside its CPU per run and the floor's.

Usage: pip install -e '.[bench]' && (cd bench/node && npm ci) && python -m bench.profile [--seconds 8] [--store memory]
       [--concurrency 200] [--events 20]
Needs ptrace rights over the gateway process (root, or kernel.yama.ptrace_scope=0). Samples taken while the loop
waits in epoll are not counted: the shares are of busy time. BENCH_PROFILE_SAMPLES=path keeps py-spy's raw
samples there, for a finer look (one stack a line, root first, its count last).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

from bench.flood import CLIENT_CORE, NODE_CLIENT, load, pinned, start, start_redis

# (component, pattern on a frame's file) in the order they are tried; the first frame from the leaf up that matches
# one names the sample's component. Library frames are given to the nearest frame of ours that called them.
COMPONENTS = (
    ("HTTP parse and connection limits", r"uvicorn/protocols/http/|server/connection_limits|server/http_protocol|httptools"),
    ("request decode and validation", r"gateway/protocol/(input|validate)|transports/http_input|gateway/jsondepth"),
    ("store round trips", r"^store/"),
    (
        "admission and run lifecycle",
        r"gateway/engine/(engine|prepare|request|lifecycle|machine|lease|caller|digest|handle|settle|outcome|run|driver|heartbeat)",
    ),
    ("agent and translation", r"gateway/agents/|gateway/engine/(translator|stream|documents|follow|retained|replay|logwriter)"),
    ("event encoding", r"gateway/protocol/events|transports/render"),
    ("response write", r"transports/(sse_response|sse)\b|transports/sse"),
    ("routing, auth and access log", r"transports/|gateway/auth|gateway/access|gateway/logs|gateway/metrics|gateway/instrumented"),
    ("event loop and tasks", r"asyncio/|uvloop"),
)
FRAME = re.compile(r"\((?P<file>[^():]+):\d+\)")


def component(stack: str) -> str:
    files = [match.group("file") for match in FRAME.finditer(stack)]
    for file in reversed(files):  # leaf last in py-spy's raw format
        for name, pattern in COMPONENTS:
            if re.search(pattern, file):
                return name
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--store", choices=["memory", "file", "redis"], default="memory")
    parser.add_argument("--concurrency", type=int, default=200, help="streams at once (1: the first-event case)")
    parser.add_argument("--events", type=int, default=20, help="events a run (200: the C=50 long-stream case)")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    with tempfile.TemporaryDirectory() as state_dir:
        redis = start_redis(state_dir) if args.store == "redis" else None
        gateway = start("gateway", state_dir, redis[1] if redis else args.store)
        floor = start("bare", state_dir)
        try:
            for server in (gateway, floor):
                load(server[1], 10, 20, 300)  # warm-up
            raw = os.environ.get("BENCH_PROFILE_SAMPLES") or os.path.join(state_dir, "samples.txt")
            stop = threading.Event()

            def keep_loading() -> None:
                while not stop.is_set():
                    subprocess.run(
                        ["node", NODE_CLIENT, gateway[1], str(args.concurrency), str(args.events), "2000"],
                        capture_output=True,
                        preexec_fn=pinned(CLIENT_CORE),
                    )

            loader = threading.Thread(target=keep_loading)
            loader.start()
            try:
                subprocess.run(
                    [
                        spy,
                        "record",
                        "--pid",
                        str(gateway[0].pid),
                        "--duration",
                        str(int(args.seconds)),
                        "--rate",
                        "250",
                        "--format",
                        "raw",
                        "--output",
                        raw,
                        "--nonblocking",
                    ],
                    check=True,
                    capture_output=True,
                )
            finally:
                stop.set()
                loader.join()
            gateway_run = load(gateway[1], args.concurrency, args.events, 3000, gateway[0].pid)
            floor_run = load(floor[1], args.concurrency, args.events, 3000, floor[0].pid)
        finally:
            for proc, _ in [gateway, floor, *([redis] if redis else [])]:
                proc.terminate()
                proc.wait()
        shares: collections.Counter[str] = collections.Counter()
        with open(raw) as handle:
            for line in handle:
                stack, _, count = line.rstrip("\n").rpartition(" ")
                if stack and count.isdigit():
                    shares[component(stack)] += int(count)
    total = sum(shares.values())
    per_run = gateway_run["cpu_us_per_run"]
    print(
        f"C={args.concurrency} N={args.events} runs, {args.store} store: gateway {per_run:.0f} us of CPU per run, floor {floor_run['cpu_us_per_run']:.0f} us"
    )
    print(f"{total} busy samples over {args.seconds:g} s")
    for name, count in shares.most_common():
        print(f"  {name:36s} {count / total:6.1%}   ~{per_run * count / total:5.0f} us/run")


if __name__ == "__main__":
    main()
