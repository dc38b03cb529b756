"""Gateway overhead in front of an A2A agent: events per second through the gateway (SSE) versus reading the
agent's own SSE stream directly, with the same Node client, in one run. The agent is the scripted a2a-sdk
agent of the tests (`flood N` streams N text updates).

Usage: (cd bench/node && npm ci) && python -m bench.a2a_flood [--events 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile

from bench.flood import free_port, gateway_command, spawn
from bench.ws_flood import node_rate


def start_agent() -> tuple[subprocess.Popen, str]:
    port = free_port()
    return spawn([sys.executable, "-m", "tests.a2a_agent", str(port)], port, "/.well-known/agent-card.json")


def start_gateway(agent_url: str, state_dir: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    return spawn(gateway_command(port, state_dir, "--store", "memory", "--agent", f"a2a+{agent_url}/"), port, "/ping")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state_dir:
        agent, agent_url = start_agent()
        gateway, gateway_url = start_gateway(agent_url, state_dir)
        direct, through = [], []
        try:
            for _ in range(args.rounds):
                direct.append(node_rate("a2a", agent_url, args.events))
                through.append(node_rate("sse", gateway_url, args.events))
        finally:
            for proc in (gateway, agent):
                proc.terminate()
                proc.wait()
    d, t = statistics.median(direct), statistics.median(through)
    print(f"A2A flood of {args.events} text updates, median of {args.rounds} rounds (events/s):")
    print(f"  agent read directly   {d:>10,.0f}")
    print(f"  through the gateway   {t:>10,.0f}")
    print(f"  gateway / direct = {t / d:.2f}x   (target >= 0.7x)")


if __name__ == "__main__":
    main()
