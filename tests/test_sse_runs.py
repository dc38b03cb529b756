"""Runs over SSE against a real server: plain text, reasoning, /slow, /sleep with heartbeat, /flood, /fail."""

from __future__ import annotations

import http.client
import json

import pytest

from tests.support import assert_well_formed_run, ext, parse_sse, post_sse, run_body

ENDPOINTS = ["/", "/invocations"]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_plain_text_run_streams_an_echo_with_usage(gateway, client, path):
    body = run_body("hello gateway", parentRunId="parent-1")
    result = post_sse(client, gateway.url + path, body)
    assert result.status == 200
    assert result.headers["content-type"].startswith("text/event-stream")
    assert_well_formed_run(result.events)
    assert result.events[0]["parentRunId"] == "parent-1"
    text = "".join(e["delta"] for e in result.of("TEXT_MESSAGE_CONTENT"))
    assert text == "You said: hello gateway"
    assert len(result.of("TEXT_MESSAGE_CONTENT")) > 1, "the answer is streamed as several deltas"
    assert not result.of("REASONING_START")
    finished = result.terminal
    assert finished["outcome"] == {"type": "success"}
    assert finished["usage"][0]["totalTokens"] == finished["usage"][0]["inputTokens"] + finished["usage"][0]["outputTokens"]
    sessions = result.custom("iac-code.session.v1")
    assert len(sessions) == 1
    assert sessions[0]["threadId"] == body["threadId"] and sessions[0]["aguiRunId"] == body["runId"]
    assert sessions[0]["rosInvocationId"] == "inv-1" and sessions[0]["executionId"].startswith("exec-")


@pytest.mark.parametrize("path", ENDPOINTS)
def test_reasoning_comes_first_when_thinking_is_enabled(gateway, client, path):
    result = post_sse(client, gateway.url + path, run_body("think", iac=ext(thinking={"enabled": True, "budget": 100})))
    assert_well_formed_run(result.events)
    types = result.types()
    assert types.index("REASONING_START") < types.index("REASONING_END") < types.index("TEXT_MESSAGE_START")
    assert types.index("REASONING_MESSAGE_START") < types.index("REASONING_MESSAGE_CONTENT") < types.index("REASONING_MESSAGE_END")


@pytest.mark.parametrize("path", ENDPOINTS)
def test_fail_ends_with_run_error(gateway, client, path):
    result = post_sse(client, gateway.url + path, run_body("/fail"))
    assert result.status == 200
    assert_well_formed_run(result.events)
    error = result.terminal
    assert error["type"] == "RUN_ERROR"
    if path == "/":
        assert error["code"] == "A2A_EXECUTION_FAILED"
    else:
        assert error["code"] == "AGENT_ERROR" and error["metadata"]["gatewayCode"] == "A2A_EXECUTION_FAILED"


def test_flood_streams_every_delta_in_order(gateway, client):
    result = post_sse(client, gateway.url + "/", run_body("/flood 5000"))
    assert_well_formed_run(result.events)
    assert len(result.of("TEXT_MESSAGE_CONTENT")) == 5000
    assert result.terminal["outcome"]["type"] == "success"


def test_slow_streams_one_delta_per_second(gateway, client):
    """Each delta is written when the agent makes it, not gathered to the end: the two arrive a second apart (a lower
    bound, which a loaded machine only widens)."""
    import time

    from tests.test_cancel_and_disconnect import open_stream

    http, response, records = open_stream(gateway.url, run_body("/slow 2"))
    try:
        arrivals, events = [], []
        for event in records:
            events.append(event)
            if event["type"] == "TEXT_MESSAGE_CONTENT":
                arrivals.append(time.monotonic())
    finally:
        response.close()
        http.close()
    assert_well_formed_run(events)
    assert [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["tick 1 ", "tick 2 "]
    assert arrivals[1] - arrivals[0] >= 0.8, arrivals


def test_sleep_is_kept_alive_by_heartbeat_comments(gateway, client):
    result = post_sse(client, gateway.url + "/", run_body("/sleep 1.6"))
    assert_well_formed_run(result.events)
    assert result.comments and set(result.comments) == {": heartbeat"}
    assert b": heartbeat\n\n" in result.raw
    assert "".join(e["delta"] for e in result.of("TEXT_MESSAGE_CONTENT")) == "Awake."


def test_image_parts_are_accepted_inline(gateway, client):
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    content = [{"type": "text", "text": "look"}, {"type": "image", "source": {"type": "data", "value": png, "mimeType": "image/png"}}]
    result = post_sse(client, gateway.url + "/", run_body(messages=[{"id": "m1", "role": "user", "content": content}]))
    assert_well_formed_run(result.events)
    assert "with 1 image(s)" in "".join(e["delta"] for e in result.of("TEXT_MESSAGE_CONTENT"))


def test_history_with_other_roles_and_unknown_fields_is_accepted(gateway, client):
    messages = [
        {"id": "s", "role": "system", "content": "be nice"},
        {"id": "a", "role": "assistant", "content": "hi", "toolCalls": []},
        {"id": "u", "role": "user", "content": "second"},
    ]
    result = post_sse(client, gateway.url + "/", run_body(messages=messages, somethingNew={"x": 1}))
    assert result.status == 200
    assert "".join(e["delta"] for e in result.of("TEXT_MESSAGE_CONTENT")) == "You said: second"


def test_ping_and_health(gateway, client):
    ping = client.get(gateway.url + "/ping").json()
    assert ping["status"] == "Healthy" and isinstance(ping["time_of_last_update"], int)
    health = client.get(gateway.url + "/health").json()
    assert health["protocolVersion"] == "1.0"
    assert health["extensions"]["iac-code"]["schemaVersion"] == 1
    assert health["store"] == {"kind": "file", "reachable": True}
    assert health["version"]


@pytest.mark.parametrize("path", ["/invocations", "/invocations/"])
def test_the_fast_path_and_the_routed_path_answer_alike(gateway, client, path):
    """`/invocations` and `/invocations/` name the one route the fast path serves (transports/fast_path.py): the
    same stream, the same request id echo, the same refusal."""
    result = post_sse(client, gateway.url + path, run_body("hello both"), headers={"x-request-id": "req-fast-1"})
    assert result.status == 200 and result.headers["x-request-id"] == "req-fast-1"
    assert_well_formed_run(result.events)
    assert "".join(e["delta"] for e in result.of("TEXT_MESSAGE_CONTENT")) == "You said: hello both"
    refused = client.post(gateway.url + path, content=b"{", headers={"content-type": "application/json", "x-request-id": "req-fast-2"})
    assert refused.status_code == 400 and refused.headers["x-request-id"] == "req-fast-2"
    assert refused.headers["content-type"].startswith("text/event-stream") and '"type":"RUN_ERROR"' in refused.text


@pytest.mark.parametrize("store", ["file", "memory"])
def test_one_connection_carries_runs_one_after_another_and_a_close_is_honoured(gateway, start_gateway, store):
    """Once a stream's response has started, the request's headers are cleared from the scope the server keeps for
    the connection (transports/lean.py forget_request): the same connection still serves the next request, and a
    client's `Connection: close`, read at the response's start, is still honoured. On the memory store the head
    goes out with RUN_STARTED; on the file store RUN_STARTED waits for the log, and the head goes out alone."""
    server = gateway if store == "file" else start_gateway("--store", "memory")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    sockets = []
    try:
        # A response ends in the write of its terminal event, RUN_FINISHED or RUN_ERROR: the next one follows it.
        for text in ("first", "/fail", "second"):
            conn.request("POST", "/", body=json.dumps(run_body(text)), headers=headers)
            sockets.append(conn.sock)
            response = conn.getresponse()
            events, _, _ = parse_sse(response.read())
            assert response.status == 200 and response.getheader("connection") is None
            assert_well_formed_run(events)
            if text == "/fail":
                assert events[-1]["type"] == "RUN_ERROR"
                continue
            assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == f"You said: {text}"
        assert sockets[0] is sockets[1] is sockets[2], "every run came on the same connection"
        conn.request("POST", "/", body=json.dumps(run_body("last")), headers={**headers, "connection": "close"})
        response = conn.getresponse()
        events, _, _ = parse_sse(response.read())
        assert response.getheader("connection") == "close"
        assert events[-1]["type"] == "RUN_FINISHED"
        assert conn.sock is None or conn.sock.recv(1) == b"", "the server closed the connection"
    finally:
        conn.close()
