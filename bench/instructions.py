"""Instructions per run, counted by valgrind: the gateway's whole run path in-process (its ASGI app called as uvicorn
calls it, the body drained by a send that keeps nothing), beside the floor's route and, with --baseline, another
checkout's gateway. A count, not a time: the same code counts the same whatever else the machine does, where the
timed benchmarks of a shared machine drift by 20% from one run to the next.

Usage: python -m bench.instructions [--events 20] [--runs 400] [--concurrency 200] [--store memory|file|URL] [--baseline DIR]
[--log-level info]
Each figure is a whole process run twice under callgrind, with no runs and with `--runs` runs, the difference
divided by the runs; HTTP parsing and the socket writes are left out (the same parser for all; the gateway writes
fewer times per run than the floor, which this count does not credit it). `--store` counts the gateway on another store
(a Redis URL: that server's own work is not counted; the store's periodic work in the background is, for the longer
time a process of many runs lasts under valgrind). Under valgrind a run lasts about fifty times longer, so on the file
and Redis stores every run outlives its log's first-write delay (20 ms) and writes behind, which the timed server at
C=200 N=20 never does: `--log-delay 30` counts what that server does (the delay, in seconds). Needs valgrind (Debian:
valgrind).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, "bench", "instructions_runs.py")
COLLECTED = re.compile(r"Collected : (\d+)")
LOG_DELAY = "BENCH_LOG_DELAY"  # the runner's log writer's first-write delay, in seconds ("": the gateway's own)


def count(app: str, root: str, events: int, runs: int, concurrency: int, store: str, log_delay: str = "") -> int:
    """Instructions of one process that makes `runs` runs of `/flood events` against `app` (gateway or floor)."""
    with tempfile.TemporaryDirectory() as state:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={os.path.join(state, 'callgrind.out')}",
                sys.executable,
                RUNNER,  # by its path: the checkout measured (PYTHONPATH) is where the gateway is imported from
                app,
                str(events),
                str(runs),
                str(concurrency),
                state,
                store,
            ],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": root, LOG_DELAY: log_delay},
            capture_output=True,
            text=True,
            check=True,
        )
    found = COLLECTED.search(done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count: {done.stderr[-500:]}")
    return int(found.group(1))


def per_run(app: str, root: str, events: int, runs: int, concurrency: int, store: str = "memory", log_delay: str = "") -> float:
    made, none = (count(app, root, events, n, concurrency, store, log_delay) for n in (runs, 0))
    return (made - none) / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--store", default="memory", help="the gateway's store: memory (the default), file, or a Redis URL")
    parser.add_argument("--baseline", metavar="DIR", help="also the gateway of another checkout")
    parser.add_argument("--log-delay", default="", metavar="SECONDS", help="the event log's first-write delay (default: the gateway's)")
    parser.add_argument("--log-level", default="", help="the gateway's logging, set up as the server sets it up (default: none)")
    parser.add_argument("--plain", action="store_true", help="plain AG-UI requests (their threads keep a conversation)")
    parser.add_argument("--gateway-args", default="", help="more of the gateway's flags, e.g. '--thread-history off'")
    args = parser.parse_args()
    os.environ["BENCH_PLAIN"] = "1" if args.plain else ""
    os.environ["BENCH_GATEWAY_ARGS"] = args.gateway_args
    os.environ["BENCH_LOG_LEVEL"] = args.log_level  # read by the runner, under valgrind
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed (apt-get install valgrind)")
    shape = (args.events, args.runs, args.concurrency)
    figures = {"gateway": per_run("gateway", ROOT, *shape, args.store, args.log_delay), "floor": per_run("floor", ROOT, *shape)}
    if args.baseline:
        figures["baseline"] = per_run("gateway", os.path.abspath(args.baseline), *shape, args.store, args.log_delay)
    store = args.store.split("://")[0]
    print(f"/flood {args.events}, {args.runs} runs at C={args.concurrency}, in-process, {store} store; instructions per run (valgrind)")
    for name, value in figures.items():
        print(f"  {name:9s} {value / 1e6:8.3f} M")
    print(f"  gateway / floor = {figures['gateway'] / figures['floor']:.2f}x")
    if "baseline" in figures:
        print(f"  gateway / baseline = {figures['gateway'] / figures['baseline']:.2f}x")


if __name__ == "__main__":
    main()
