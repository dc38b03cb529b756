"""The project's modules one run crosses: a plain SSE run (`POST /`) and a WebSocket run (`/ws`), the gateway's ASGI
app called in this process as a server calls it (so the server's own modules, server/*_protocol.py, are not among
them), each traced on its second run (the first imports what runs lazily).

Usage: python -m bench.modules [--tuning on|off] [--root DIR]
--root DIR traces another checkout's gateway (e.g. `git worktree add /tmp/before <commit>`), for a before/after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def body(thread: str) -> bytes:
    message = {"id": "m", "role": "user", "content": "hi"}
    run = {"threadId": thread, "runId": f"r-{thread}", "state": {}, "messages": [message], "tools": [], "context": [], "forwardedProps": {}}
    return json.dumps(run).encode()


def scope_of(kind: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": kind,
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "scheme": "http" if kind == "http" else "ws",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }


async def sse_run(app: Any, thread: str) -> None:
    data, done = body(thread), asyncio.Event()
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": data, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    headers = [(b"host", b"t"), (b"content-type", b"application/json"), (b"accept", b"text/event-stream")]
    headers.append((b"content-length", str(len(data)).encode()))
    answer = app({**scope_of("http", "/", headers), "method": "POST"}, receive, send)
    if asyncio.iscoroutine(answer):
        await answer


async def ws_run(app: Any, thread: str) -> None:
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    inbox.put_nowait({"type": "websocket.connect"})

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "websocket.accept":
            inbox.put_nowait({"type": "websocket.receive", "text": body(thread).decode()})
        text = message.get("text") or b"".join(message.get("agui.ws.text_batch") or []).decode()
        if "RUN_FINISHED" in text:
            inbox.put_nowait({"type": "websocket.disconnect", "code": 1000})

    scope = scope_of("websocket", "/ws", [(b"host", b"t")])
    scope.update(subprotocols=["agui.v1"], extensions={"agui.ws.text_batch": {}})
    answer = app(scope, inbox.get, send)
    if asyncio.iscoroutine(answer):
        await asyncio.wait_for(answer, 10)


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    inbox.put_nowait({"type": "lifespan.startup"})
    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, outbox.put))
    await outbox.get()
    try:
        yield
    finally:
        inbox.put_nowait({"type": "lifespan.shutdown"})
        await outbox.get()
        await task


async def crossed(root: str, kind: str, tuning: str) -> list[str]:
    from server.app import create_app
    from server.flags import settings_from_args
    from transports.fast_path import Outermost

    state = tempfile.mkdtemp()
    argv = ["--store", "memory", "--state-dir", state, "--allowed-cwd", "/tmp", "--log-level", "warning"]
    settings = settings_from_args([*argv, *(["--tuning", tuning] if tuning else [])])
    app = create_app(settings)
    annex = getattr(app.state, "annex", None)
    if annex is None or annex.litestar:
        served: Any = Outermost(app)
    else:
        from transports.fallback import Refusals

        served = Refusals(app)
    seen: set[str] = set()

    def tracer(frame: Any, event: str, arg: Any) -> None:
        name = frame.f_code.co_filename
        own = name.startswith(root + os.sep) and "site-packages" not in name
        if own and not name.startswith((os.path.join(root, "tests"), os.path.join(root, "bench"))):
            seen.add(os.path.relpath(name, root))

    async with lifespan(app):
        run = sse_run if kind == "sse" else ws_run
        await run(served, "warm")
        sys.settrace(tracer)
        threading.settrace(tracer)
        try:
            await run(served, "traced")
        finally:
            sys.settrace(None)
            threading.settrace(None)  # type: ignore[arg-type]
    return sorted(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tuning", choices=["on", "off"], default="", help="the gateway's --tuning (default: its own)")
    parser.add_argument("--root", default=ROOT, help="the checkout whose gateway is traced")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    sys.path.insert(0, root)
    for kind in ("sse", "ws"):
        modules = asyncio.run(crossed(root, kind, args.tuning))
        wing = [name for name in modules if name.startswith(("server/", "transports/"))]
        print(f"{kind}: {len(modules)} modules, {len(wing)} of them in transports/ and server/: {' '.join(wing)}")


if __name__ == "__main__":
    main()
