"""An AG-UI upstream that sends what a buggy or hostile agent might, byte for byte: raw asyncio on a free loopback
port in a background thread, so nothing between it and the gateway tidies what it writes; and the same scripts as an
in-process AG-UI source (`--agent tests.hostile_upstream:source`), record by record. The last user message names the
script; each script is a sequence of raw writes."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from tests.support import free_port


def record(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


Script = Callable[[dict[str, Any]], Iterable["bytes | Together"]]


def _started(body: dict[str, Any]) -> bytes:
    return record({"type": "RUN_STARTED", "threadId": body["threadId"], "runId": body["runId"]})


def _finished(body: dict[str, Any], **extra: Any) -> bytes:
    return record({"type": "RUN_FINISHED", "threadId": body["threadId"], "runId": body["runId"], **extra})


def _interrupts(body: dict[str, Any], *ids: str) -> list[bytes]:
    outcome = {"type": "interrupt", "interrupts": [{"id": i, "reason": "confirm"} for i in ids]}
    return [_started(body), _finished(body, outcome=outcome)]


def _root_copies(body: dict[str, Any], copies: int) -> list[bytes]:
    """A state, then one patch of `copies` copies of its root: each doubles it."""
    patch = [{"op": "copy", "from": "", "path": f"/k{i}"} for i in range(copies)]
    snapshot = record({"type": "STATE_SNAPSHOT", "snapshot": {"seed": "x" * 64}})
    return [_started(body), snapshot, record({"type": "STATE_DELTA", "delta": patch}), _finished(body)]


class Together:
    """A mark a script yields where its run waits until `size` runs of it wait there at once (or `seconds` passed):
    runs that a test needs live together go on together, however late a loaded machine admitted one of them. Each
    process (the upstream's thread, the gateway's own for the in-process source) counts its own, on one loop."""

    def __init__(self, size: int, seconds: float = 15.0) -> None:
        self.size, self.seconds = size, seconds
        self.waiting = 0  # runs waiting at the mark now
        self._gate: asyncio.Event | None = None  # what they wait on; a new one for each group

    async def wait(self) -> None:
        if self._gate is None:
            self._gate = asyncio.Event()
        gate = self._gate
        self.waiting += 1
        if self.waiting >= self.size:
            self.waiting, self._gate = 0, None
            gate.set()
            return
        try:
            await asyncio.wait_for(gate.wait(), self.seconds)
        except TimeoutError:
            if self._gate is gate:
                self.waiting -= 1  # gave up waiting: the group goes on without it


FOUR_TOGETHER = Together(4)


def _endless(body: dict[str, Any], together: Together | None = None) -> Iterator[bytes | Together]:
    """Text without end, as far as the gateway reads it: 100,000 deltas of 1 KiB (100 MiB) at most."""
    yield _started(body)
    yield record({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
    if together is not None:
        yield together
    delta = record({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "e" * 1024})
    for _ in range(100_000):
        yield delta


SCRIPTS: dict[str, Script] = {
    "endless": _endless,
    "endless, four together": lambda b: _endless(b, FOUR_TOGETHER),  # each waits until four run, then streams
    "hello": lambda b: [
        _started(b),
        record({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
        record({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"}),
        record({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
        _finished(b),
    ],
    # 25 copies of the root: each doubles the state (2^25 times the document).
    "doubling": lambda b: _root_copies(b, 25),
    # The 900-byte patch: 21 copies of the root (the benchmark's, which a gateway without the bound survives).
    "doubling-21": lambda b: _root_copies(b, 21),
    # 1,000 copies of a 900 KB string.
    "copies": lambda b: [
        _started(b),
        record({"type": "STATE_SNAPSHOT", "snapshot": {"s": "y" * 900_000}}),
        record({"type": "STATE_DELTA", "delta": [{"op": "copy", "from": "/s", "path": f"/c{i}"} for i in range(1000)]}),
        _finished(b),
    ],
    "activity": lambda b: [
        _started(b),
        record({"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "plan", "content": {"seed": "x" * 64}}),
        record(
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "a",
                "activityType": "plan",
                "patch": [{"op": "copy", "from": "", "path": f"/k{i}"} for i in range(25)],
            }
        ),
        _finished(b),
    ],
    # 20,000 usage entries, each its own model: 1.7 MB.
    "usage": lambda b: [
        _started(b),
        _finished(b, usage=[{"provider": "p", "model": f"model-{i:05d}", "inputTokens": 1, "outputTokens": 1} for i in range(20_000)]),
    ],
    "error": lambda b: [_started(b), record({"type": "RUN_ERROR", "code": "MODEL_OVERLOADED", "message": "Try again later."})],
    "big-state": lambda b: [
        _started(b),
        record({"type": "STATE_SNAPSHOT", "snapshot": {"messages": [{"id": f"m{i}", "content": "w" * 1000} for i in range(3000)]}}),
        _finished(b),
    ],
    "duplicate-interrupts": lambda b: _interrupts(b, "same", "same"),
    "long-interrupt-id": lambda b: _interrupts(b, "i" * 1000),
    # 2.7 million empty arrays in one 8 MB event: decoding would make an object of each. Built as bytes (an in-process
    # source builds it on the gateway's own loop).
    "values": lambda b: [_started(b), b'data: {"type":"RAW","event":[' + b"[]," * 2_699_999 + b"[]]}\n\n", _finished(b)],
    # A 3 MiB event written 1 KiB at a time, then the run ends well.
    "trickle": lambda b: [
        _started(b),
        *_split(record({"type": "CUSTOM", "name": "big", "value": "z" * (3 * 1024 * 1024)}), 1024),
        _finished(b),
    ],
}


def _split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


class HostileUpstream:
    """`url` is its AG-UI route; every request gets the script its last user message names."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/agent"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.Server | None = None

    def start(self) -> HostileUpstream:
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._serve, "127.0.0.1", self.port), self.loop).result(10)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
            body = json.loads(await reader.readexactly(length))
            text = next(m["content"] for m in reversed(body["messages"]) if m.get("role") == "user")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            for chunk in SCRIPTS[text](body):
                if isinstance(chunk, Together):
                    await chunk.wait()
                    continue
                writer.write(chunk)
                await writer.drain()  # each write its own segment, as far as the peer reads them apart
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


class HostileSource:
    """The scripts as an in-process AG-UI event source: each event is one whole SSE record (the trickle's pieces are
    joined: a source hands over whole events)."""

    async def run(self, run_input: Any) -> AsyncIterator[bytes]:
        text = next(m.content for m in reversed(run_input.messages) if m.role == "user")
        pending: list[bytes] = []
        for chunk in SCRIPTS[text]({"threadId": run_input.thread_id, "runId": run_input.run_id}):
            if isinstance(chunk, Together):
                await chunk.wait()
                continue
            pending.append(chunk)
            if chunk.endswith(b"\n\n"):
                yield b"".join(pending)
                pending = []


source = HostileSource()
