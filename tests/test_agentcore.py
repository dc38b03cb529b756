"""AgentCore runtime contract: /invocations error serialization for every §7.2 code, session header, load shedding."""

from __future__ import annotations

import json
import threading
import time

import httpx

from gateway.engine.caller import Caller, thread_key
from tests.issuer import Issuer
from tests.support import RedisServer, corrupt_thread, post_sse, run_body

SESSION = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"


def sse_error(result, code: str, status: int) -> dict:
    assert result.status == status, result.raw
    assert result.headers["content-type"].startswith("text/event-stream")
    assert result.raw.startswith(b"data: ") and result.raw.endswith(b"\n\n")
    assert len(result.events) == 1 and result.events[0]["type"] == "RUN_ERROR"
    assert result.events[0]["code"] == code and result.events[0]["message"]
    return result.events[0]


def test_every_agentcore_code_is_reachable_on_invocations(start_gateway, client, tmp_path):
    issuer = Issuer()
    issuer.add_key("k1")
    try:
        server = start_gateway(
            "--oauth-jwks-url",
            issuer.issuer + "/jwks",
            "--oauth-issuer",
            issuer.issuer,
            "--oauth-scope",
            "agui.run",
            "--oauth-audience",
            "api://agui",
            "--public-url",
            "{url}",
            "--rate-limit",
            "3/m",
            "--max-concurrent-runs",
            "1",
        )
        url = server.url + "/invocations"
        auth = {"authorization": f"Bearer {issuer.token()}"}
        sse_error(post_sse(client, url, run_body("x")), "UNAUTHORIZED", 401)
        sse_error(
            post_sse(client, url, run_body("x"), headers={"authorization": f"Bearer {issuer.token(scope='openid')}"}), "ACCESS_DENIED", 403
        )
        sse_error(post_sse(client, url, run_body("x", iac={"schemaVersion": 1}), headers=auth), "VALIDATION_ERROR", 400)
        failed = post_sse(client, url, run_body("/fail"), headers=auth)
        assert failed.status == 200 and failed.terminal["code"] == "AGENT_ERROR"
        assert post_sse(client, url, run_body("x"), headers=auth).status == 200  # the third of 3/m
        sse_error(post_sse(client, url, run_body("x"), headers=auth), "RATE_LIMIT_EXCEEDED", 429)
        limited = post_sse(client, url, run_body("x"), headers=auth)
        assert int(limited.headers["retry-after"]) >= 1
        # A fresh caller (another subject) for the rest.
        other = {"authorization": f"Bearer {issuer.token(sub='user-2')}"}
        body = run_body("/slow 2")
        holder: dict = {}
        worker = threading.Thread(target=lambda: holder.update(r=post_sse(httpx.Client(), url, body, headers=other)))
        worker.start()
        deadline = time.monotonic() + 5
        while client.get(server.url + "/health").json()["runsInFlight"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        third = {"authorization": f"Bearer {issuer.token(sub='user-3')}"}
        event = sse_error(post_sse(client, url, run_body("x"), headers=third), "SERVICE_QUOTA_EXCEEDED", 429)
        assert event["metadata"]["gatewayCode"] == "SERVICE_QUOTA_EXCEEDED"
        worker.join()
        assert holder["r"].terminal["outcome"]["type"] == "success"
        busy_body = run_body("first", thread="agentcore-thread")
        assert post_sse(client, url, busy_body, headers=third).status == 200
        event = sse_error(post_sse(client, url, busy_body, headers=third), "SESSION_BUSY", 409)
        assert event["metadata"]["gatewayCode"] == "DUPLICATE_RUN_ID"
        fourth = {"authorization": f"Bearer {issuer.token(sub='user-4')}"}
        key = thread_key(Caller(owner=f"oauth:{issuer.issuer}:sub:user-4"), "agentcore-thread")  # threads are per principal
        server.stop()
        corrupt_thread(server.state_dir, key)
        server.start()
        event = sse_error(post_sse(client, url, run_body("x", thread="agentcore-thread"), headers=fourth), "INTERNAL_ERROR", 500)
        assert event["metadata"]["gatewayCode"] == "STATE_PERSISTENCE_FAILED"
    finally:
        issuer.close()


def test_session_header_is_read_echoed_and_never_required(gateway, client):
    plain = post_sse(client, gateway.url + "/invocations", run_body("hi"))
    assert plain.status == 200 and SESSION not in plain.headers
    result = post_sse(client, gateway.url + "/invocations", run_body("hi"), headers={SESSION: "sess-123", "X-Amzn-RequestId": "req-9"})
    assert result.headers[SESSION] == "sess-123" and result.headers["x-amzn-requestid"] == "req-9"
    assert result.custom("iac-code.session.v1")[0]["runtimeSessionId"] == "sess-123"
    refused = post_sse(client, gateway.url + "/invocations", run_body("x", iac={"schemaVersion": 1}), headers={SESSION: "sess-123"})
    assert refused.headers[SESSION] == "sess-123"
    assert "runtime_session=sess-123" in gateway.logs()


def test_load_shedding_beyond_the_cap(start_gateway):
    server = start_gateway("--max-concurrent-runs", "2")
    results: list = []

    def run(index: int) -> None:
        with httpx.Client(timeout=30) as http:
            results.append(post_sse(http, server.url + "/", run_body("/slow 1")))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(r.status for r in results)
    assert statuses.count(200) >= 2 and set(statuses) <= {200, 429}, statuses
    assert statuses.count(429) >= 1
    for r in results:
        if r.status == 429:
            assert json.loads(r.raw)["error"]["code"] == "SERVICE_QUOTA_EXCEEDED" and r.headers["retry-after"] == "1"
        else:
            assert r.terminal["outcome"]["type"] == "success"


def test_rate_limit_is_shared_across_replicas(start_gateway, tmp_path, client):
    redis_server = RedisServer(tmp_path).start()
    try:
        a = start_gateway("--store", redis_server.url, "--rate-limit", "4/m", env={"AGUI_GATEWAY_AUTH_TOKEN": "tok"})
        b = start_gateway("--store", redis_server.url, "--rate-limit", "4/m", env={"AGUI_GATEWAY_AUTH_TOKEN": "tok"})
        auth = {"authorization": "Bearer tok"}
        statuses = [post_sse(client, (a if i % 2 else b).url + "/", run_body("x"), headers=auth).status for i in range(6)]
        assert statuses == [200, 200, 200, 200, 429, 429]
        limited = post_sse(client, a.url + "/", run_body("x"), headers=auth)
        assert json.loads(limited.raw)["error"]["code"] == "RATE_LIMIT_EXCEEDED" and int(limited.headers["retry-after"]) >= 1
    finally:
        redis_server.stop()
