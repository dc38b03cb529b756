"""A burst of new connections, queued by the kernel while the gateway could not accept them (SIGSTOP), is accepted
in one turn of its loop (server/accept_burst.py) and served like any other: every run whole, every connection's
count released when it closes, so the per-client cap still admits as many again."""

from __future__ import annotations

import os
import signal
import socket

import pytest

from tests.support import Gateway, assert_well_formed_run, dechunk, parse_sse, raw_run_request

BURST = 40


def _read_response(sock: socket.socket) -> list[dict]:
    raw = b""
    while not raw.endswith(b"0\r\n\r\n"):
        chunk = sock.recv(65536)
        assert chunk, "the connection closed before the response ended"
        raw += chunk
    events, _, _ = parse_sse(dechunk(raw))
    return events


def _burst(gateway: Gateway) -> None:
    """BURST connections made while the gateway is stopped, then a /flood run on each, read to its end."""
    assert gateway.proc is not None
    os.kill(gateway.proc.pid, signal.SIGSTOP)
    try:
        sockets = [socket.create_connection(("127.0.0.1", gateway.port), timeout=30) for _ in range(BURST)]
    finally:
        os.kill(gateway.proc.pid, signal.SIGCONT)
    try:
        for sock in sockets:
            sock.sendall(raw_run_request(gateway.port, "/flood 5"))
        for sock in sockets:
            events = _read_response(sock)
            assert_well_formed_run(events)
            assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"]["type"] == "success"
            assert len([event for event in events if event["type"] == "TEXT_MESSAGE_CONTENT"]) == 5
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize("store", ["memory", "file"])
def test_a_burst_of_connections_is_accepted_at_once_and_served(tmp_path, store):
    # A cap just above one burst: a second burst is admitted only if the first one's connections were all counted
    # out as they closed, on whichever path they were accepted.
    gateway = Gateway(tmp_path, "--store", store, "--allowed-cwd", "/tmp", "--max-connections-per-client", str(BURST + 5)).start()
    try:
        _burst(gateway)
        _burst(gateway)
    finally:
        gateway.stop()
    # Each burst in one turn (a 429 of the cap would have failed its run's read above).
    assert gateway.logs().count("connections of a burst in one turn") == 2
