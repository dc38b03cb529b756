"""The gateway in front of an AG-UI agent (`--agent agui+http://...`): events/s at C=1 N=10000 and C=50 N=200 and
streams/s at C=200 N=20 through the gateway, against reading the agent's own stream directly, in one run.

Usage: (cd bench/node && npm ci) && python -m bench.agui_flood [--config c1|c50|c200|all] [--rounds 3]
       [--store memory|file] [--baseline DIR]
The agent is the floor's route without the session event (`bench.servers upstream`: Litestar on uvicorn with uvloop
and httptools, one write per event). Read directly, it runs alone on the servers' core; behind the gateway, the
gateway has that core and the agent runs beside the load client, so that the gateway's CPU per run is what the
servers' core measures. --baseline DIR adds the gateway of another checkout in front of the same agent (before/after
in one run); ratios are given of the medians and round by round, as bench/flood.py gives them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from bench.flood import (
    CLIENT_CORE,
    CONFIGS,
    ROOT,
    SERVER_CORE,
    WORKSPACE,
    figure,
    free_port,
    gateway_command,
    interleaved,
    paired,
    spawn,
)


def start_agent(core: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    return spawn([sys.executable, "-m", "bench.servers", "upstream", str(port)], port, "/", core=core)


def start_gateway(agent_url: str, state_dir: str, checkout: str, store: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    return spawn(gateway_command(port, state_dir, "--store", store, "--agent", f"agui+{agent_url}/"), port, "/ping", cwd=checkout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", choices=["c1", "c50", "c200", "all"], default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", choices=["memory", "file"], default="memory", help="the gateways' store")
    parser.add_argument("--baseline", metavar="DIR", help="also the gateway of another checkout, in front of the same agent")
    args = parser.parse_args()
    if not os.path.exists(os.path.join(ROOT, "bench", "node", "node_modules")):
        raise SystemExit("run (cd bench/node && npm ci) first")
    configs = ["c1", "c50", "c200"] if args.config == "all" else [args.config]
    kinds = ["gateway", "direct", *(["baseline"] if args.baseline else [])]
    os.makedirs(WORKSPACE, exist_ok=True)
    with tempfile.TemporaryDirectory() as state_dir:
        behind, behind_url = start_agent(CLIENT_CORE)
        servers = {"direct": start_agent(SERVER_CORE)}
        servers["gateway"] = start_gateway(behind_url, os.path.join(state_dir, "gateway"), ROOT, args.store)
        if args.baseline:
            servers["baseline"] = start_gateway(behind_url, os.path.join(state_dir, "baseline"), args.baseline, args.store)
        try:
            results = interleaved(servers, configs, args.rounds)
        finally:
            for proc, _ in [*servers.values(), (behind, behind_url)]:
                proc.terminate()
                proc.wait()
    print(
        f"the gateway ({args.store} store) in front of an AG-UI agent (bench.servers upstream); median of {args.rounds} rounds; direct = the"
        " agent's own stream read alone; server CPU = the process on the servers' core (the gateway, or the agent read directly)"
    )
    for name in configs:
        streams, count, runs, metric = CONFIGS[name]
        print(f"{name}: C={streams}, N={count}, {runs} runs per round ({metric})")
        rows = results[name]
        medians = {kind: statistics.median(figure(row, metric) for row in rows[kind]) for kind in kinds}
        cpu = {kind: statistics.median(row["cpu_us_per_run"] for row in rows[kind]) for kind in kinds}
        for kind in kinds:
            failed = sum(row["failures"] for row in rows[kind])
            print(f"  {kind:9s} {medians[kind]:>12,.1f}   server CPU {cpu[kind]:6.0f} us/run   failed runs {failed}")
        print(f"  gateway / direct = {medians['gateway'] / medians['direct']:.2f}x, {paired(rows['gateway'], rows['direct'], metric)}")
        if args.baseline:
            print(
                f"  gateway / baseline = {medians['gateway'] / medians['baseline']:.2f}x,"
                f" {paired(rows['gateway'], rows['baseline'], metric)}"
                f"   server CPU per run: gateway / baseline = {cpu['gateway'] / cpu['baseline']:.2f}x"
            )


if __name__ == "__main__":
    main()
