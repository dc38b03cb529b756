"""Partitions and pauses against real gateways on one Redis: a replica cut off from Redis (a TCP proxy of the
test's own holds every byte, as a blackholed route does) or paused past its lease stops acting before another
replica can take its thread, never tells its client an end the store does not hold, and never touches an A2A
task another replica adopts. Every client event is stamped on arrival; the clocks are this host's."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any

import httpx
import pytest
import redis

from tests.a2a_agent import live_agent
from tests.reattach_client import GRACE, assert_exactly_once, attach_after, open_post
from tests.support import Gateway, RedisServer, assert_well_formed_run, run_body
from tests.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.redis]
LEASE = "3"
STOPPED = {"STATE_PERSISTENCE_FAILED", "EXECUTION_LOST"}


class Stamped:
    """A run's SSE stream read in a thread; each event with the monotonic time it arrived."""

    def __init__(self, url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self.stream = open_post(url, body, headers)
        self.events: list[tuple[float, int, dict[str, Any]]] = []
        self.first = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for position, event in self.stream._records:
                self.events.append((time.monotonic(), position, event))
                if event["type"] == "TEXT_MESSAGE_CONTENT":
                    self.first.set()
        except httpx.HTTPError:
            pass

    def deltas(self) -> list[tuple[float, dict[str, Any]]]:
        return [(at, event) for at, _, event in self.events if event["type"] == "TEXT_MESSAGE_CONTENT"]

    def wait(self, seconds: float) -> None:
        self.thread.join(seconds)
        assert not self.thread.is_alive(), f"the stream did not end within {seconds} s"
        self.stream.drop()

    def terminal(self) -> dict[str, Any] | None:
        ends = [event for _, _, event in self.events if event["type"] in ("RUN_FINISHED", "RUN_ERROR")]
        return ends[-1] if ends else None


def admit_when_free(url: str, thread: str, limit: float = 20) -> float:
    """Post a short run on the thread until one is admitted; the moment its answer began (it was admitted before)."""
    deadline = time.monotonic() + limit
    with httpx.Client(timeout=30) as http:
        while time.monotonic() < deadline:
            with http.stream("POST", url + "/", json=run_body("hello", thread=thread), headers={"accept": "text/event-stream"}) as answer:
                if answer.status_code == 200:
                    admitted = time.monotonic()
                    text = answer.read().decode()
                    assert '"RUN_FINISHED"' in text, text[-500:]
                    return admitted
                assert answer.status_code in (409, 503), answer.read()
            time.sleep(0.05)
    raise AssertionError("the thread was never free on the other replica")


def recorded(server: RedisServer) -> dict[str, str]:
    """Every execution the store holds: id -> status."""
    db = redis.Redis(port=server.port)
    out: dict[str, str] = {}
    for key in db.scan_iter("agui:*:state"):
        document = json.loads(db.get(key))
        for execution in [*(document.get("history") or []), document.get("execution") or {}]:
            if execution.get("execution_id"):
                out[execution["execution_id"]] = execution.get("status", "")
    return out


def executions(stream: Stamped) -> set[str]:
    return {e["value"]["executionId"] for _, _, e in stream.events if e["type"] == "CUSTOM" and e["name"] == "iac-code.session.v1"}


def assert_silent_since(stream: Stamped, admitted: float, who: str) -> None:
    """No delta reached the client once the other replica had admitted a run on the thread."""
    late = [event["delta"] for at, event in stream.deltas() if at >= admitted]
    assert late == [], f"{who} streamed {late} after the other admitted a run on the thread"


def assert_stopped(stream: Stamped) -> None:
    """The run ended with the error of a replica that could not keep or record it, never with its own end."""
    end = stream.terminal()
    assert end is not None and end["type"] == "RUN_ERROR" and end["code"] in STOPPED, end


def assert_store_agrees(server: RedisServer, *streams: Stamped) -> None:
    """What the client heard is what the store holds: its execution is recorded completed if, and only if, the client
    heard success (a stopped run's client heard an error: the store must not hold a success it was never told)."""
    held = recorded(server)
    for stream in streams:
        end = stream.terminal()
        succeeded = end is not None and end["type"] == "RUN_FINISHED" and end.get("outcome", {}).get("type") == "success"
        heard = executions(stream)
        assert heard, "the client was told its execution"
        for execution in heard:
            assert (held.get(execution) == "completed") == succeeded, (execution, held, end)


@pytest.fixture
def split(tmp_path):
    """Replica A reaches Redis through the proxy; replica B directly."""
    server = RedisServer(tmp_path).start()
    proxy = TcpProxy(server.port).__enter__()

    def start(store: str, *extra: str) -> Gateway:
        return Gateway(tmp_path, "--store", store, "--lease-seconds", LEASE, "--allowed-cwd", "/tmp", *extra).start()

    class Split:
        def __init__(self) -> None:
            self.server, self.proxy, self.start = server, proxy, start
            self.gateways: list[Gateway] = []

        def pair(self, *extra: str) -> tuple[Gateway, Gateway]:
            a = start(f"redis://127.0.0.1:{proxy.port}", *extra)
            b = start(server.url, *extra)
            self.gateways += [a, b]
            return a, b

    split = Split()
    yield split
    proxy.release()
    for gateway in split.gateways:
        os.kill(gateway.proc.pid, signal.SIGCONT)
        gateway.stop()
    proxy.__exit__(None, None, None)
    server.stop()


def test_a_replica_cut_off_from_redis_stops_streaming_before_another_takes_the_thread(split):
    a, b = split.pair()
    body = run_body("/slow 30")
    cut_off = Stamped(a.url + "/", body)
    assert cut_off.first.wait(10)
    split.proxy.hold()
    admitted = admit_when_free(b.url, body["threadId"])
    cut_off.wait(20)
    assert_silent_since(cut_off, admitted, "the cut-off replica")
    assert_stopped(cut_off)
    split.proxy.release()
    time.sleep(1)
    assert_store_agrees(split.server, cut_off)


def test_a_run_that_ends_during_a_partition_never_reports_success_the_store_does_not_hold(split):
    a, _ = split.pair()
    body = run_body("/slow 2")
    cut_off = Stamped(a.url + "/", body)
    assert cut_off.first.wait(10)
    split.proxy.hold()
    cut_off.wait(20)
    assert_stopped(cut_off)
    split.proxy.release()
    time.sleep(1)
    assert_store_agrees(split.server, cut_off)


def test_an_owner_paused_past_its_lease_streams_nothing_once_awake(split):
    a, b = split.pair()
    body = run_body("/slow 30")
    paused = Stamped(a.url + "/", body)
    assert paused.first.wait(10)
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        admitted = admit_when_free(b.url, body["threadId"])
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    paused.wait(20)
    assert_silent_since(paused, admitted, "the woken owner")
    assert_stopped(paused)
    assert_store_agrees(split.server, paused)


agent = pytest.fixture(scope="module", name="agent")(live_agent)


@pytest.mark.a2a
def test_a_cut_off_owner_of_an_a2a_run_leaves_its_task_to_the_adopter(split, agent):
    a, b = split.pair("--agent", "a2a+" + agent.url, "--heartbeat-seconds", "0.5")
    cancels_before = len([c for c in agent.calls if c["method"] == "CancelTask"])
    body = run_body("long 60")
    cut_off = Stamped(a.url + "/", body, GRACE)
    assert cut_off.first.wait(10)
    position = cut_off.events[-1][1]
    in_log = attach_after(b.url, body, position - 1)  # B reads the shared log only: what A streamed is in it
    assert [at for at, _ in in_log.take(1)] == [position]
    in_log.drop()
    split.proxy.hold()
    cut_off.wait(20)  # A stops without touching the task: its stream ends for the client to reattach
    assert cut_off.terminal() is None, "no end of its own: the run goes on elsewhere"
    head = [(position, event) for _, position, event in cut_off.events]
    rest_stream = attach_after(b.url, body, head[-1][0])
    rest = rest_stream.rest()
    events = assert_exactly_once([head, rest])
    assert_well_formed_run(events)
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}, events[-1]
    said = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert said == "".join(f"w{index} " for index in range(60)), "every word once"
    split.proxy.release()
    time.sleep(1.5)  # whatever A still had to say to the agent or the store would have been said now
    assert len([c for c in agent.calls if c["method"] == "CancelTask"]) == cancels_before, "nobody cancelled the task"
