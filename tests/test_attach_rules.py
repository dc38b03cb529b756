"""Who may follow a run, and from where: the userId a run was bound to is part of its identity on every attach
path (the GET, a ticket, the mux `attach`), a refusal takes the same time whether or not the run exists, positions
past the terminal event are refused, the terminal position itself is 204, and an expired credential closes a
socket with 1008 on attach as on run. Real gateways, real clients."""

from __future__ import annotations

import asyncio
import json
import statistics
import time

import httpx
import pytest
import websockets

from tests.reattach_client import GRACE, events_url, open_get, open_post, ws_attach
from tests.support import ext, post_sse, run_body
from tests.test_websocket import ws_url

TOKEN = "static-token-for-attach-rules"
AUTH = {"authorization": f"Bearer {TOKEN}"}


def mux_frames(url: str, frame: dict, headers: dict[str, str]) -> list[dict]:
    """Send one frame on a mux socket and read its stream's frames to the terminal event (or the first error)."""

    async def go() -> list[dict]:
        out: list[dict] = []
        async with websockets.connect(url, subprotocols=["agui-mux.v1"], additional_headers=headers, max_size=None) as ws:
            await ws.send(json.dumps({"id": "s", **frame}))
            while not out or out[-1]["event"]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
                out.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
        return out

    return asyncio.run(go())


@pytest.fixture
def static_gateway(start_gateway):
    return start_gateway("--auth-token", TOKEN, "--heartbeat-seconds", "0.5")


@pytest.mark.parametrize("live", [False, True], ids=["ended", "live"])
def test_a_token_holder_follows_only_runs_bound_to_the_userid_it_names(static_gateway, client, live):
    url = static_gateway.url
    body = run_body("/slow 8" if live else "hello alice", iac=ext(userId="alice"))
    if live:
        stream = open_post(url + "/", body, {**GRACE, **AUTH})
        stream.take(2)
        stream.drop()  # the run goes on, detached, within its grace window
    else:
        assert post_sse(client, url + "/", body, headers=AUTH).terminal["outcome"]["type"] == "success"
    ids = {"rosInvocationId": "inv-1"}
    refused = [
        open_get(events_url(url, body, **ids), AUTH),  # no userId
        open_get(events_url(url, body, **ids, userId="mallory"), AUTH),  # another user
        open_get(events_url(url, {**body, "runId": "no-such-run"}, **ids, userId="alice"), AUTH),  # unknown
    ]
    assert [status for status, _ in refused] == [404, 404, 404]
    assert {error["error"]["code"] for _, error in refused} == {"EXECUTION_NOT_FOUND"}

    # A single-use ticket acts as the token: it does not stand in for the userId either.
    ticket = client.post(url + "/ws/tickets", headers=AUTH).json()["ticket"]
    status, _ = open_get(events_url(url, body, **ids, ticket=ticket))
    assert status == 404
    ticket = client.post(url + "/ws/tickets", headers=AUTH).json()["ticket"]
    status, stream = open_get(events_url(url, body, **ids, userId="alice", ticket=ticket))
    assert status == 200 and stream.rest()[-1][1]["type"] == "RUN_FINISHED"

    attach = {"op": "attach", "threadId": body["threadId"], "runId": body["runId"], "rosInvocationId": "inv-1"}
    for frame in (attach, {**attach, "userId": "mallory"}):
        frames = mux_frames(ws_url(static_gateway), frame, AUTH)
        assert len(frames) == 1 and frames[0]["event"]["code"] == "EXECUTION_NOT_FOUND", frames
        assert "alice" not in json.dumps(frames)
    frames = mux_frames(ws_url(static_gateway), {**attach, "userId": "alice"}, AUTH)
    assert frames[0]["eventId"] == "1" and frames[-1]["event"]["type"] == "RUN_FINISHED"

    status, stream = open_get(events_url(url, body, **ids, userId="alice"), AUTH)
    assert status == 200
    events = [event for _, event in stream.rest()]
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"


def test_without_authentication_the_ids_alone_do_not_open_a_users_run(start_gateway, client):
    server = start_gateway()
    body = run_body("hello alice", iac=ext(userId="alice"))
    assert post_sse(client, server.url + "/", body).terminal["outcome"]["type"] == "success"
    ros = "inv-1"
    status, error = open_get(events_url(server.url, body, rosInvocationId=ros))
    assert status == 404 and error["error"]["code"] == "EXECUTION_NOT_FOUND"
    status, stream = open_get(events_url(server.url, body, rosInvocationId=ros, userId="alice"))
    assert status == 200 and stream.rest()[-1][1]["type"] == "RUN_FINISHED"


@pytest.mark.timing
def test_a_refusal_takes_the_same_time_whether_the_run_exists_or_not(static_gateway, client):
    url = static_gateway.url
    body = run_body("hello", iac=ext(userId="alice"))
    assert post_sse(client, url + "/", body, headers=AUTH).status == 200

    def refusal_seconds(target: dict, user: str) -> float:
        started = time.perf_counter()
        response = client.get(events_url(url, target, rosInvocationId="inv-1", userId=user), headers=AUTH)
        assert response.status_code == 404
        return time.perf_counter() - started

    # Interleaved, so that whatever else loads the machine weighs on both kinds alike.
    pairs = [(refusal_seconds(body, "mallory"), refusal_seconds({**body, "runId": f"nope-{i}"}, "alice")) for i in range(7)]
    known, unknown = [k for k, _ in pairs], [u for _, u in pairs]
    assert min(known) >= 0.2 and min(unknown) >= 0.2, (known, unknown)
    assert abs(statistics.median(known) - statistics.median(unknown)) < 0.1, (known, unknown)


@pytest.mark.parametrize("live", [False, True], ids=["ended", "live"])
def test_positions_past_the_terminal_event_are_refused_and_the_terminal_one_is_204(gateway, client, live):
    url = gateway.url
    body = run_body("hello")
    result = post_sse(client, url + "/", body, headers=GRACE if live else None)
    head = len(result.events)
    assert result.ids[-1] == str(head)
    status, _ = open_get(events_url(url, body, rosInvocationId="inv-1"), {"last-event-id": str(head)})
    assert status == 204
    for position in (head + 1, 1007, 999999999999999999):
        status, error = open_get(events_url(url, body, rosInvocationId="inv-1", lastEventId=str(position)))
        assert status == 400 and error["error"] == {**error["error"], "code": "INVALID_INPUT", "field": "lastEventId"}, error
        retried = post_sse(client, url + "/", body, headers={"last-event-id": str(position)})
        assert retried.status == 400 and json.loads(retried.raw)["error"]["code"] == "INVALID_INPUT"
        frame = {"op": "attach", "threadId": body["threadId"], "runId": body["runId"], "rosInvocationId": "inv-1"}
        frames = asyncio.run(ws_attach(ws_url(gateway), {**frame, "lastEventId": str(position)}))
        assert [event["code"] for _, event in frames] == ["INVALID_INPUT"]
    status, stream = open_get(events_url(url, body, rosInvocationId="inv-1", lastEventId=str(head - 1)))
    assert status == 200 and [position for position, _ in stream.rest()] == [head]


def test_a_live_ring_refuses_positions_ahead_of_the_run(gateway):
    body = run_body("/slow 20")
    stream = open_post(gateway.url + "/", body, GRACE)
    stream.take(2)
    status, error = open_get(events_url(gateway.url, body, rosInvocationId="inv-1", lastEventId="500"))
    assert status == 400 and error["error"]["code"] == "INVALID_INPUT"
    stream.drop()


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "attach", "id": "a", "threadId": "t", "runId": "r", "rosInvocationId": "inv-1"},
        {"op": "connect", "id": "a", "threadId": "t"},
    ],
    ids=["attach", "connect"],
)
async def test_an_expired_credential_closes_the_socket_with_1008_on_attach_and_connect(start_gateway, issuer, frame):
    from tests.test_identity import bearer, oauth_args, short_lived

    server = start_gateway(*oauth_args(issuer))
    token, expires = short_lived(issuer, 4)
    async with websockets.connect(ws_url(server), subprotocols=["agui-mux.v1"], additional_headers=bearer(token)) as ws:
        await asyncio.sleep(max(0.0, expires - time.time() + 0.5))  # until the credential has expired
        await ws.send(json.dumps(frame))
        refused = json.loads(await ws.recv())
        assert refused["id"] == "a" and refused["event"]["code"] == "UNAUTHORIZED"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    async with httpx.AsyncClient() as http:
        assert (await http.get(server.url + "/ping")).status_code == 200


def test_a_follower_on_another_replica_cancels_a_users_run_with_its_userid(tmp_path):
    """Attached through another replica (from the store's log) with the run's userId, a mux `cancel` reaches the
    run: the cancel carries the userId the thread is bound to."""
    from tests.support import Gateway, RedisServer, assert_well_formed_run

    redis = RedisServer(tmp_path).start()
    a, b = (Gateway(tmp_path, "--store", redis.url, "--allowed-cwd", "/tmp").start() for _ in range(2))
    try:
        body = run_body("/slow 30", iac=ext(userId="alice"))
        owner = open_post(a.url + "/", body, GRACE)
        head = owner.take(2)
        owner.drop()

        async def attach_then_cancel() -> list[dict]:
            frame = {"op": "attach", "id": "s", "threadId": body["threadId"], "runId": body["runId"], "rosInvocationId": "inv-1"}
            async with websockets.connect(ws_url(b), subprotocols=["agui-mux.v1"]) as ws:
                await ws.send(json.dumps({**frame, "userId": "alice", "lastEventId": str(head[-1][0])}))
                out = [json.loads(await asyncio.wait_for(ws.recv(), 30))]
                await ws.send(json.dumps({"op": "cancel", "id": "s"}))
                while out[-1]["event"]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
                    out.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
                return [frame["event"] for frame in out]

        rest = asyncio.run(attach_then_cancel())
        events = [event for _, event in head] + rest
        assert_well_formed_run(events)
        assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "cancelled"}, events[-1]
    finally:
        for server in (a, b):
            server.stop()
        redis.stop()
