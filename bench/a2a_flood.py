"""Gateway overhead in front of an A2A agent: events per second through the gateway (SSE) versus reading the
agent's own SSE stream directly, with the same Node client, in one run. The agent is the scripted a2a-sdk
agent of the tests (`flood N` streams N text updates). Two gateways side by side: on the memory store, and on
Redis, where an A2A run can be adopted and its followers see only what its log in Redis holds.

Usage: (cd bench/node && npm ci) && python -m bench.a2a_flood [--events 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile

from bench.flood import free_port, gateway_command, spawn
from bench.store_bench import start_redis
from bench.ws_flood import node_rate


def start_agent() -> tuple[subprocess.Popen, str]:
    port = free_port()
    return spawn([sys.executable, "-m", "tests.a2a_agent", str(port)], port, "/.well-known/agent-card.json")


def start_gateway(agent_url: str, state_dir: str, store: str = "memory") -> tuple[subprocess.Popen, str]:
    port = free_port()
    return spawn(gateway_command(port, state_dir, "--store", store, "--agent", f"a2a+{agent_url}/"), port, "/ping")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state_dir, tempfile.TemporaryDirectory() as redis_dir:
        agent, agent_url = start_agent()
        redis, redis_port = start_redis(redis_dir)
        gateway, gateway_url = start_gateway(agent_url, state_dir)
        on_redis, on_redis_url = start_gateway(agent_url, state_dir + "/r", f"redis://127.0.0.1:{redis_port}/0")
        direct, through, durable = [], [], []
        try:
            for _ in range(args.rounds):
                direct.append(node_rate("a2a", agent_url, args.events))
                through.append(node_rate("sse", gateway_url, args.events))
                durable.append(node_rate("sse", on_redis_url, args.events))
        finally:
            for proc in (gateway, on_redis, agent, redis):
                proc.terminate()
                proc.wait()
    d, t, r = statistics.median(direct), statistics.median(through), statistics.median(durable)
    print(f"A2A flood of {args.events} text updates, median of {args.rounds} rounds (events/s):")
    print(f"  agent read directly             {d:>10,.0f}")
    print(f"  through the gateway (memory)    {t:>10,.0f}")
    print(f"  through the gateway (Redis)     {r:>10,.0f}")
    print(f"  memory / direct = {t / d:.2f}x   (target >= 0.7x)")
    print(f"  Redis / direct  = {r / d:.2f}x   (followers read what the log holds)")


if __name__ == "__main__":
    main()
