"""A burst of new connections that reaches a busy gateway (its loop's turns made long by /flood runs being read) is
accepted in one turn (server/accept_burst.py), not one connection a turn, and served like any other: every run
whole, every connection's count released when it closes, so the per-client cap still admits as many again."""

from __future__ import annotations

import selectors
import socket
import threading

import pytest

from tests.support import Gateway, assert_well_formed_run, dechunk, parse_sse, raw_run_request, read_chunked_response

BURST = 40
LOAD = 50  # /flood runs in flight, read as fast as they come: every turn of the loop takes 256 events of each


class Load:
    """LOAD long /flood runs, drained by a thread of their own until closed (their runs end with their clients)."""

    def __init__(self, port: int) -> None:
        self.sockets = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(LOAD)]
        self.flowing = threading.Event()
        self.stop = threading.Event()
        for sock in self.sockets:
            sock.sendall(raw_run_request(port, "/flood 1000000"))
            sock.setblocking(False)
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        selector = selectors.DefaultSelector()
        for sock in self.sockets:
            selector.register(sock, selectors.EVENT_READ)
        received = 0
        while not self.stop.is_set():
            for key, _ in selector.select(0.1):
                try:
                    received += len(key.fileobj.recv(1 << 20))  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
            if received > LOAD * 100_000:
                self.flowing.set()
        selector.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        for sock in self.sockets:
            sock.close()


def _burst(gateway: Gateway) -> None:
    """BURST connections opened at once (the kernel queues each), then a short run on each, read to its end."""
    sockets = [socket.create_connection(("127.0.0.1", gateway.port), timeout=30) for _ in range(BURST)]
    try:
        for sock in sockets:
            sock.sendall(raw_run_request(gateway.port, "/flood 5"))
        for sock in sockets:
            events, _, _ = parse_sse(dechunk(read_chunked_response(sock)))
            assert_well_formed_run(events)
            assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"]["type"] == "success"
            assert len([event for event in events if event["type"] == "TEXT_MESSAGE_CONTENT"]) == 5
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize(("store", "http"), [("memory", "httptools"), ("file", "httptools"), ("memory", "h11")])
@pytest.mark.timing
def test_a_burst_of_connections_to_a_busy_gateway_is_accepted_at_once_and_served(tmp_path, store, http):
    # A cap just above the load and one burst: the second burst is admitted only if the first one's connections
    # were all counted out as they closed, on whichever path they were accepted.
    cap = LOAD + BURST + 5
    gateway = Gateway(tmp_path, "--store", store, "--http", http, "--allowed-cwd", "/tmp", "--max-connections-per-client", str(cap)).start()
    load = Load(gateway.port)
    try:
        assert load.flowing.wait(30), "the load's runs did not stream"
        _burst(gateway)
        _burst(gateway)
    finally:
        load.close()
        gateway.stop()
    # Each burst, or most of it, in one turn (a 429 of the cap would have failed a run's read above).
    assert gateway.logs().count("connections of a burst in one turn") >= 2
