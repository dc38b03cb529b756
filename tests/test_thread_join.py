"""Thread join: `GET /threads/{threadId}/events` and the mux `connect` op give a thread's newest run, replayed from
its log and then followed live; @ag-ui/client's connectAgent() works through the WebSocketAgent (a chat page that
opens on a thread), after a reload and after the gateway restarted."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import websockets

from tests.reattach_client import GRACE, assert_exactly_once, open_get, open_post
from tests.support import Gateway, ext, post_sse, run_body


def thread_url(base: str, thread_id: str, **query: str) -> str:
    params = "&".join(f"{k}={v}" for k, v in query.items())
    return f"{base}/threads/{thread_id}/events" + (f"?{params}" if params else "")


def test_a_thread_with_no_run_answers_204(gateway):
    status, body = open_get(thread_url(gateway.url, f"nobody-{uuid.uuid4().hex[:6]}"))
    assert status == 204 and body == {}


def test_joining_a_thread_replays_its_newest_run_exactly_as_it_was_sent(gateway, client):
    body = run_body("first")
    post_sse(client, gateway.url + "/", body)
    second = run_body("second", thread=body["threadId"])
    sent = post_sse(client, gateway.url + "/", second)
    status, stream = open_get(thread_url(gateway.url, body["threadId"]))
    assert status == 200
    joined = [event for _, event in stream.rest()]
    assert joined == sent.events, "the newest run, event for event"
    last = len(joined) - 1
    status, stream = open_get(thread_url(gateway.url, body["threadId"]), {"last-event-id": str(last)})
    assert status == 200 and [event for _, event in stream.rest()] == joined[-1:], "Last-Event-ID: a position in that run"
    status, _ = open_get(thread_url(gateway.url, body["threadId"]), {"last-event-id": str(len(joined))})
    assert status == 204, "at its terminal event: nothing more (an EventSource stops)"


def test_joining_mid_run_gets_the_whole_run_once_then_follows_it_live(gateway):
    body = run_body("/slow 3")
    own = open_post(gateway.url + "/", body, GRACE)
    own.take(3)
    status, stream = open_get(thread_url(gateway.url, body["threadId"]))
    assert status == 200
    events = assert_exactly_once([stream.rest()])
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    own.drop()


def test_a_thread_bound_to_a_user_id_is_joined_with_it_only(gateway, client):
    body = run_body("mine", iac=ext(userId="alice"))
    post_sse(client, gateway.url + "/", body)
    assert open_get(thread_url(gateway.url, body["threadId"]))[0] == 204, "no userId: as if there were no thread"
    assert open_get(thread_url(gateway.url, body["threadId"], userId="mallory"))[0] == 204
    status, stream = open_get(thread_url(gateway.url, body["threadId"], userId="alice"))
    assert status == 200 and stream.rest()[-1][1]["type"] == "RUN_FINISHED"


def test_the_mux_connect_op_joins_a_thread_and_an_empty_thread_is_a_closed_stream(gateway, client):
    body = run_body("over the socket")
    sent = post_sse(client, gateway.url + "/", body)

    async def connect(thread_id: str) -> list[dict]:
        async with websockets.connect(gateway.url.replace("http", "ws") + "/ws", subprotocols=["agui-mux.v1"]) as ws:
            await ws.send(json.dumps({"op": "connect", "id": "j", "threadId": thread_id}))
            frames = []
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                frames.append(frame)
                if frame.get("closed") or frame.get("event", {}).get("type") in ("RUN_FINISHED", "RUN_ERROR"):
                    return frames

    frames = asyncio.run(connect(body["threadId"]))
    assert [frame["event"] for frame in frames] == sent.events and all(frame["id"] == "j" for frame in frames)
    assert asyncio.run(connect(f"empty-{uuid.uuid4().hex[:6]}")) == [{"id": "j", "closed": True}]


@pytest.mark.node
@pytest.mark.parametrize("kind", ["ws", "http"])
def test_connect_agent_after_a_reload_through_the_websocket_agent_and_the_documented_http_agent(gateway, kind):
    from tests.test_node_client import drive

    empty = drive(gateway.url, [{"connect": True}], kind=kind)
    assert empty["runs"][0]["error"] is None and empty["runs"][0]["events"] == [], "a thread with no run: nothing, no error"
    report = drive(gateway.url, [{"message": "remember me"}, {"connect": True, "fresh": True}], kind=kind)
    joined = report["runs"][1]
    assert joined["error"] is None, joined["error"]
    assert joined["events"][0]["type"] == "RUN_STARTED" and joined["events"][-1]["type"] == "RUN_FINISHED"
    assert [m["content"] for m in report["messages"] if m["role"] == "assistant"] == ["You said: remember me"]


@pytest.mark.node
def test_connect_agent_after_the_gateway_restarted_on_its_file_store(tmp_path):
    from tests.test_node_client import drive

    server = Gateway(tmp_path, "--allowed-cwd", "/tmp").start()
    thread = f"restart-{uuid.uuid4().hex[:8]}"
    try:
        drive(server.url, [{"message": "before the restart"}], kind="ws", threadId=thread)
        server.stop()
        server.start()
        report = drive(server.url, [{"connect": True}], kind="ws", threadId=thread)
        assert report["runs"][0]["error"] is None
        assert [m["content"] for m in report["messages"] if m["role"] == "assistant"] == ["You said: before the restart"]
    finally:
        server.stop()
