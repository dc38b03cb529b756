"""Busy threads, stop and runs with no client (THREADS.md §4-§6), through two real gateways sharing a real Redis:
runs queued through alternating replicas run one after another, in order, each once; a queued client that leaves
is never run; the queue goes on after the active run's replica dies and drops the run of a dead queued replica;
`interrupt` and `rollback` judged by the conversation a joining client gets; a stop from the other replica; a stop
naming an ended run never touches the next; a run with no client followed later."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any

import httpx
import pytest
import websockets

from tests.reattach_client import open_post
from tests.support import Gateway, RedisServer, assert_well_formed_run, post_sse, run_body

pytestmark = pytest.mark.redis
LEASE = "3"  # a dead replica frees its thread within this long
ENQUEUE = {"AGUI-Multitask": "enqueue"}


@pytest.fixture(scope="module")
def redis(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("busy-redis")).start()
    yield server
    server.stop()


def two_replicas(tmp: Any, redis: RedisServer, *args: str) -> list[Gateway]:
    shared = ("--store", redis.url, "--allowed-cwd", "/tmp", "--lease-seconds", LEASE, "--heartbeat-seconds", "0.5", *args)
    return [Gateway(tmp, *shared).start() for _ in range(2)]


@pytest.fixture(scope="module")
def replicas(tmp_path_factory, redis):
    started = two_replicas(tmp_path_factory.mktemp("busy"), redis, "--max-background-seconds", "3")
    yield started
    for server in started:
        server.stop()


def plain(text: str, thread: str, run: str | None = None) -> dict[str, Any]:
    """A plain AG-UI 1.0 request with one new user message (the thread keeps the conversation)."""
    return run_body(text, thread=thread, run=run, forwardedProps={}, protocolVersion="1.0")


def new_thread() -> str:
    return "busy-" + uuid.uuid4().hex[:10]


def in_background(target: Any) -> tuple[threading.Thread, dict[str, Any]]:
    holder: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: holder.update(result=target()))
    worker.start()
    return worker, holder


def conversation(client: httpx.Client, url: str, thread: str) -> list[tuple[str, str]]:
    """What a client joining the thread ends with: its MESSAGES_SNAPSHOT, as (role, text)."""
    response = client.get(f"{url}/threads/{thread}/events", headers={"accept": "text/event-stream"})
    assert response.status_code == 200, response.text
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    snapshot = next(event for event in events if event["type"] == "MESSAGES_SNAPSHOT")
    return [(m["role"], m.get("content") or "") for m in snapshot["messages"]]


def runs_of(client: httpx.Client, url: str, thread: str) -> list[dict[str, Any]]:
    return list(reversed(client.get(f"{url}/threads/{thread}/runs", params={"limit": 100}).json()["runs"]))


def started_on(server: Gateway, run_id: str) -> bool:
    return any("run started thread=" in line and f" run={run_id} " in line for line in server.logs().splitlines())


def test_five_runs_queued_through_alternating_replicas_run_in_order_each_once(replicas, client):
    a, b = replicas
    thread = new_thread()
    first = open_post(a.url + "/", plain("/slow 2", thread, "first"))
    first.take(1)
    workers = []
    for index in range(5):
        server = (b, a)[index % 2]
        body = plain(f"queued {index}", thread, f"q{index}")
        workers.append(in_background(lambda s=server, q=body: post_sse(httpx.Client(timeout=60), s.url + "/", q, headers=ENQUEUE)))
        server.wait_logged(f"run queued thread={thread} run=q{index} place={index + 1}")
    assert [e["type"] for _, e in first.rest()][-1] == "RUN_FINISHED"
    for worker, holder in workers:
        worker.join(60)
        result = holder["result"]
        assert result.status == 200 and result.terminal["type"] == "RUN_FINISHED", result.raw[:300]
        assert result.terminal["outcome"] == {"type": "success"}
        assert_well_formed_run(result.events)
    assert any("heartbeat" in comment for comment in workers[-1][1]["result"].comments), "a queued response is kept alive"
    said = conversation(client, b.url, thread)
    expected = [("user", "/slow 2"), ("assistant", "tick 1 tick 2 ")]
    for index in range(5):
        expected += [("user", f"queued {index}"), ("assistant", f"You said: queued {index}")]
    assert said == expected, "one after another, in the order they came, each once"
    assert [run["runId"] for run in runs_of(client, a.url, thread)] == ["first", *(f"q{i}" for i in range(5))]


def test_a_queued_client_that_leaves_is_never_run(replicas, client):
    a, b = replicas
    thread = new_thread()
    active = open_post(a.url + "/", plain("/slow 2", thread))
    active.take(1)
    leaving = open_post(b.url + "/", plain("never", thread, "leaves"), ENQUEUE)
    b.wait_logged(f"run queued thread={thread} run=leaves")
    staying = open_post(a.url + "/", plain("stays", thread, "stays"), ENQUEUE)
    a.wait_logged(f"run queued thread={thread} run=stays place=2")
    leaving.drop()
    active.rest()
    events = [event for _, event in staying.rest()]
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
    assert "leaves" not in [run["runId"] for run in runs_of(client, a.url, thread)]
    assert ("user", "never") not in conversation(client, a.url, thread)
    assert not started_on(b, "leaves") and not started_on(a, "leaves")


def test_the_queue_goes_on_after_the_active_replica_dies_and_drops_the_dead_replicas_run(replicas, client):
    a, b = replicas
    thread = new_thread()
    active = open_post(a.url + "/", plain("/slow 30", thread, "doomed"))
    active.take(2)
    held_by_a = open_post(a.url + "/", plain("held by a", thread, "on-a"), ENQUEUE)
    a.wait_logged(f"run queued thread={thread} run=on-a place=1")
    worker, holder = in_background(
        lambda: post_sse(httpx.Client(timeout=60), b.url + "/", plain("held by b", thread, "on-b"), headers=ENQUEUE)
    )
    b.wait_logged(f"run queued thread={thread} run=on-b place=2")
    a.kill()
    try:
        worker.join(60)
        result = holder["result"]
        assert result.terminal["type"] == "RUN_FINISHED" and result.terminal["outcome"] == {"type": "success"}, result.raw[-300:]
        said = conversation(client, b.url, thread)
        assert ("assistant", "You said: held by b") in said and ("user", "held by a") not in said, said
        assert not started_on(b, "on-a"), "the dead replica's queued run is dropped, never run elsewhere"
    finally:
        held_by_a.drop()
        active.drop()
        a.start()


def _cancelled(events: list[dict[str, Any]]) -> bool:
    return events[-1]["type"] == "RUN_FINISHED" and events[-1].get("outcome") == {"type": "cancelled"}


@pytest.mark.parametrize("policy", ["interrupt", "rollback"])
def test_interrupt_and_rollback_as_a_joining_client_sees_them(replicas, client, policy):
    a, b = replicas
    thread = new_thread()
    assert post_sse(client, a.url + "/", plain("first", thread)).terminal["outcome"] == {"type": "success"}
    active = open_post(a.url + "/", plain("/slow 30", thread, "long"))
    head = active.take(4)  # RUN_STARTED, the text's start, two deltas
    assert [event["type"] for _, event in head][-1] == "TEXT_MESSAGE_CONTENT"
    result = post_sse(client, b.url + "/", plain("instead", thread), headers={"AGUI-Multitask": policy})
    assert result.terminal["outcome"] == {"type": "success"}, result.raw[-300:]
    assert _cancelled([event for _, event in head + active.rest()]), "the active run ends cancelled first"
    said = conversation(client, a.url, thread)
    kept = [("user", "first"), ("assistant", "You said: first")]
    if policy == "interrupt":  # what it said stays
        assert (
            said[:3] == [*kept, ("user", "/slow 30")]
            and said[3][1].startswith("tick 1")
            and said[4:]
            == [
                ("user", "instead"),
                ("assistant", "You said: instead"),
            ]
        ), said
    else:  # as if it had never run
        assert said == [*kept, ("user", "instead"), ("assistant", "You said: instead")], said
    runs = runs_of(client, a.url, thread)
    assert runs[1]["runId"] == "long" and runs[1]["status"] == "cancelled"


def test_a_stop_from_the_other_replica_ends_the_run_for_everyone_following_it(replicas, client):
    a, b = replicas
    thread = new_thread()
    owner = open_post(a.url + "/", plain("/slow 30", thread, "stopped"))
    owner.take(2)
    with httpx.Client(timeout=30) as http, http.stream("GET", f"{b.url}/threads/{thread}/events") as joining:
        joined = (json.loads(line[6:]) for line in joining.iter_lines() if line.startswith("data: "))
        assert next(joined)["type"] == "RUN_STARTED"
        assert any(event["type"] == "TEXT_MESSAGE_CONTENT" for event in joined), "it follows the run"
        answer = client.post(f"{b.url}/threads/{thread}/stop")
        assert answer.status_code == 200 and answer.json() == {"status": "cancelled"}
        assert _cancelled([event for _, event in owner.rest()])
        assert _cancelled(list(joined)), "the client following it through the other replica sees it too"
    a.wait_logged(f"run ended thread={thread} run=stopped outcome=cancelled")
    again = client.post(f"{b.url}/threads/{thread}/stop", json={"runId": "stopped"})
    assert again.json() == {"status": "already_terminal"}
    assert client.post(f"{a.url}/threads/{thread}/stop").json() == {"status": "not_running"}


@pytest.mark.parametrize("backend", ["a2a", "agui"])
def test_a_stop_from_the_other_replica_ends_the_agents_work(backend, redis, client, tmp_path):
    """The backend's work ends, not only the stream: the A2A agent is sent CancelTask, the upstream AG-UI server sees
    its request end."""
    if backend == "a2a":
        from tests.a2a_agent import A2AAgentServer

        agent: Any = A2AAgentServer().start()
        flag, text = "a2a+" + agent.url, "slow"
    else:
        from tests.agui_upstream import AguiUpstream

        agent = AguiUpstream().start()
        flag, text = "agui+" + agent.url, "/hold 30"
    a, b = two_replicas(tmp_path, redis, "--agent", flag, "--default-cwd", "/tmp")
    try:
        thread = new_thread()
        owner = open_post(a.url + "/", plain(text, thread, "agents-work"))
        head = owner.take(4)
        assert any(event["type"] == "TEXT_MESSAGE_CONTENT" for _, event in head), head
        assert client.post(f"{b.url}/threads/{thread}/stop").json() == {"status": "cancelled"}
        assert _cancelled([event for _, event in head + owner.rest()])
        deadline = time.monotonic() + 10
        while not _work_ended(backend, agent):
            assert time.monotonic() < deadline, "the agent's work never ended"
            time.sleep(0.05)
    finally:
        for server in (a, b):
            server.stop()
        agent.stop()


def _work_ended(backend: str, agent: Any) -> bool:
    if backend == "a2a":
        return any(call["method"] == "CancelTask" for call in agent.calls)
    return "agents-work" in agent.disconnected


def test_a_stop_naming_an_ended_run_never_touches_the_next(replicas, client):
    a, b = replicas
    thread = new_thread()
    assert post_sse(client, a.url + "/", plain("one", thread, "ended")).terminal["outcome"] == {"type": "success"}
    nxt = open_post(a.url + "/", plain("/slow 2", thread, "next"))
    nxt.take(1)
    assert client.post(f"{b.url}/threads/{thread}/stop", json={"runId": "ended"}).json() == {"status": "already_terminal"}
    assert [event for _, event in nxt.rest()][-1]["outcome"] == {"type": "success"}


def test_a_stop_takes_a_queued_run_out_of_its_queue_and_needs_the_threads_right(replicas, client):
    a, b = replicas
    thread = new_thread()
    active = open_post(a.url + "/", run_body("/slow 2", thread=thread, iac=None, forwardedProps={"iacCode": _user("alice")}))
    active.take(1)
    queued = open_post(b.url + "/", run_body("later", thread=thread, run="later", forwardedProps={"iacCode": _user("alice")}), ENQUEUE)
    b.wait_logged(f"run queued thread={thread} run=later")
    refused = client.post(f"{a.url}/threads/{thread}/stop", params={"userId": "mallory"}, json={"runId": "later"})
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "THREAD_NOT_FOUND"
    stopped = client.post(f"{a.url}/threads/{thread}/stop", params={"userId": "alice"}, json={"runId": "later"})
    assert stopped.json() == {"status": "cancelled"}
    events = [event for _, event in queued.rest()]
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_FINISHED"] and _cancelled(events), "it never reached the agent"
    assert [event for _, event in active.rest()][-1]["outcome"] == {"type": "success"}, "the active run goes on"
    assert not started_on(b, "later") and not started_on(a, "later")


def _user(user_id: str) -> dict[str, Any]:
    return {"schemaVersion": 1, "rosInvocationId": "inv-1", "cwd": "/tmp/agui-tests/ws", "userId": user_id}


def test_a_mux_cancel_of_a_joined_stream_stops_the_run_from_another_replica(replicas):
    a, b = replicas
    thread = new_thread()
    owner = open_post(a.url + "/", plain("/slow 30", thread, "joined"))
    owner.take(2)

    async def join_then_cancel() -> list[dict[str, Any]]:
        async with websockets.connect(b.url.replace("http", "ws") + "/ws", subprotocols=["agui-mux.v1"]) as ws:
            await ws.send(json.dumps({"op": "connect", "id": "j", "threadId": thread}))
            seen = [json.loads(await asyncio.wait_for(ws.recv(), 30))["event"]]
            await ws.send(json.dumps({"op": "cancel", "id": "j"}))
            while seen[-1]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
                seen.append(json.loads(await asyncio.wait_for(ws.recv(), 30))["event"])
            return seen

    joined = asyncio.run(join_then_cancel())
    assert _cancelled(joined) and _cancelled([event for _, event in owner.rest()])


def test_a_queued_mux_run_cancelled_before_its_turn_never_runs(replicas):
    a, _ = replicas
    thread = new_thread()

    async def two_runs() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with websockets.connect(a.url.replace("http", "ws") + "/ws", subprotocols=["agui-mux.v1"]) as ws:
            queued = {**plain("after", thread, "mux-queued"), "forwardedProps": {"multitask": "enqueue"}}
            await ws.send(json.dumps({"op": "run", "id": "first", "input": plain("/slow 2", thread)}))
            frames: dict[str, list[dict[str, Any]]] = {"first": [], "second": []}
            frames["first"].append(json.loads(await asyncio.wait_for(ws.recv(), 30))["event"])
            await ws.send(json.dumps({"op": "run", "id": "second", "input": queued}))
            await asyncio.to_thread(a.wait_logged, f"run queued thread={thread} run=mux-queued")
            await ws.send(json.dumps({"op": "cancel", "id": "second"}))
            while any(not events or events[-1]["type"] not in ("RUN_FINISHED", "RUN_ERROR") for events in frames.values()):
                frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
                frames[frame["id"]].append(frame["event"])
            return frames["first"], frames["second"]

    first, second = asyncio.run(two_runs())
    assert first[-1]["outcome"] == {"type": "success"}
    assert [e["type"] for e in second] == ["RUN_STARTED", "RUN_FINISHED"] and _cancelled(second)
    assert not started_on(a, "mux-queued")


def test_the_upgrades_policy_wins_over_a_frames_as_a_requests_header_does(replicas):
    """THREADS.md §4: `AGUI-Multitask` on the `/ws` upgrade is the header of every run of the socket."""
    a, _ = replicas
    thread = new_thread()

    async def two_runs() -> dict[str, list[dict[str, Any]]]:
        url = a.url.replace("http", "ws") + "/ws"
        async with websockets.connect(url, subprotocols=["agui-mux.v1"], additional_headers=ENQUEUE) as ws:
            second = {**plain("after", thread, "mux-header-wins"), "forwardedProps": {"multitask": "reject"}}
            await ws.send(json.dumps({"op": "run", "id": "first", "input": plain("/slow 1", thread)}))
            frames: dict[str, list[dict[str, Any]]] = {"first": [], "second": []}
            frames["first"].append(json.loads(await asyncio.wait_for(ws.recv(), 30))["event"])
            await ws.send(json.dumps({"op": "run", "id": "second", "input": second}))
            while any(not events or events[-1]["type"] not in ("RUN_FINISHED", "RUN_ERROR") for events in frames.values()):
                frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
                frames[frame["id"]].append(frame["event"])
            return frames

    frames = asyncio.run(two_runs())
    assert frames["second"][-1]["type"] == "RUN_FINISHED", frames["second"][-1]
    assert f"run queued thread={thread} run=mux-header-wins" in a.logs()


def test_a_run_with_no_client_is_followed_later_once_and_ends_at_its_limit(replicas, client):
    a, b = replicas
    thread = new_thread()
    accepted = client.post(a.url + "/", json=plain("/slow 2", thread, "bg"), headers={"Prefer": "respond-async"})
    assert accepted.status_code == 202, accepted.text
    follow = f"/threads/{thread}/runs/bg/events"
    assert accepted.json() == {"threadId": thread, "runId": "bg", "events": follow} and accepted.headers["location"] == follow
    time.sleep(0.5)  # the run goes on with nobody following it
    response = client.get(b.url + follow, headers={"accept": "text/event-stream"}, timeout=30)
    assert response.status_code == 200
    ids = [int(line[4:]) for line in response.text.splitlines() if line.startswith("id: ")]
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert ids == list(range(1, len(ids) + 1)), "every event once, in order"
    assert_well_formed_run(events)
    assert events[-1]["outcome"] == {"type": "success"} and "tick 1 " in [e.get("delta") for e in events]
    overdue = client.post(a.url + "/", json=plain("/slow 30", thread, "overdue"), headers={"Prefer": "respond-async"})
    assert overdue.status_code == 202
    a.wait_logged("run overdue with no client ran 3s (--max-background-seconds): cancelled", 15)
    a.wait_logged(f"run ended thread={thread} run=overdue outcome=cancelled")
