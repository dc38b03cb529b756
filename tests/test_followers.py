"""A follower's lag is its own: followers that never read neither slow a run nor its owner's stream, are cut once the
ring has trimmed past them (and attach again from their position), and a run takes a bounded number of them.
Real gateway, real sockets that stop reading."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest

from tests.reattach_client import GRACE, assert_exactly_once, events_url, open_get, open_post
from tests.support import run_body
from tests.test_websocket import ws_url

SEND_TIMEOUT = 60  # a stalled follower would be dropped by this; the owner must finish long before it


def stalled_get(url: str, path: str) -> socket.socket:
    """A GET that asks for a run's events and then never reads a byte (a tiny receive buffer fills at once)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode())
    return sock


async def stalled_mux(url: str, frame: dict):
    import websockets

    ws = await websockets.connect(url, subprotocols=["agui-mux.v1"], max_size=None, max_queue=1)
    ws.transport.pause_reading()  # the peer stops reading: the server's writes back up
    await ws.send(json.dumps({"id": "s", **frame}))
    return ws


@pytest.mark.timing
def test_followers_that_never_read_do_not_slow_the_owner(start_gateway):
    server = start_gateway("--send-timeout-seconds", str(SEND_TIMEOUT), "--event-log-max-events", "5000")
    body = run_body("/flood 60000")
    path = events_url("", body, rosInvocationId="inv-1")
    owner = open_post(server.url + "/", body, GRACE)
    head = owner.take(50)
    stalled = [stalled_get(server.url, path) for _ in range(20)]
    frame = {"op": "attach", "threadId": body["threadId"], "runId": body["runId"], "rosInvocationId": "inv-1"}
    loop = asyncio.new_event_loop()
    sockets = [loop.run_until_complete(stalled_mux(ws_url(server), frame)) for _ in range(5)]
    started = time.monotonic()
    rest = owner.rest()
    took = time.monotonic() - started
    events = assert_exactly_once([head, rest])
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
    assert took < SEND_TIMEOUT / 3, f"the owner waited {took:.1f} s for followers that never read"
    for sock in stalled:
        sock.close()
    for ws in sockets:
        ws.transport.abort()
    loop.close()


def test_a_follower_cut_behind_the_ring_ends_and_attaches_again_by_the_logs_rule(start_gateway):
    server = start_gateway()  # ring and log: 50,000 events
    body = run_body("/flood 200000")
    owner = open_post(server.url + "/", body, GRACE)
    owner.take(1)
    status, follower = open_get(events_url(server.url, body, rosInvocationId="inv-1"))
    assert status == 200
    first = follower.take(10)
    owned = owner.rest()  # the follower reads nothing meanwhile: the run goes on far past the ring's bound
    assert owned[-1][1]["type"] == "RUN_FINISHED"
    head = owned[-1][0]
    got = first + follower.rest()  # what its socket had buffered, then the end: it was cut
    assert got[-1][1]["type"] != "RUN_FINISHED", "the stalled follower was cut, not waited for"
    assert [position for position, _ in got] == list(range(1, len(got) + 1))
    assert len(got) < head - 50_000
    assert "follower cut behind its run" in server.logs()
    status, error = open_get(events_url(server.url, body, rosInvocationId="inv-1", lastEventId=str(got[-1][0])))
    assert status == 410 and error["error"]["code"] == "EVENTS_EXPIRED", "behind the log's bound too: it says so"
    status, again = open_get(events_url(server.url, body, rosInvocationId="inv-1", lastEventId=str(head - 50_000)))
    assert status == 200 and [position for position, _ in again.rest()] == list(range(head - 49_999, head + 1))


def test_a_run_takes_a_bounded_number_of_followers(start_gateway):
    server = start_gateway()
    body = run_body("/slow 30")
    owner = open_post(server.url + "/", body, GRACE)
    owner.take(1)
    path = events_url("", body, rosInvocationId="inv-1")
    held = [stalled_get(server.url, path) for _ in range(127)]  # with the owner: 128
    with httpx.Client(timeout=30) as client:
        deadline = time.monotonic() + 20
        while True:
            response = client.get(server.url + path)
            if response.status_code == 429 or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # the stalled GETs are still being admitted
        assert response.status_code == 429, response.text
        assert response.json()["error"]["code"] == "SERVICE_QUOTA_EXCEEDED"
        assert "128" in response.json()["error"]["message"]
        for sock in held[:10]:
            sock.close()
        for _ in range(100):
            with client.stream("GET", server.url + path) as stream:
                if stream.status_code == 200:
                    break
            time.sleep(0.1)
        assert stream.status_code == 200, "room again once followers left"
    for sock in held[10:]:
        sock.close()
    owner.drop()
