"""How a short run's SSE response (and its WebSocket frames) reaches the socket, counted by the server's own write
calls (`syscw` of /proc/<pid>/task/<pid>/io, the event loop's thread: uvloop writes a stream socket with write or
writev, and the file store writes its files from a thread of its own): with few runs in flight its first event goes
out at once, ahead of the rest; on a busy process (BUSY_RUNS in flight) the response waits one turn of the loop and
goes out whole in one write. On a store that waits (the file store) the run's last events wait for its end to be
recorded and leave with it. Two writes are checked as a bound (a stray write of the process must not fail it; a
response sent event by event, twenty writes and more, does); one write stays exact, being the point. The gateway runs with warnings only and a long heartbeat, so that nothing else of it
writes while a run is counted."""

from __future__ import annotations

import json
import socket

import pytest
import websockets

from tests.support import Gateway, assert_well_formed_run, dechunk, parse_sse, raw_run_request, read_chunked_response, run_body
from transports.sse_response import BUSY_RUNS


def _writes(gateway: Gateway) -> int:
    assert gateway.proc is not None
    with open(f"/proc/{gateway.proc.pid}/task/{gateway.proc.pid}/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("syscw:"))


def _flood(gateway: Gateway) -> tuple[list[dict], int]:
    """A /flood 20 run read to its end; its events and the write calls the server made meanwhile."""
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        before = _writes(gateway)
        sock.sendall(raw_run_request(gateway.port, "/flood 20"))
        raw = read_chunked_response(sock)
        written = _writes(gateway) - before
    events, _, _ = parse_sse(dechunk(raw))
    return events, written


@pytest.fixture(params=["memory", "file"])
def quiet_gateway(tmp_path, request):
    # The last --log-level given wins: warnings only, so that no log line is written while a run is counted.
    store = ["--store", "memory"] if request.param == "memory" else ["--store", "file", "--state-dir", str(tmp_path / "state")]
    server = Gateway(tmp_path, *store, "--heartbeat-seconds", "60", "--allowed-cwd", "/tmp", "--log-level", "warning")
    yield server.start()
    server.stop()


@pytest.mark.timing
def test_an_idle_process_sends_a_runs_first_event_before_the_rest(quiet_gateway):
    events, written = _flood(quiet_gateway)
    assert_well_formed_run(events)
    assert len([e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]) == 20
    # Two here (the head with RUN_STARTED at once, then the rest with the response's end); a bound, not a count, so
    # that a stray write of the process (a late log flush) cannot fail it, while 22 events sent one by one would.
    assert 2 <= written <= 4, f"the head with RUN_STARTED at once, then the rest with the response's end: {written} writes"


@pytest.mark.timing
def test_a_busy_process_sends_a_short_run_whole_in_one_write(quiet_gateway):
    sleepers = []
    try:
        for _ in range(BUSY_RUNS):
            sock = socket.create_connection(("127.0.0.1", quiet_gateway.port))
            sock.sendall(raw_run_request(quiet_gateway.port, "/sleep 60"))
            assert b"RUN_STARTED" in sock.recv(65536)
            sleepers.append(sock)
        events, written = _flood(quiet_gateway)
        assert_well_formed_run(events)
        assert len([e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]) == 20
        assert written == 1, f"the head, every event and the response's end in one write: {written} writes"
    finally:
        for sock in sleepers:
            sock.close()


@pytest.mark.timing
async def test_a_websocket_run_leaves_in_two_writes_on_every_store(quiet_gateway):
    """Over /ws a run's events leave once per turn of the loop: RUN_STARTED as the run is admitted, then the rest
    with its end, on the file store too (its last events wait for the journal with the end)."""
    async with websockets.connect(quiet_gateway.url.replace("http://", "ws://") + "/ws") as ws:
        for number in range(3):
            body = run_body("/flood 20")
            body["threadId"] = f"ws-writes-{number}"
            before = _writes(quiet_gateway)
            await ws.send(json.dumps(body))
            events: list[dict] = []
            while not events or events[-1]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
                events.append(json.loads(await ws.recv()))
            written = _writes(quiet_gateway) - before
            assert_well_formed_run(events)
            assert len([e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]) == 20
            assert 2 <= written <= 4, f"RUN_STARTED, then every other event with the end: {written} writes"
