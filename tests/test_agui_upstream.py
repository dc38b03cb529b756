"""An AG-UI server as the gateway's agent (`--agent agui+http://...`): a scripted upstream built on the SDK
(tests/agui_upstream.py) driven through the gateway by @ag-ui/client over SSE and WebSocket with zero warnings:
chat, backend and client tools, shared state, interrupts, cancel, reattach, two replicas; and each upstream
failure with its documented code."""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid

import httpx
import pytest

from tests.reattach_client import GRACE, assert_exactly_once, detached, events_url, open_get, open_post
from tests.support import Gateway, RedisServer, post_sse
from tests.test_node_client import check_run, drive

pytestmark = pytest.mark.node
CONFIRM = {"name": "confirm", "description": "Ask", "parameters": {"type": "object"}}


@pytest.fixture(scope="module")
def upstream():
    from tests.agui_upstream import AguiUpstream

    server = AguiUpstream().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fronted(upstream, tmp_path_factory):
    server = Gateway(
        tmp_path_factory.mktemp("agui"),
        "--agent",
        "agui+" + upstream.url,
        "--agent-token",
        "upstream-token",
        "--agent-response-seconds",
        "1",
    ).start()
    yield server
    server.stop()


def plain(text: str, **extra: object) -> dict:
    body = {
        "threadId": f"t-{uuid.uuid4().hex[:10]}",
        "runId": f"r-{uuid.uuid4().hex[:6]}",
        "state": {},
        "messages": [{"id": "m-1", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "protocolVersion": "1.0",  # as @ag-ui/client 1.0 declares it
    }
    return {**body, **extra}


def texts(report: dict) -> list[str]:
    return [m["content"] for m in report["messages"] if m["role"] == "assistant" and m["content"]]


@pytest.mark.parametrize("kind", ["http", "ws"])
def test_chat_turns_carry_the_state_back_and_forth_with_zero_client_warnings(fronted, upstream, kind):
    report = drive(fronted.url, [{"message": "hello"}, {"message": "again"}], kind=kind, initialState={"theme": "dark"})
    for run in report["runs"]:
        assert check_run(run)["outcome"] == {"type": "success"}
    assert texts(report) == ["You said: hello", "You said: again"]
    assert report["state"] == {"theme": "dark", "turns": 2, "last": "again"}, "the upstream's state, through the client"
    sent = upstream.received[-1]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"], "the whole conversation went up"
    assert upstream.headers[-1]["authorization"] == "Bearer upstream-token" and upstream.headers[-1]["x-request-id"]
    assert upstream.headers[-1]["accept"] == "text/event-stream"


@pytest.mark.parametrize("kind", ["http", "ws"])
def test_backend_tools_and_a_client_tool_round_trip(fronted, upstream, kind):
    steps = [{"message": "/tool"}, {"message": "/client", "tools": [CONFIRM]}, {"toolResult": "yes", "tools": [CONFIRM]}]
    report = drive(fronted.url, steps, kind=kind)
    backend, called, continued = report["runs"]
    check_run(backend)
    assert [e["content"] for e in backend["events"] if e["type"] == "TOOL_CALL_RESULT"] == ["found 3"]
    assert check_run(called)["outcome"]["pendingToolCallIds"] == called["pendingToolCallIds"] != []
    check_run(continued)
    assert texts(report)[-1] == "the tool said yes"
    assert upstream.received[-1]["messages"][-1]["role"] == "tool" and upstream.received[-1]["tools"][0]["name"] == "confirm"


def test_an_upstream_interrupt_is_durable_and_its_resume_goes_up_as_the_next_runs_resume(fronted, upstream, client):
    body = plain("/ask")
    first = post_sse(client, fronted.url + "/", body)
    interrupt = first.terminal["outcome"]["interrupts"][0]
    assert first.terminal["outcome"]["type"] == "interrupt" and interrupt["message"] == "Proceed?"
    refused = post_sse(client, fronted.url + "/", plain("another turn", threadId=body["threadId"]))
    assert json.loads(refused.raw)["error"]["code"] == "RESUME_REQUIRED", "the gateway keeps the interrupt"
    entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"go": True}}]
    resumed = post_sse(client, fronted.url + "/", {**plain("", threadId=body["threadId"], messages=[]), "resume": entry})
    assert resumed.terminal["outcome"] == {"type": "success"}
    assert "".join(e["delta"] for e in resumed.of("TEXT_MESSAGE_CONTENT")) == 'resumed with {"go": true}'
    assert upstream.received[-1]["resume"] == [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"go": True}}]


def test_a_cancel_closes_the_upstream_request(fronted, upstream, client):
    from tests.test_cancel_and_disconnect import CANCEL

    body = plain("/slow 100")
    stream = open_post(fronted.url + "/", body)
    head = stream.take(4)
    execution = next(e["value"]["executionId"] for _, e in head if e["type"] == "CUSTOM" and e["name"] == "iac-code.session.v1")
    cancel = {"threadId": body["threadId"], "rosInvocationId": f"thread:{body['threadId']}"}
    assert client.post(f"{fronted.url}{CANCEL.format(execution)}", json=cancel).status_code == 200
    rest = stream.rest()
    assert rest[-1][1]["type"] == "RUN_FINISHED" and rest[-1][1]["outcome"] == {"type": "cancelled"}
    deadline = time.monotonic() + 5
    while body["runId"] not in upstream.disconnected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert body["runId"] in upstream.disconnected, "the upstream saw its client go"


def test_a_client_that_drops_attaches_again_and_gets_every_upstream_event_once(fronted):
    body = plain("/slow 12")
    head = open_post(fronted.url + "/", body, GRACE).take_then_drop(5)
    detached(fronted, body["runId"])
    status, stream = open_get(
        events_url(fronted.url, body, rosInvocationId=f"thread:{body['threadId']}"), {"last-event-id": str(head[-1][0])}
    )
    assert status == 200
    events = assert_exactly_once([head, stream.rest()])
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text.startswith("".join(f"tick {i} " for i in range(12))) and events[-1]["outcome"] == {"type": "success"}


@pytest.mark.redis
def test_two_replicas_on_one_redis_follow_an_upstream_run(upstream, tmp_path):
    redis_server = RedisServer(tmp_path).start()
    shared = ("--agent", "agui+" + upstream.url, "--store", redis_server.url, "--default-cwd", "/tmp")  # one workspace for all
    a = Gateway(tmp_path, *shared).start()
    b = Gateway(tmp_path, *shared).start()
    try:
        body = plain("/slow 10")
        head = open_post(a.url + "/", body, GRACE).take_then_drop(5)
        detached(a, body["runId"])
        status, stream = open_get(
            events_url(b.url, body, rosInvocationId=f"thread:{body['threadId']}"), {"last-event-id": str(head[-1][0])}
        )
        assert status == 200
        events = assert_exactly_once([head, stream.rest()])
        assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
        deadline = time.monotonic() + 5
        with httpx.Client(timeout=30) as http:  # its end is recorded just after its terminal event is sent
            while (next_turn := http.post(b.url + "/", json=plain("x", threadId=body["threadId"]))).status_code == 409:
                assert next_turn.json()["error"]["code"] == "THREAD_BUSY" and time.monotonic() < deadline, next_turn.text
                time.sleep(0.1)
        assert next_turn.status_code == 200, "the thread takes its next run on the other replica"
    finally:
        a.stop()
        b.stop()
        redis_server.stop()


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("/status 500", "AGENT_UNAVAILABLE"),
        ("/stall 3", "AGENT_UNAVAILABLE"),
        ("/status 503", "AGENT_UNAVAILABLE"),
        ("/status 400", "INVALID_INPUT"),
        ("/json", "AGENT_PROTOCOL_ERROR"),
        ("/malformed", "AGENT_PROTOCOL_ERROR"),
        ("/unknown", "AGENT_PROTOCOL_ERROR"),
        ("/truncated", "AGENT_PROTOCOL_ERROR"),
        ("/foreign", "AGENT_PROTOCOL_ERROR"),
        ("/early", "AGENT_PROTOCOL_ERROR"),
        ("/badpatch", "AGENT_PROTOCOL_ERROR"),
        ("/error", "RATE_LIMITED"),
    ],
)
def test_each_upstream_failure_has_its_code_and_the_run_ends_well_formed(fronted, client, message, code):
    result = post_sse(client, fronted.url + "/", plain(message))
    assert result.status == 200 and result.events[0]["type"] == "RUN_STARTED"
    assert result.terminal["type"] == "RUN_ERROR" and result.terminal["code"] == code, result.terminal
    if code == "INVALID_INPUT":
        assert "the upstream does not like this input" in result.terminal["message"]
    if code == "RATE_LIMITED":
        assert result.terminal["message"] == "The model is rate limited.", "the upstream's own words"
    again = post_sse(client, fronted.url + "/", plain("hello", threadId=result.events[0]["threadId"]))
    assert again.terminal["outcome"] == {"type": "success"}, "nothing is held: the thread takes its next run"


@pytest.mark.parametrize("ending", ["", "bad"])
def test_events_that_arrive_in_one_read_are_shown_in_order_up_to_the_end_or_the_break(fronted, client, ending):
    result = post_sse(client, fronted.url + "/", plain(f"/burst {ending}".strip()))
    texts = [event["delta"] for event in result.events if event["type"] == "TEXT_MESSAGE_CONTENT"]
    assert texts == ["one ", "two ", "three "], "each event of the read, once, in order; none after the upstream's end"
    if ending == "bad":
        assert result.terminal["type"] == "RUN_ERROR" and result.terminal["code"] == "AGENT_PROTOCOL_ERROR", result.terminal
    else:
        assert result.terminal["type"] == "RUN_FINISHED" and result.terminal["outcome"] == {"type": "success"}, result.terminal


def test_on_invocations_an_upstream_error_is_an_agentcore_code_with_its_own_kept(fronted, client):
    result = post_sse(client, fronted.url + "/invocations", plain("/error"))
    assert result.terminal["code"] == "AGENT_ERROR" and result.terminal["metadata"]["gatewayCode"] == "RATE_LIMITED"


def test_an_upstream_that_refuses_connections_is_unavailable(client, tmp_path):
    from tests.support import free_port

    server = Gateway(tmp_path, "--agent", f"agui+http://127.0.0.1:{free_port()}/agent").start()
    try:
        result = post_sse(client, server.url + "/", plain("hello"))
        assert result.terminal["type"] == "RUN_ERROR" and result.terminal["code"] == "AGENT_UNAVAILABLE"
    finally:
        server.stop()


def test_a_response_that_ends_after_its_run_keeps_its_connection(upstream, tmp_path):
    """The run ends with its terminal event; the rest of the upstream's response (held back 50 ms here) is read in
    the background, and the connection goes back to the pool: a later run finds one to reuse. Without that, every
    such run's connection is closed and the next opens a new one."""
    from tests.tcp_proxy import TcpProxy

    target = urllib.parse.urlsplit(upstream.url)
    with TcpProxy(target.port) as proxy:
        gateway = Gateway(tmp_path, "--agent", f"agui+{proxy.url}{target.path}").start()
        try:
            with httpx.Client(timeout=30) as client:
                reused = False
                for _ in range(40):  # each run ends before its response: a connection is free once a drain is done
                    opened = proxy.connections
                    assert post_sse(client, gateway.url + "/", plain("/linger 0.05")).terminal["type"] == "RUN_FINISHED"
                    if proxy.connections == opened:
                        reused = True
                        break
            assert reused, f"every run opened a connection of its own ({proxy.connections})"
        finally:
            gateway.stop()
