"""Test clients for reattach: SSE and multiplexed WebSocket streams read record by record with their positions,
dropped at will, and attached again from the last position."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import websockets

from tests.support import parse_sse

Positioned = tuple[int, dict[str, Any]]
GRACE = {"AGUI-Reattach-Grace": "30"}


class SseStream:
    """One streaming response; `take(n)` reads n events, `rest()` reads to the end, `drop()` cuts the connection."""

    def __init__(self, response: httpx.Response, http: httpx.Client) -> None:
        self.response = response
        self.http = http
        self._records = self._iterate()

    def _iterate(self) -> Iterator[Positioned]:
        buffer = b""
        for chunk in self.response.iter_raw():
            buffer += chunk
            while b"\n\n" in buffer:
                record, buffer = buffer.split(b"\n\n", 1)
                events, _comments, ids = parse_sse(record + b"\n\n")
                for event, position in zip(events, ids, strict=True):
                    yield (int(position) if position else 0), event

    def take(self, count: int) -> list[Positioned]:
        out = []
        for item in self._records:
            out.append(item)
            if len(out) == count:
                break
        return out

    def rest(self) -> list[Positioned]:
        out = list(self._records)
        self.drop()
        return out

    def drop(self) -> None:
        self.response.close()
        self.http.close()

    def take_then_drop(self, count: int) -> list[Positioned]:
        """Read `count` events, then cut the connection mid-run (what a lost network does to a client)."""
        head = self.take(count)
        self.drop()
        assert self.response.is_closed
        return head


def open_post(url: str, body: dict, headers: dict[str, str] | None = None) -> SseStream:
    http = httpx.Client(timeout=60)
    request = http.build_request("POST", url, json=body, headers={"accept": "text/event-stream", **(headers or {})})
    response = http.send(request, stream=True)
    assert response.status_code == 200, response.read()
    return SseStream(response, http)


def open_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, SseStream | dict]:
    """(200, stream), (204, {}) or (status, error body)."""
    http = httpx.Client(timeout=60)
    response = http.send(http.build_request("GET", url, headers=headers or {}), stream=True)
    if response.status_code != 200:
        raw = response.read()
        body = json.loads(raw) if response.status_code != 204 else {}
        assert response.status_code != 204 or raw == b"", raw
        http.close()
        return response.status_code, body
    return 200, SseStream(response, http)


def events_url(base: str, body: dict, **query: str) -> str:
    params = "&".join(f"{k}={v}" for k, v in query.items())
    return f"{base}/threads/{body['threadId']}/runs/{body['runId']}/events" + (f"?{params}" if params else "")


async def ws_attach(ws_url: str, frame: dict, count: int | None = None) -> list[Positioned]:
    """Open a mux socket, send one frame (run or attach) on stream "s", read `count` events (all when None), then
    drop the socket without a closing handshake."""
    out: list[Positioned] = []
    ws = await websockets.connect(ws_url, subprotocols=["agui-mux.v1"], max_size=None)
    try:
        await ws.send(json.dumps({"id": "s", **frame}))
        while count is None or len(out) < count:
            message = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert message["id"] == "s"
            out.append((int(message.get("eventId", 0)), message["event"]))
            if count is None and message["event"]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                break
    finally:
        ws.transport.abort()  # a dead network, not a polite close
    return out


def assert_exactly_once(parts: list[list[Positioned]]) -> list[dict[str, Any]]:
    """The positions of every part, concatenated, are 1, 2, 3, … with no gap and no repeat; returns the events."""
    positioned = [item for part in parts for item in part]
    positions = [position for position, _ in positioned]
    assert positions == list(range(1, len(positions) + 1)), positions[:50]
    return [event for _, event in positioned]


def detached(gateway: Any, run_id: str) -> None:
    """Wait until the gateway itself saw the run's last follower go (it logs it as the grace window opens)."""
    gateway.wait_logged(f"run {run_id}: its last follower left")


def attach_after(base: str, body: dict, position: int) -> SseStream:
    """Attach by the GET route with `Last-Event-ID: <position>` (the run's own rosInvocationId); must succeed."""
    status, stream = open_get(events_url(base, body, rosInvocationId="inv-1"), {"last-event-id": str(position)})
    assert status == 200, stream
    assert isinstance(stream, SseStream)
    return stream
