"""Events per second through @ag-ui/client agents in Node: the gateway's WebSocketAgent against HttpAgent, on
the same gateway, at C=1 and C=10, in one run (rounds interleaved). Goal: WebSocketAgent >= 1.0x HttpAgent.

Usage: (cd tests/node && npm ci) && python -m bench.agents [--events 50000] [--rounds 3]
Uses the test suite's Node packages (tests/node: the pinned @ag-ui/client and ws).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

from bench.flood import ROOT, start

LIBRARY = os.path.join(ROOT, "tests", "node", ".lib")


def rate(kind: str, url: str, events: int, concurrency: int) -> float:
    done = subprocess.run(
        ["node", "agent_rate.mjs", kind, url, str(events), str(concurrency)], cwd=LIBRARY, check=True, capture_output=True, text=True
    )
    report = json.loads(done.stdout)
    return report["events"] / report["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.makedirs(LIBRARY, exist_ok=True)
    for source in ("transports/ui/ws-agent.js", "transports/ui/ws-mux.js", "bench/node/agent_rate.mjs"):
        shutil.copy(os.path.join(ROOT, source), LIBRARY)
    with tempfile.TemporaryDirectory() as state_dir:
        proc, url = start("gateway", state_dir)
        try:
            results = {}
            for concurrency in (1, 10):
                samples: dict[str, list[float]] = {"ws": [], "http": []}
                for _ in range(args.rounds):
                    for kind in samples:
                        samples[kind].append(rate(kind, url, args.events, concurrency))
                results[concurrency] = {kind: statistics.median(values) for kind, values in samples.items()}
        finally:
            proc.terminate()
            proc.wait()
    print(f"/flood {args.events} events through @ag-ui/client agents in Node, median of {args.rounds} rounds (events/s):")
    for concurrency, medians in results.items():
        ratio = medians["ws"] / medians["http"]
        print(
            f"  C={concurrency:<3} WebSocketAgent {medians['ws']:>9,.0f}   HttpAgent {medians['http']:>9,.0f}   ws/http = {ratio:.2f}x (>= 1.0x)"
        )


if __name__ == "__main__":
    main()
