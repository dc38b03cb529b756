"""What bench/instructions.py counts: one process making K runs of `/flood N` at concurrency C in-process, against
the gateway's app (imported from the checkout on PYTHONPATH) or the floor's route (bench/servers.py).

Run by bench/instructions.py under valgrind: python bench/instructions_runs.py gateway|floor N K C STATE_DIR [STORE]
(STORE: the gateway's --store, memory unless given).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any

import uvloop

PROCESS = uuid.uuid4().hex[:8]  # thread ids of their own: a shared store (Redis) keeps every earlier process's runs


def body(events: int, index: int) -> bytes:
    return json.dumps(
        {
            "threadId": f"bench-{PROCESS}-{index:08d}",
            "runId": f"run-{index:08d}",
            "state": {},
            "messages": [{"id": "m", "role": "user", "content": f"/flood {events}"}],
            "tools": [],
            "context": [],
            # BENCH_PLAIN: plain AG-UI requests (the thread keeps its conversation), not the iacCode extension's.
            "forwardedProps": {}
            if os.environ.get("BENCH_PLAIN")
            else {"iacCode": {"schemaVersion": 1, "rosInvocationId": "bench", "cwd": "/tmp/bench"}},
        }
    ).encode()


class Cycle:
    """What uvicorn's request cycle gives the app: the body at once, then a disconnect once the response ended."""

    disconnected = False
    agui_on_lost = None

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.sent = False
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def receive(self) -> dict[str, Any]:
        if not self.sent:
            self.sent = True
            return {"type": "http.request", "body": self.data, "more_body": False}
        await self.ended
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body") and not self.ended.done():
            self.ended.set_result(None)


def scope(length: int) -> dict[str, Any]:
    headers = [(b"host", b"bench"), (b"content-type", b"application/json"), (b"accept", b"text/event-stream")]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"content-length", str(length).encode())],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }


async def lifespan(app: Any) -> asyncio.Future[Any]:
    """Start the app as uvicorn does; the lifespan's task, which lives as long as the app."""
    inbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, outbox.put))
    await outbox.get()
    return task


async def main(kind: str, events: int, runs: int, concurrency: int, state_dir: str, store: str = "memory") -> None:
    if kind == "gateway":
        from gateway.collector import tune_collector
        from server.app import create_app
        from server.cli import settings_from_args
        from transports.fast_path import Outermost

        if os.environ.get("BENCH_LOG_DELAY"):  # bench/instructions.py --log-delay
            from gateway.engine import logwriter

            logwriter.FIRST_FLUSH_DELAY = float(os.environ["BENCH_LOG_DELAY"])
        level = os.environ.get("BENCH_LOG_LEVEL") or "warning"  # bench/instructions.py --log-level
        extra = os.environ.get("BENCH_GATEWAY_ARGS", "").split()  # more of the gateway's flags (e.g. --thread-history off)
        settings = settings_from_args(["--store", store, "--state-dir", state_dir, "--allowed-cwd", "/tmp", "--log-level", level, *extra])
        if os.environ.get("BENCH_LOG_LEVEL"):  # the lines as the server writes them (to the captured stderr)
            try:
                from gateway.log_output import setup_logging
            except ImportError:  # a checkout from before gateway/log_output.py (--baseline)
                from gateway.logs import setup_logging  # type: ignore[attr-defined,no-redef]

            setup_logging(level, "text")
        litestar = create_app(settings)
        life = await lifespan(litestar)
        annex = getattr(litestar.state, "annex", None)  # None: a checkout from before the annex (--baseline)
        if annex is None or annex.litestar:
            app: Any = Outermost(litestar)
        else:  # --tuning off: served as the server serves it then
            from transports.fallback import Refusals

            app = Refusals(litestar)
        tune_collector()
    else:
        from litestar import Litestar

        from bench.servers import bare

        app = Litestar(route_handlers=[bare], debug=False)
        life = await lifespan(app)
    os.makedirs("/tmp/bench", exist_ok=True)  # the runs' workspace, as bench/flood.py makes it
    made = 0

    async def one() -> None:
        nonlocal made
        made += 1
        cycle = Cycle(body(events, made))
        rest = await app(scope(len(cycle.data)), cycle.receive, cycle.send)
        if rest is not None:  # the gateway's run route hands back its stream's coroutine (transports/fast_path.py)
            await rest
        await cycle.ended

    await asyncio.gather(*(one() for _ in range(concurrency)))  # warm: imports, first-call caches
    for _ in range(runs // concurrency):
        await asyncio.gather(*(one() for _ in range(concurrency)))
    await asyncio.sleep(0.05)  # the runs' last steps (settling, logs) are part of what they cost
    life.cancel()


if __name__ == "__main__":
    uvloop.install()
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], *sys.argv[6:7]))
