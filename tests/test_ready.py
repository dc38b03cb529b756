"""Readiness: 503 while the store does not answer (the gateway starts anyway, and says so) or while draining."""

from __future__ import annotations

import signal
import threading
import time

import httpx
import pytest

from tests.support import RedisServer, free_port, post_sse, run_body


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
    time.sleep(0.5)
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
def test_a_redis_that_refuses_writes_is_not_ready(start_gateway, tmp_path):
    """PING still answers while Redis is out of memory; readiness probes with a real write."""
    import redis as redis_client

    (tmp_path / "oom").mkdir()
    redis = RedisServer(tmp_path / "oom").start()
    try:
        server = start_gateway("--store", redis.url, "--lease-seconds", "3")
        assert httpx.get(server.url + "/ready").status_code == 200
        assert "shorter than a Sentinel or Cluster promotion" in server.logs()
        admin = redis_client.Redis(port=redis.port)
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", "1")
        assert admin.ping()
        assert httpx.get(server.url + "/ready").status_code == 503
        assert httpx.get(server.url + "/health").json()["store"]["reachable"] is False
        admin.config_set("maxmemory", "0")
        assert httpx.get(server.url + "/ready").status_code == 200
    finally:
        redis.stop()
