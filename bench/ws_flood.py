"""`/flood N` over WebSocket against SSE on the same gateway, and against bedrock-agentcore's AGUIApp over WebSocket.

Usage: bash bench/setup-agentcore.sh && (cd bench/node && npm ci) && python -m bench.ws_flood [--events 100000] [--rounds 5]
The client is Node (bench/node/flood_client.mjs: fetch for SSE, `ws` for WebSocket): a Python client
saturates its core before the servers do.
Prints events per second (median of the rounds, servers interleaved) and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench.flood import ROOT, free_port, spawn, start

AGENTCORE_PYTHON = os.path.join(ROOT, "bench", ".venv-agentcore", "bin", "python")


def start_agentcore() -> tuple[subprocess.Popen, str]:
    if not os.path.exists(AGENTCORE_PYTHON):
        raise SystemExit("run bash bench/setup-agentcore.sh first")
    port = free_port()
    return spawn([AGENTCORE_PYTHON, os.path.join(ROOT, "bench", "agentcore_server.py"), str(port)], port, "/ping")


NODE_CLIENT = os.path.join(ROOT, "bench", "node", "flood_client.mjs")


def node_rate(mode: str, url: str, count: int) -> float:
    """Events per second seen by the Node client (so that the client is not the bottleneck)."""
    subprocess.run(["node", NODE_CLIENT, mode, url, "1000"], check=True, capture_output=True)  # warm-up
    done = subprocess.run(["node", NODE_CLIENT, mode, url, str(count)], check=True, capture_output=True, text=True)
    report = json.loads(done.stdout)
    assert report["events"] >= count, report
    return report["events"] / report["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state_dir:
        gateway, url = start("gateway", state_dir)
        agentcore, agentcore_url = start_agentcore()
        rates: dict[str, list[float]] = {"gateway sse": [], "gateway ws": [], "agentcore ws": []}
        try:
            for _ in range(args.rounds):
                rates["gateway sse"].append(node_rate("sse", url, args.events))
                rates["gateway ws"].append(node_rate("ws", url, args.events))
                rates["agentcore ws"].append(node_rate("ws", agentcore_url, args.events))
        finally:
            for proc in (gateway, agentcore):
                proc.terminate()
                proc.wait()
    median = {k: statistics.median(v) for k, v in rates.items()}
    print(f"/flood {args.events} events, median of {args.rounds} rounds (events/s):")
    for kind, value in median.items():
        print(f"  {kind:13s} {value:>12,.0f}   (min {min(rates[kind]):,.0f}, max {max(rates[kind]):,.0f})")
    print(f"  gateway ws / gateway sse  = {median['gateway ws'] / median['gateway sse']:.2f}x   (target >= 0.8x)")
    print(f"  gateway ws / agentcore ws = {median['gateway ws'] / median['agentcore ws']:.2f}x   (target >= 3x)")


if __name__ == "__main__":
    sys.exit(main())
