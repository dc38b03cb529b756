"""Readiness: 503 while the store does not answer (the gateway starts anyway, and says so) or while draining."""

from __future__ import annotations

import signal
import threading
import time

import httpx
import pytest

from tests.support import RedisServer, free_port, post_sse, run_body


@pytest.fixture
def own_redis(tmp_path):
    """A Redis of the test's own, to stall or starve."""
    (tmp_path / "own").mkdir()
    server = RedisServer(tmp_path / "own").start()
    yield server
    server.stop()


@pytest.mark.redis
def test_not_ready_until_redis_answers_then_ready(start_gateway, tmp_path):
    port = free_port()
    server = start_gateway("--store", f"redis://127.0.0.1:{port}/0")
    assert httpx.get(server.url + "/ready").status_code == 503
    assert httpx.get(server.url + "/health").json()["status"] == "degraded"
    assert httpx.get(server.url + "/ping").status_code == 200, "liveness never fails"
    assert "not ready (GET /ready is 503)" in server.logs()
    (tmp_path / "redis").mkdir()
    redis = RedisServer(tmp_path / "redis", port=port).start()
    try:
        deadline = time.monotonic() + 10
        while httpx.get(server.url + "/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with httpx.Client() as client:
            assert post_sse(client, server.url + "/", run_body("now ready")).terminal["outcome"]["type"] == "success"
    finally:
        redis.stop()


def test_not_ready_while_draining(start_gateway):
    server = start_gateway("--shutdown-grace-seconds", "10")
    assert httpx.get(server.url + "/ready").json() == {"status": "ready"}
    slow = threading.Thread(target=lambda: httpx.post(server.url + "/", json=run_body("/slow 3"), timeout=30), daemon=True)
    slow.start()
    server.wait_logged("run started")  # a run in flight: the drain has one to wait for
    server.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    while True:
        answer = httpx.get(server.url + "/ready")
        if answer.status_code == 503:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert answer.json() == {"status": "draining"}
    slow.join(20)


@pytest.mark.redis
def test_a_redis_that_refuses_writes_is_not_ready(own_redis, start_gateway):
    """PING still answers while Redis is out of memory; readiness probes with a real write."""
    import redis as redis_client

    server = start_gateway("--store", own_redis.url, "--lease-seconds", "3")
    assert httpx.get(server.url + "/ready").status_code == 200
    assert "shorter than a Sentinel or Cluster promotion" in server.logs()
    admin = redis_client.Redis(port=own_redis.port)
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", "1")
    assert admin.ping()
    assert httpx.get(server.url + "/ready").status_code == 503
    assert httpx.get(server.url + "/health").json()["store"]["reachable"] is False
    admin.config_set("maxmemory", "0")
    assert httpx.get(server.url + "/ready").status_code == 200


def timed_get(url: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = httpx.get(url, timeout=10)
    return answer, time.monotonic() - started


@pytest.mark.redis
@pytest.mark.timing
def test_a_hung_redis_is_reported_within_a_second_and_liveness_never_waits_for_it(own_redis, start_gateway):
    import os

    server = start_gateway("--store", own_redis.url)
    assert httpx.get(server.url + "/ready").status_code == 200
    os.kill(own_redis.proc.pid, signal.SIGSTOP)
    try:
        for _ in range(3):  # a probe still hanging is shared, never stacked
            for path, status in (("/ready", 503), ("/health", 200), ("/ping", 200)):
                answer, took = timed_get(server.url + path)
                assert answer.status_code == status and took < 1.0, (path, answer.status_code, took)
        assert httpx.get(server.url + "/health").json()["status"] == "degraded"
    finally:
        os.kill(own_redis.proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + 10
    while httpx.get(server.url + "/ready").status_code != 200:
        assert time.monotonic() < deadline, "ready again once Redis answers"
        time.sleep(0.2)


@pytest.mark.redis
@pytest.mark.timing
def test_replicated_durability_without_a_replica_is_not_ready(own_redis, start_gateway):
    """Every admission would be refused (no replica acknowledges the write): readiness says so too."""
    server = start_gateway("--store", own_redis.url, "--redis-durability", "replicated")
    answer, took = timed_get(server.url + "/ready")
    assert answer.status_code == 503 and took < 1.0, (answer.status_code, took)
    with httpx.Client(timeout=30) as client:
        assert post_sse(client, server.url + "/", run_body("refused")).status == 503
