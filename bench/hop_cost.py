"""The cost of the hop: a real AG-UI agent (ag-ui-langgraph, Pydantic AI's adapter; bench/peer_agents.py) reached
directly and through the gateway in front of it (`--agent agui+...`), side by side in one run with the rounds
interleaved: the time to the first text and to the run's end at C=1, and the time per run at C=20 (the batch's wall
time over its runs). Goal (#70): through the gateway within 1.05x of direct (or +1 ms at C=1, whichever is larger).

Usage: python -m bench.hop_cost [--agents langgraph,pydantic] [--runs 40] [--rounds 5] [--concurrency 20] [--store file]
The agents and the gateway run on the servers' core, this client on the other; ratios are medians of each round's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid

import httpx

from bench.flood import CLIENT_CORE, free_port, gateway_command, spawn

TEXT = {"langgraph": "hello graph", "pydantic": "hello model"}


def plain(text: str) -> dict:
    return {
        "threadId": f"hop-{uuid.uuid4().hex[:12]}",
        "runId": f"run-{uuid.uuid4().hex[:12]}",
        "state": {},
        "messages": [{"id": f"m-{uuid.uuid4().hex[:8]}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "protocolVersion": "1.0",
    }


async def one_run(client: httpx.AsyncClient, url: str, text: str) -> tuple[float, float]:
    """Seconds to the first text, and to the response's end."""
    started, first = time.perf_counter(), None
    async with client.stream("POST", url, json=plain(text), headers={"accept": "text/event-stream"}) as response:
        assert response.status_code == 200, response.status_code
        async for chunk in response.aiter_raw():
            if first is None and b"TEXT_MESSAGE_CONTENT" in chunk:
                first = time.perf_counter()
    ended = time.perf_counter()
    assert first is not None, "no text in the answer"
    return first - started, ended - started


async def at_one(url: str, text: str, runs: int) -> tuple[float, float]:
    """Median first text and run time of `runs` runs one after another."""
    async with httpx.AsyncClient(timeout=60) as client:
        timings = [await one_run(client, url, text) for _ in range(runs)]
    return statistics.median(t[0] for t in timings), statistics.median(t[1] for t in timings)


async def at_many(url: str, text: str, runs: int, concurrency: int) -> float:
    """Wall seconds per run of `runs` runs, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def run() -> None:
            async with gate:
                await one_run(client, url, text)

        started = time.perf_counter()
        await asyncio.gather(*(run() for _ in range(runs)))
        return (time.perf_counter() - started) / runs


def ratio_line(label: str, direct: list[float], through: list[float], unit: float = 1000.0) -> str:
    ratios = [t / d for d, t in zip(direct, through, strict=True)]
    added = statistics.median(t - d for d, t in zip(direct, through, strict=True)) * unit
    return (
        f"  {label:22} direct {statistics.median(direct) * unit:8.2f} ms   gateway {statistics.median(through) * unit:8.2f} ms   "
        f"{statistics.median(ratios):5.2f}x ({min(ratios):.2f}-{max(ratios):.2f})   {added:+.2f} ms"
    )


async def measure(kind: str, args: argparse.Namespace, directory: str) -> None:
    agent_port, gateway_port = free_port(), free_port()
    agent, agent_url = spawn([sys.executable, "-m", "bench.peer_agents", kind, str(agent_port)], agent_port, "/agent")
    command = gateway_command(gateway_port, os.path.join(directory, kind), "--store", args.store, "--agent", f"agui+{agent_url}/agent")
    gateway, gateway_url = spawn(command, gateway_port, "/ping")
    targets = {"direct": agent_url + "/agent", "gateway": gateway_url + "/"}
    text = TEXT[kind]
    try:
        for url in targets.values():  # warm both paths: imports, graphs compiled, connections made
            await at_one(url, text, 5)
        first: dict[str, list[float]] = {name: [] for name in targets}
        whole: dict[str, list[float]] = {name: [] for name in targets}
        many: dict[str, list[float]] = {name: [] for name in targets}
        for _ in range(args.rounds):
            for name, url in targets.items():
                f, w = await at_one(url, text, args.runs)
                first[name].append(f)
                whole[name].append(w)
                many[name].append(await at_many(url, text, args.runs * 5, args.concurrency))
        print(f"{kind} ({args.rounds} rounds; {args.runs} runs at C=1, {args.runs * 5} at C={args.concurrency}; store {args.store}):")
        print(ratio_line("first text, C=1", first["direct"], first["gateway"]))
        print(ratio_line("run, C=1", whole["direct"], whole["gateway"]))
        print(ratio_line(f"per run, C={args.concurrency}", many["direct"], many["gateway"]))
    finally:
        for proc in (gateway, agent):
            proc.terminate()
            proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="langgraph,pydantic")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--store", default="file")
    args = parser.parse_args()
    os.sched_setaffinity(0, {CLIENT_CORE})
    with tempfile.TemporaryDirectory() as directory:
        for kind in args.agents.split(","):
            asyncio.run(measure(kind, args, directory))


if __name__ == "__main__":
    main()
