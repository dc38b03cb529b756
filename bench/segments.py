"""The file store's event-log segments on their own: the time to write K runs' logs of N events, the bytes they take,
the time a start takes to replay them, and reads from the middle of the logs; with --baseline DIR, the same for
another checkout, side by side in one run, with the ratios.

Usage: python -m bench.segments [--runs 5000] [--events 200] [--rounds 3] [--baseline DIR]
Each measurement runs in a process of its own, with the checkout measured first on its import path; the segments
are written to a fresh directory under the system's temporary directory and removed after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Run in a child process, with the checkout measured first on sys.path: prints one JSON object of figures.
CHILD = """
import json, os, sys, time
from store.eventlog.segments import Meta, Segments

directory, runs, events = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
event = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-0123456789abcdef","delta":"word "}'
names = ["%040x" % run for run in range(runs)]
segments = Segments(directory, 3600.0, time.time)
started = time.perf_counter()
for name in names:
    segments.write(name, Meta("ros", "request", "owner"), [(p, event) for p in range(1, events + 1)], 1, events)
written = time.perf_counter() - started
segments.close()
size = sum(os.path.getsize(os.path.join(directory, file)) for file in os.listdir(directory))
started = time.perf_counter()
replayed = Segments(directory, 3600.0, time.time)
replay = time.perf_counter() - started
started = time.perf_counter()
for name in names[:: max(1, runs // 1000)]:
    found, _ = replayed.entries(replayed.logs[name], events // 2, events)
    assert len(found) == events - events // 2, len(found)
reads = time.perf_counter() - started
replayed.close()
print(json.dumps({"write_s": written, "bytes": size, "replay_s": replay, "read_s": reads}))
"""

FIGURES = (("write_s", "write", "s"), ("bytes", "size", "MB"), ("replay_s", "replay", "s"), ("read_s", "1,000 reads", "s"))


def measure(checkout: str, runs: int, events: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, directory, str(runs), str(events)],
            cwd=checkout,
            env={**os.environ, "PYTHONPATH": checkout},
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", metavar="DIR", help="another checkout, measured alternately (before/after)")
    args = parser.parse_args()
    checkouts = {"this": ROOT, **({"baseline": os.path.abspath(args.baseline)} if args.baseline else {})}
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for _ in range(args.rounds):
        for name, checkout in checkouts.items():
            rows[name].append(measure(checkout, args.runs, args.events))
    print(f"{args.runs} logs of {args.events} events, median of {args.rounds} rounds")
    for key, label, unit in FIGURES:
        medians = {name: statistics.median(row[key] for row in rows[name]) for name in checkouts}
        scale = 1e-6 if unit == "MB" else 1.0
        line = "   ".join(f"{name} {value * scale:8.2f} {unit}" for name, value in medians.items())
        ratio = f"   this / baseline = {medians['this'] / medians['baseline']:.2f}x" if "baseline" in medians else ""
        print(f"  {label:12s} {line}{ratio}")


if __name__ == "__main__":
    main()
