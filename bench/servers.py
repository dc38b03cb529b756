"""The comparison servers for bench/flood.py: a bare Litestar floor and an ag-ui-protocol SDK server.

Both answer `POST /` with the event sequence the gateway emits for `/flood N` (N from the last user message); the
bare one also holds `/sleep S` streams (heartbeats every BENCH_HEARTBEAT_SECONDS) and idle WebSockets on `/ws` for
bench/idle.py.
Run: python -m bench.servers bare|sdk|upstream PORT (uvicorn on uvloop and httptools: the stack a user who wants speed runs);
`upstream` is the bare one without the session event, as the AG-UI agent bench/agui_flood.py puts the gateway in
front of.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator

import uvicorn
from litestar import Litestar, Request, WebSocket, post, websocket
from litestar.exceptions import WebSocketDisconnect
from litestar.response import Stream


async def _flood_count(request: Request) -> tuple[dict, int]:
    body = json.loads(await request.body())
    text = body["messages"][-1]["content"]
    return body, int(text.split()[1])


def bare_events(thread_id: str, run_id: str, count: int, *, session: bool = True) -> list[bytes]:
    """The gateway's /flood events, pre-encoded once: the floor is only the stack writing bytes. Without `session`,
    no session event: what an AG-UI agent in front of which the gateway runs sends (the name is the gateway's)."""
    msg = "msg-" + uuid.uuid4().hex[:16]
    session_event = {
        "type": "CUSTOM",
        "name": "iac-code.session.v1",
        "value": {"schemaVersion": 1, "threadId": thread_id, "aguiRunId": run_id},
    }
    head = [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, "protocolVersion": "1.0"},
        *([session_event] if session else []),
        {"type": "TEXT_MESSAGE_START", "messageId": msg, "role": "assistant"},
    ]
    content = (
        b"data: " + json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": msg, "delta": "x "}, separators=(",", ":")).encode() + b"\n\n"
    )
    tail = [
        {"type": "TEXT_MESSAGE_END", "messageId": msg},
        {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id, "outcome": {"type": "success"}},
    ]
    encode = lambda e: b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n"  # noqa: E731
    return [*map(encode, head), *([content] * count), *map(encode, tail)]


HEARTBEAT_SECONDS = float(os.environ.get("BENCH_HEARTBEAT_SECONDS", "15"))


async def _idle(body: dict, seconds: float) -> AsyncIterator[bytes]:
    """`/sleep S` as the floor does it: RUN_STARTED, a heartbeat per stream every HEARTBEAT_SECONDS, the end."""
    thread_id, run_id = body["threadId"], body["runId"]
    yield b"data: " + json.dumps({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}).encode() + b"\n\n"
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(left, HEARTBEAT_SECONDS))
        if deadline - time.monotonic() > 0:
            yield b": heartbeat\n\n"
    yield b"data: " + json.dumps({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}).encode() + b"\n\n"


@websocket("/ws")
async def bare_socket(socket: WebSocket) -> None:
    """An idle WebSocket as the floor holds one: accepted, then waiting for a frame."""
    await socket.accept()
    try:
        while True:
            await socket.receive_text()
    except WebSocketDisconnect:
        pass


@post("/", status_code=200)
async def bare(request: Request) -> Stream:
    body = json.loads(await request.body())
    text = body["messages"][-1]["content"]
    if text.startswith("/sleep"):
        return Stream(_idle(body, float(text.split()[1])), media_type="text/event-stream")
    count = int(text.split()[1])
    return Stream(_one_write_each(bare_events(body["threadId"], body["runId"], count)), media_type="text/event-stream")


async def _one_write_each(events: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in events:
        yield chunk


@post("/", status_code=200)
async def upstream(request: Request) -> Stream:
    """An AG-UI agent for the gateway to front (bench/agui_flood.py): the floor's `/flood` without the session event."""
    body, count = await _flood_count(request)
    return Stream(_one_write_each(bare_events(body["threadId"], body["runId"], count, session=False)), media_type="text/event-stream")


@post("/", status_code=200)
async def sdk(request: Request) -> Stream:
    from ag_ui.core import (
        CustomEvent,
        EventType,
        RunFinishedEvent,
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
    )
    from ag_ui.encoder import EventEncoder

    body, count = await _flood_count(request)
    encoder = EventEncoder(accept="text/event-stream")
    thread_id, run_id = body["threadId"], body["runId"]

    async def gen():
        msg = "msg-" + uuid.uuid4().hex[:16]
        yield encoder.encode(RunStartedEvent(type=EventType.RUN_STARTED, thread_id=thread_id, run_id=run_id, protocol_version="1.0"))
        yield encoder.encode(
            CustomEvent(type=EventType.CUSTOM, name="iac-code.session.v1", value={"schemaVersion": 1, "threadId": thread_id})
        )
        yield encoder.encode(TextMessageStartEvent(type=EventType.TEXT_MESSAGE_START, message_id=msg, role="assistant"))
        for _ in range(count):
            yield encoder.encode(TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, message_id=msg, delta="x "))
        yield encoder.encode(TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, message_id=msg))
        yield encoder.encode(RunFinishedEvent(type=EventType.RUN_FINISHED, thread_id=thread_id, run_id=run_id))

    return Stream(gen(), media_type="text/event-stream")


if __name__ == "__main__":
    kind, port = sys.argv[1], int(sys.argv[2])
    app = Litestar(route_handlers={"bare": [bare, bare_socket], "upstream": [upstream]}.get(kind, [sdk]), debug=False)
    # The floor a user would build: Litestar on uvicorn with uvloop and the httptools parser (uvicorn[standard]),
    # the stack the gateway itself runs by default.
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, loop="uvloop", http="httptools")
