"""Admission when Redis stalls (SIGSTOP): a lost reply never admits a run twice, and a client's retry of the same
request after a 503 (with `Last-Event-ID`, to follow its run) runs it exactly once, instead of DUPLICATE_RUN_ID
for a run that never ran."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest
import redis

from tests.support import Gateway, RedisServer, post_sse, run_body

pytestmark = pytest.mark.redis


@pytest.fixture
def stalling(tmp_path):
    server = RedisServer(tmp_path).start()
    gateway = Gateway(tmp_path, "--store", server.url, "--lease-seconds", "3", "--allowed-cwd", "/tmp").start()
    yield server, gateway
    os.kill(server.proc.pid, signal.SIGCONT)
    gateway.stop()
    server.stop()


def stall(server: RedisServer, seconds: float) -> threading.Timer:
    os.kill(server.proc.pid, signal.SIGSTOP)
    resume = threading.Timer(seconds, lambda: os.kill(server.proc.pid, signal.SIGCONT))
    resume.start()
    return resume


def fences(server: RedisServer) -> list[int]:
    db = redis.Redis(port=server.port)
    import json

    return [json.loads(db.get(key))["fence"] for key in db.scan_iter("agui:*:state")]


def test_a_reply_lost_in_a_stall_is_tried_again_without_a_second_admission(stalling):
    server, gateway = stalling
    body = run_body("after the stall")
    stall(server, 6)  # longer than one command timeout (5 s), shorter than three tries
    result = post_sse(httpx.Client(timeout=60), gateway.url + "/", body)
    assert result.status == 200 and result.terminal["outcome"] == {"type": "success"}
    assert fences(server) == [1]  # one admission, whichever try's reply came back
    assert "trying again with the same nonce" in gateway.logs()


def test_a_client_retry_after_a_503_runs_the_request_exactly_once(stalling):
    server, gateway = stalling
    body = run_body("exactly once")
    resume = stall(server, 18)  # every try times out: the client is told 503 while the stalled scripts still wait
    with httpx.Client(timeout=60) as http:
        refused = post_sse(http, gateway.url + "/", body)
        assert refused.status == 503, refused.raw
    resume.join()
    time.sleep(0.5)  # Redis runs what was queued: the first try's admission applies, orphaned
    outcomes = []
    deadline = time.monotonic() + 20
    with httpx.Client(timeout=60) as http:
        while True:
            again = post_sse(http, gateway.url + "/", body, headers={"last-event-id": "0"})
            outcomes.append(again.status)
            if again.status == 200:
                break
            assert again.status == 409 and again.raw and b"THREAD_BUSY" in again.raw, again.raw
            assert time.monotonic() < deadline
            time.sleep(0.5)
    assert again.terminal["outcome"] == {"type": "success"}
    assert "DUPLICATE_RUN_ID" not in str(outcomes)
    duplicate = post_sse(httpx.Client(timeout=60), gateway.url + "/", body)  # a plain retry: the contract's answer
    assert duplicate.status == 409 and b"DUPLICATE_RUN_ID" in duplicate.raw
    replay = post_sse(httpx.Client(timeout=60), gateway.url + "/", body, headers={"last-event-id": "0"})
    assert replay.status == 200 and replay.events == again.events  # and a retry that follows it replays the one run
