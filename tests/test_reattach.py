"""Reattach (the reattach extension): positions on every event, grace windows, the three ways to attach, ended
runs replayed, expired positions refused, and only the run's caller let in. Real gateways, real clients."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest

from tests.a2a_agent import A2AAgentServer
from tests.reattach_client import GRACE, assert_exactly_once, attach_after, events_url, open_get, open_post, ws_attach
from tests.support import Gateway, assert_well_formed_run, post_sse, run_body, session_of
from tests.test_websocket import verify_with_node, ws_url


@pytest.fixture(scope="module")
def agent():
    server = A2AAgentServer().start()
    yield server
    server.stop()


@pytest.fixture
def gateway_a2a(agent, tmp_path):
    server = Gateway(tmp_path, "--agent", "a2a+" + agent.url, "--allowed-cwd", "/tmp").start()
    yield server
    server.stop()


def shape(events: list[dict]) -> list[tuple[str, str | None]]:
    """What two runs of the same input share (ids differ): each event's type and text."""
    return [(event["type"], event.get("delta")) for event in events]


def reference(url: str, text: str) -> list[dict]:
    result = post_sse(httpx.Client(timeout=60), url + "/", run_body(text))
    assert result.status == 200
    return result.events


def attach_by(method: str, gateway, body: dict, last: int) -> list:
    if method == "get":
        return attach_after(gateway.url, body, last).rest()
    if method == "post":
        return open_post(gateway.url + "/", body, {"last-event-id": str(last)}).rest()
    frame = {"op": "attach", "threadId": body["threadId"], "runId": body["runId"], "rosInvocationId": "inv-1", "lastEventId": str(last)}
    return asyncio.run(ws_attach(ws_url(gateway), frame))


@pytest.mark.parametrize("method", ["get", "post", "ws"])
def test_a_dropped_sse_run_is_reattached_exactly_once(gateway, method):
    text = "/slow 6"
    expected: list[list[dict]] = []
    baseline = threading.Thread(target=lambda: expected.append(reference(gateway.url, text)))
    baseline.start()  # the same input, uninterrupted, at the same time
    body = run_body(text)
    first = open_post(gateway.url + "/", body, GRACE)
    head = first.take(4)
    first.drop()
    time.sleep(1.5)  # the run goes on while nobody follows it
    tail = attach_by(method, gateway, body, head[-1][0])
    events = assert_exactly_once([head, tail])
    assert_well_formed_run(events)
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
    verify_with_node([events])
    baseline.join()
    assert shape(events) == shape(expected[0])
    status, replay = open_get(events_url(gateway.url, body, rosInvocationId="inv-1"))  # after the end: replayed whole
    assert status == 200
    assert [event for _, event in replay.rest()] == events


def test_a_disconnect_without_a_grace_window_still_cancels_at_once(gateway):
    body = run_body("/slow 30")
    stream = open_post(gateway.url + "/", body)
    stream.take(2)
    stream.drop()
    deadline = time.monotonic() + 5
    with httpx.Client(timeout=30) as http:
        while True:  # the thread is free again at once
            again = post_sse(http, gateway.url + "/", run_body("next", thread=body["threadId"]))
            if again.status == 200:
                break
            assert again.status == 409 and time.monotonic() < deadline
            time.sleep(0.1)
    status, replay = open_get(events_url(gateway.url, body, rosInvocationId="inv-1"))
    assert status == 200
    assert replay.rest()[-1][1]["outcome"] == {"type": "cancelled"}


def test_nobody_back_within_the_window_cancels_the_backend(agent, gateway_a2a, client):
    from tests.test_cancel_and_disconnect import CANCEL  # noqa: F401  (the same agent fixture module)

    body = run_body("slow")
    stream = open_post(gateway_a2a.url + "/", body, {"AGUI-Reattach-Grace": "1"})
    head = [event for _, event in stream.take(6)]
    stream.drop()
    task_id = session_of(head)["taskId"]
    deadline = time.monotonic() + 10
    while {"method": "CancelTask", "taskId": task_id} not in agent.calls:
        assert time.monotonic() < deadline, agent.calls[-5:]
        time.sleep(0.1)
    status, replay = open_get(events_url(gateway_a2a.url, body, rosInvocationId="inv-1"))
    assert status == 200
    assert replay.rest()[-1][1]["outcome"] == {"type": "cancelled"}
    assert "nobody came back" in gateway_a2a.logs()


def test_positions_older_than_the_log_get_events_expired(start_gateway, client):
    server = start_gateway("--event-log-max-events", "100", "--event-log-retention", "2s")
    body = run_body("/flood 500")
    run = post_sse(client, server.url + "/", body)
    assert run.status == 200 and run.ids[0] == "1" and run.ids[-1] == str(len(run.events))
    head = len(run.events)
    status, error = open_get(events_url(server.url, body, rosInvocationId="inv-1", lastEventId="10"))
    assert status == 410 and error["error"]["code"] == "EVENTS_EXPIRED"
    status, stream = open_get(events_url(server.url, body, rosInvocationId="inv-1", lastEventId=str(head - 20)))
    assert status == 200
    assert [position for position, _ in stream.rest()] == list(range(head - 19, head + 1))
    time.sleep(2.5)  # past the retention: the events are gone, and the answer says so
    status, error = open_get(events_url(server.url, body, rosInvocationId="inv-1", lastEventId=str(head - 20)))
    assert status == 410 and error["error"]["code"] == "EVENTS_EXPIRED"
    localized = client.get(
        events_url(server.url, body, rosInvocationId="inv-1", lastEventId="1"), headers={"accept-language": "pt-BR"}
    ).json()
    assert localized["error"]["message"].startswith("Os eventos")


def test_only_the_runs_caller_may_attach(start_gateway, issuer, client):
    server = start_gateway(
        "--oauth-issuer",
        issuer.issuer,
        "--oauth-jwks-url",
        issuer.issuer + "/jwks",
        "--oauth-audience",
        "api://agui",
        "--public-url",
        "{url}",
    )
    mine = {"authorization": f"Bearer {issuer.token(sub='alice')}"}
    body = run_body("hello")
    assert post_sse(client, server.url + "/", body, headers=mine).status == 200
    url = events_url(server.url, body, rosInvocationId="inv-1")
    status, stream = open_get(url, mine)
    assert status == 200 and stream.rest()[-1][1]["type"] == "RUN_FINISHED"
    refusals = [
        open_get(events_url(server.url, body, rosInvocationId="inv-2"), mine),  # wrong rosInvocationId
        open_get(url, {"authorization": f"Bearer {issuer.token(sub='mallory')}"}),  # another principal
        open_get(events_url(server.url, {**body, "runId": "no-such-run"}, rosInvocationId="inv-1"), mine),  # unknown
    ]
    assert [status for status, _ in refusals] == [404, 404, 404]
    assert len({json.dumps(error["error"]["code"]) for _, error in refusals}) == 1  # the same answer: nothing revealed
    status, error = open_get(url)
    assert status == 401 and error["error"]["code"] == "UNAUTHORIZED"
    ticket = client.post(server.url + "/ws/tickets", headers=mine).json()["ticket"]  # what an EventSource can carry
    status, stream = open_get(url + f"&ticket={ticket}")
    assert status == 200 and stream.rest()[-1][1]["type"] == "RUN_FINISHED"
    status, error = open_get(url + f"&ticket={ticket}")  # single use
    assert status == 401
    assert ticket not in server.logs()


def test_a_killed_socket_attaches_again_over_websocket(gateway):
    body = run_body("/slow 4")
    frame = {"op": "run", "input": body, "reattachGraceSeconds": 30}
    head = asyncio.run(ws_attach(ws_url(gateway), frame, count=4))
    attach = {"op": "attach", "threadId": body["threadId"], "runId": body["runId"], "rosInvocationId": "inv-1"}
    tail = asyncio.run(ws_attach(ws_url(gateway), {**attach, "lastEventId": str(head[-1][0])}))
    events = assert_exactly_once([head, tail])
    assert_well_formed_run(events)
    assert events[-1]["outcome"] == {"type": "success"}


def test_an_interrupt_reached_while_detached_is_kept_and_seen(gateway, client):
    body = run_body("/tool deploy {}")
    stream = open_post(gateway.url + "/", body, GRACE)
    head = stream.take(1)
    stream.drop()
    events = assert_exactly_once([head, attach_after(gateway.url, body, head[-1][0]).rest()])
    interrupt = events[-1]["outcome"]["interrupts"][0]
    entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
    resumed = post_sse(client, gateway.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert resumed.terminal["outcome"] == {"type": "success"}


def test_bad_positions_and_grace_values_are_refused_before_anything_runs(gateway, client):
    body = run_body("hello")
    refused = post_sse(client, gateway.url + "/", body, headers={"AGUI-Reattach-Grace": "soon"})
    assert refused.status == 400 and json.loads(refused.raw)["error"]["field"] == "AGUI-Reattach-Grace"
    refused = post_sse(client, gateway.url + "/", body, headers={"last-event-id": "-1"})
    assert refused.status == 400 and json.loads(refused.raw)["error"]["field"] == "Last-Event-ID"
    assert post_sse(client, gateway.url + "/", body).status == 200  # nothing of the refused requests ran
    status, error = open_get(events_url(gateway.url, body, rosInvocationId="inv-1", lastEventId="x1"))
    assert status == 400 and error["error"]["field"] == "lastEventId"


@pytest.fixture
def two_replicas(tmp_path):
    from tests.support import RedisServer

    redis = RedisServer(tmp_path).start()
    servers = [Gateway(tmp_path, "--store", redis.url, "--allowed-cwd", "/tmp", "--heartbeat-seconds", "0.5").start() for _ in range(2)]
    yield servers
    for server in servers:
        server.stop()
    redis.stop()


def test_a_run_started_on_one_replica_is_followed_from_another(two_replicas):
    a, b = two_replicas
    body = run_body("/slow 4")
    first = open_post(a.url + "/", body, GRACE)
    head = first.take(4)
    first.drop()
    events = assert_exactly_once([head, attach_after(b.url, body, head[-1][0]).rest()])
    assert_well_formed_run(events)
    assert events[-1]["outcome"] == {"type": "success"}  # the owner kept it going: B's follower was seen
    verify_with_node([events])


def test_twenty_drops_during_a_flood_across_replicas_lose_and_repeat_nothing(two_replicas):
    import random

    a, b = two_replicas
    body = run_body("/flood 20000")
    chooser = random.Random(7)
    parts = [open_post(a.url + "/", body, GRACE)]
    received = [parts[0].take(chooser.randint(50, 1500))]
    parts[0].drop()
    for attempt in range(20):
        server = (a, b)[attempt % 2]
        last = received[-1][-1][0]
        stream = attach_after(server.url, body, last)
        part = stream.take(chooser.randint(50, 1500))
        stream.drop()
        if part:
            received.append(part)
    received.append(attach_after(b.url, body, received[-1][-1][0]).rest())
    events = assert_exactly_once(received)
    assert_well_formed_run(events)
    assert sum(event["type"] == "TEXT_MESSAGE_CONTENT" for event in events) == 20000


def test_file_logs_survive_a_restart_and_a_killed_run_ends_lost(start_gateway, client):
    server = start_gateway()
    finished = run_body("hello")
    complete = post_sse(client, server.url + "/", finished)
    killed = run_body("/slow 30")
    stream = open_post(server.url + "/", killed, GRACE)
    head = stream.take(4)
    time.sleep(0.3)  # the log is written behind the run
    server.kill()
    stream.drop()
    server.start()  # same state directory
    status, replay = open_get(events_url(server.url, finished, rosInvocationId="inv-1"))
    assert status == 200 and [event for _, event in replay.rest()] == complete.events
    status, replay = open_get(events_url(server.url, killed, rosInvocationId="inv-1"))
    assert status == 200
    events = replay.rest()
    assert [event for _, event in events[: len(head)]] == [event for _, event in head]
    assert events[-1] == (0, events[-1][1]) and events[-1][1]["code"] == "EXECUTION_LOST"


def test_reattach_can_be_turned_off(start_gateway, client):
    server = start_gateway("--max-reattach-grace-seconds", "0")
    body = run_body("hello")
    result = post_sse(client, server.url + "/", body, headers=GRACE)
    assert result.status == 200 and result.ids == [None] * len(result.events)  # no positions to come back to
    status, error = open_get(events_url(server.url, body, rosInvocationId="inv-1"))
    assert status == 404 and error["error"]["code"] == "EXECUTION_NOT_FOUND"
    assert "reattach" not in client.get(server.url + "/health").json()["extensions"]


def test_health_names_the_extension_and_its_cap(gateway, client):
    assert client.get(gateway.url + "/health").json()["extensions"]["reattach"] == {"version": 1, "maxGraceSeconds": 120.0}
