"""Several agents (AGENTS_AND_COPILOTKIT.md): what declaring ten agents costs `POST /`, and what a run of one agent
by its id costs against `POST /`, in one run.

Two gateways on the memory store: one with the one agent `--agent demo` declares, one with ten demo agents from an
agents file (the default among them). The load (bench/node/load_client.mjs, on its own core) runs `/flood` through
`POST /` on each, and on the second through `POST /agents/a7` and CopilotKit's `POST /copilotkit/agent/a7/run` (a7:
not the default); rounds interleave them, each figure reported as a ratio to `POST /` with one agent.

python -m bench.several_agents [--config c1|ttfe|c200|all] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from bench.flood import CONFIGS, WORKSPACE, figure, free_port, gateway_command, interleaved, paired, spawn

AGENTS = 10


def agents_file(directory: str) -> str:
    path = os.path.join(directory, "agents.toml")
    with open(path, "w") as file:
        for index in range(AGENTS):
            file.write(f'[agents.a{index}]\nbackend = "demo"\n{"default = true" if index == 0 else ""}\n\n')
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", choices=["c1", "ttfe", "c200", "all"], default="all")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    configs = ["c1", "ttfe", "c200"] if args.config == "all" else [args.config]
    os.makedirs(WORKSPACE, exist_ok=True)
    with tempfile.TemporaryDirectory() as state_dir:
        one_port, ten_port = free_port(), free_port()
        one = spawn(gateway_command(one_port, os.path.join(state_dir, "one"), "--store", "memory"), one_port, "/ping")
        ten_args = ("--store", "memory", "--agents", agents_file(state_dir))
        ten = spawn(gateway_command(ten_port, os.path.join(state_dir, "ten"), *ten_args), ten_port, "/ping")
        servers = {
            "one agent, POST /": one,
            "ten agents, POST /": ten,
            "ten, POST /agents/a7": (ten[0], ten[1] + "/agents/a7"),
            "ten, copilotkit run": (ten[0], ten[1] + "/copilotkit/agent/a7/run"),
        }
        try:
            results = interleaved(servers, configs, args.rounds)
        finally:
            for proc in (one[0], ten[0]):
                proc.terminate()
                proc.wait()
    print(f"median of {args.rounds} rounds, interleaved; ratios to POST / with one agent (higher is better)")
    for name in configs:
        streams, count, runs, metric = CONFIGS[name]
        print(f"{name}: C={streams}, N={count}, {runs} runs per round ({metric})")
        rows = results[name]
        base = rows["one agent, POST /"]
        shorter = metric == "first event"
        for kind, measured in rows.items():
            median = statistics.median(figure(row, metric) for row in measured)
            cpu = statistics.median(row["cpu_us_per_run"] for row in measured)
            print(
                f"  {kind:22s} {median:>12,.2f}   server CPU {cpu:6.0f} us/run   {paired(measured, base, metric, shorter_better=shorter)}"
            )


if __name__ == "__main__":
    main()
