"""The SSE response: a run's events as SSE records, sent as a plain ASGI app whose body is written from the
request's own task.

`SseRecords` turns the run's batches into records (a heartbeat into a comment line) and counts what is sent; it is
a slotted object the body's loop calls, not an async generator between the loop and the run: each generator layer
would cost an idle stream its frame and its entry in the loop's set of live generators.

Litestar's streaming body runs the stream in a task group beside a task that waits for the client's disconnect
(two tasks, a task group and a cancel scope per response). Here the stream runs in the request's task, and the
disconnect cancels it through the callback the server calls when the connection is lost (the scope extension
`agui.http.connection`, transports/server_extensions.py), so an idle run holds no task of its own for its
connection. Under a server without that extension, one task waits for the disconnect instead."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from litestar import Response
from litestar.response.base import ASGIResponse
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

from gateway import metrics
from gateway.engine import RunHandle
from gateway.engine.stream import Entry, FollowerCut
from gateway.protocol import events as e
from transports.lean import forget_request
from transports.render import SSE_HEADERS, SSE_MEDIA_TYPE, Dialect
from transports.server_extensions import HTTP_CONNECTION, HttpConnection
from transports.sse_framing import RUN_ERROR_HEAD, named_records, sse_records

log = logging.getLogger("agui.sse")

_END: HTTPResponseBodyEvent = {"type": "http.response.body", "body": b"", "more_body": False}
_CONTENT_TYPE = f"{SSE_MEDIA_TYPE}; charset=utf-8"  # what Litestar's Stream says for a text media type


_TERMINAL = (b'{"type":"RUN_FINISHED"', RUN_ERROR_HEAD)  # a run's last event: the response ends with it
# Runs in flight from which a new stream's first write waits one turn of the loop, so that its run's first step
# (often the whole of a short run) goes out in that write: on a busy process a write (a system call, and on
# loopback the peer's receive with it) costs more than the turn, which the loop's other work makes long anyway.
# With fewer runs the loop has time to spare, and the first event goes out at once.
BUSY_RUNS = 8


class SseRecords:
    """One run's stream as SSE: its batches (`batches`, None for a heartbeat), each rendered as records, with the
    stream's metrics (events and bytes sent, time to the first event, open streams)."""

    __slots__ = ("agentcore", "arrived", "batches", "bytes_sent", "dialect", "events_sent", "named", "positions")

    def __init__(self, run: RunHandle, heartbeat_seconds: float, dialect: Dialect, arrived: float) -> None:
        self.batches = run.events(heartbeat_seconds)
        self.positions = run.positions
        self.named = run.run_id if run.names_run else None  # a join's ids name their run
        self.dialect = dialect
        self.agentcore = dialect.agentcore
        self.arrived = arrived  # 0 once the first event is out
        self.events_sent = metrics.labelled(metrics.EVENTS_SENT, dialect.value)
        self.bytes_sent = metrics.labelled(metrics.BYTES_SENT, dialect.value)

    def render(self, batch: list[Entry] | None) -> bytes:
        if batch is None:
            return e.HEARTBEAT_SSE
        named = self.named
        chunk = sse_records(batch, self.positions, self.agentcore) if named is None else named_records(batch, named)
        if self.arrived:
            metrics.labelled(metrics.TIME_TO_FIRST_EVENT, self.dialect.value).observe(time.perf_counter() - self.arrived)
            self.arrived = 0.0
        self.events_sent.inc(len(batch))
        self.bytes_sent.inc(len(chunk))
        return chunk

    def __aiter__(self) -> AsyncIterator[bytes]:
        """The records as bytes, for anything that reads a stream as an async iterable (what Litestar's `Stream`
        is given); our body writes them without it."""
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        async for batch in self.batches:
            yield self.render(batch)


class SseBody:
    """A run's SSE response as a plain ASGI app (the run routes send it directly; the reattach route through
    `SseReply`): its start with the headers Litestar's `Stream` would send, then the body as below."""

    __slots__ = ("busy", "echo", "prompt", "records")

    def __init__(self, records: SseRecords, echo: dict[str, str], *, busy: RunHandle | None = None, prompt: bool = False) -> None:
        self.records = records
        self.echo = echo  # headers of the request echoed on the response
        self.busy = busy  # the run, when the process had BUSY_RUNS in flight: the first write waits for its first step
        self.prompt = prompt  # the head goes out at once, not with the first records (a queued run's may be far off)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Coroutine[Any, Any, None]:
        # The body's coroutine itself, not one awaiting it: an idle stream holds one frame fewer. The run's handle
        # is let go of after the first turn (its caller keeps this object as long as the stream lasts).
        busy, self.busy = self.busy, None
        return stream_body(self.records, send, receive, self._start(), scope, busy, self.prompt)

    def _start(self) -> HTTPResponseStartEvent:
        headers = {**SSE_HEADERS, "Content-Type": _CONTENT_TYPE, **self.echo}
        encoded = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
        return {"type": "http.response.start", "status": 200, "headers": encoded}


class SseReply(Response[None]):
    """A run's SSE body as a Litestar handler's answer (the reattach route): the body is the ASGI app Litestar sends."""

    def __init__(self, body: SseBody) -> None:
        super().__init__(None)
        self.body = body

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> ASGIResponse:
        return self.body  # type: ignore[return-value]  # called as Litestar calls its ASGIResponse: (scope, receive, send)


class ClientLost:
    """The call the connection makes when its client is gone: it cancels the stream's task, once. A slotted object
    rather than a closure, which an idle stream would hold with its two cells and a list."""

    __slots__ = ("gone", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.gone = False

    def __call__(self) -> None:
        if not self.gone:
            self.gone = True
            self.task.cancel()


async def stream_body(
    records: SseRecords,
    send: Send,
    receive: Receive,
    start: HTTPResponseStartEvent,
    scope: Scope,
    busy: RunHandle | None = None,
    prompt: bool = False,
) -> None:
    """The start, every chunk, then the end; the client's disconnect cancels this task and the response simply
    ends. What only the start read is dropped from the scope once it is sent (transports/lean.py).

    On our own server the start goes out in one write with the first records (a run's RUN_STARTED is ready as it
    is admitted), and the run's terminal event in one write with the response's end. `busy`: the first records
    wait one turn of the loop, in which the run's task takes its first step (it was made before this task goes
    on), so that what that step publishes goes out in the same write (BUSY_RUNS). When that step ended the run and
    its end is being recorded (a store that waits), the start waits for that write too: the run is one write."""
    whole = False
    if busy is not None:
        await asyncio.sleep(0)
        whole = busy.ending
        busy = None  # an idle stream keeps no reference to its run's handle
    extensions: Any = scope.get("extensions")  # ASGI types the extensions as dict[object, object]
    connection: HttpConnection | None = extensions.get(HTTP_CONNECTION) if extensions else None
    if connection is not None and not prompt:
        connection.defer_next_write(whole)
    await send(start)
    forget_request(scope)
    del start, scope, extensions  # the frame lives as long as the stream: it keeps none of the headers
    task = asyncio.current_task()
    assert task is not None
    lost = ClientLost(task)
    if connection is None:
        watcher = asyncio.ensure_future(_wait_for_disconnect(receive, lost))
    elif connection.lost:
        return
    else:
        watcher = None
        connection.on_lost = lost
    open_streams = metrics.labelled(metrics.CONNECTIONS_OPEN, "sse")
    open_streams.inc()
    try:
        batches = records.batches
        try:
            async for batch in batches:
                last = batch is not None and batch[-1][1].startswith(_TERMINAL)
                await send({"type": "http.response.body", "body": records.render(batch), "more_body": not last})
                batch = None  # an idle stream keeps none of what it sent
                if last:  # the response ended with the run's terminal event: nothing can follow it
                    await batches.aclose()
                    return
        except FollowerCut as cut:  # it fell behind the ring: the response ends, to be attached again from its id
            log.info("follower cut behind its run after position %d", cut.position)
            metrics.FOLLOWERS_CUT.inc()
        await send(_END)
    except asyncio.CancelledError:
        if not lost.gone:
            raise
        lost.task.uncancel()  # the client left: the response simply ends
    finally:
        open_streams.dec()
        if watcher is not None:
            watcher.cancel()
        if connection is not None:
            connection.on_lost = None


async def _wait_for_disconnect(receive: Receive, lost: ClientLost) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    lost()
