"""Threads that live on the server, through real gateways: the thread API under two OAuth subjects and under the
static token's userIds (neither sees, changes, joins or erases the other's threads; an unknown thread and another's
answer alike), renaming, tagging, archiving and paging, an erase that leaves no key on Redis, and a conversation
that survives a restart on the file store."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import httpx
import pytest

from tests.issuer import Issuer
from tests.support import Gateway, ext, post_sse, run_body

NOT_FOUND = {"error": {"code": "THREAD_NOT_FOUND", "message": "No such thread.", "field": "threadId"}}


def turns(client: httpx.Client, url: str, thread: str, texts: list[str], headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Plain AG-UI turns as a client that keeps its messages sends them; the messages it ends with."""
    messages: list[dict[str, Any]] = []
    for text in texts:
        messages.append({"id": "m-" + uuid.uuid4().hex[:8], "role": "user", "content": text})
        body = run_body(None, thread=thread, messages=list(messages), forwardedProps={})
        result = post_sse(client, url + "/", body, headers=headers)
        assert result.status == 200 and result.terminal["type"] == "RUN_FINISHED", result.raw[:300]
        for event in result.events:
            if event["type"] == "TEXT_MESSAGE_START":
                messages.append({"id": event["messageId"], "role": "assistant", "content": ""})
            elif event["type"] == "TEXT_MESSAGE_CONTENT":
                messages[-1]["content"] += event["delta"]
    return messages


def joined(client: httpx.Client, url: str, thread: str, headers: dict[str, str] | None = None, query: str = "") -> list[dict[str, Any]]:
    response = client.get(f"{url}/threads/{thread}/events{query}", headers={"accept": "text/event-stream", **(headers or {})})
    if response.status_code == 204:
        return []
    assert response.status_code == 200, response.text
    return [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]


@pytest.fixture(scope="module")
def oauth(tmp_path_factory):
    issuer = Issuer()
    issuer.add_key("k1")
    discovery = (
        "--oauth-discovery-url",
        issuer.issuer + "/.well-known/openid-configuration",
        "--oauth-audience",
        "api://agui",
        "--public-url",
        "{url}",
    )
    gateway = Gateway(tmp_path_factory.mktemp("threads"), *discovery).start()
    yield gateway, issuer
    gateway.stop()
    issuer.close()


def test_two_subjects_each_see_change_join_and_erase_only_their_own_threads(oauth, client):
    gateway, issuer = oauth
    alice = {"authorization": "Bearer " + issuer.token(sub="alice")}
    bob = {"authorization": "Bearer " + issuer.token(sub="bob")}
    said = turns(client, gateway.url, "plans", ["first question", "second question"], alice)
    turns(client, gateway.url, "alice-only", ["something private"], alice)
    turns(client, gateway.url, "plans", ["bob's own plans"], bob)  # the same threadId: another principal's thread

    mine = client.get(gateway.url + "/threads", headers=alice).json()
    assert [t["threadId"] for t in mine["threads"]] == ["alice-only", "plans"]  # newest first
    plans = next(t for t in mine["threads"] if t["threadId"] == "plans")
    assert plans["title"] == "first question" and plans["messageCount"] == 4 and plans["status"] == "idle"
    theirs = client.get(gateway.url + "/threads", headers=bob).json()
    assert [(t["threadId"], t["title"]) for t in theirs["threads"]] == [("plans", "bob's own plans")]

    whole = client.get(gateway.url + "/threads/plans", headers=alice).json()
    assert whole["messages"] == said and whole["state"] == {} and [r["status"] for r in whole["runs"]] == ["completed"] * 2
    events = joined(client, gateway.url, "plans", alice)
    assert [e["type"] for e in events] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert events[1]["messages"] == said

    # Bob cannot tell Alice's thread from one that does not exist, whatever he tries.
    for thread in ("alice-only", "never-was"):
        assert client.get(f"{gateway.url}/threads/{thread}", headers=bob).json() == NOT_FOUND
        assert client.patch(f"{gateway.url}/threads/{thread}", json={"title": "x"}, headers=bob).json() == NOT_FOUND
        assert client.delete(f"{gateway.url}/threads/{thread}", headers=bob).json() == NOT_FOUND
        assert client.get(f"{gateway.url}/threads/{thread}/runs", headers=bob).json() == NOT_FOUND
        assert joined(client, gateway.url, thread, bob) == []
    assert client.get(gateway.url + "/threads/alice-only", headers=alice).status_code == 200

    deleted = client.delete(gateway.url + "/threads/alice-only", headers=alice)
    assert deleted.status_code == 204 and deleted.content == b""
    assert client.get(gateway.url + "/threads/alice-only", headers=alice).json() == NOT_FOUND
    assert joined(client, gateway.url, "alice-only", alice) == []
    assert [t["threadId"] for t in client.get(gateway.url + "/threads", headers=alice).json()["threads"]] == ["plans"]
    turns(client, gateway.url, "alice-only", ["a new beginning"], alice)  # the id starts a new thread
    again = client.get(gateway.url + "/threads/alice-only", headers=alice).json()
    assert again["title"] == "a new beginning" and again["messageCount"] == 2
    assert client.get(gateway.url + "/threads", headers=bob).json()["threads"][0]["title"] == "bob's own plans"


def test_rename_tag_archive_and_page(oauth, client):
    gateway, issuer = oauth
    carol = {"authorization": "Bearer " + issuer.token(sub="carol")}
    for index in range(3):
        turns(client, gateway.url, f"t{index}", [f"question {index}"], carol)
    changed = client.patch(
        gateway.url + "/threads/t1", json={"title": "Renamed", "metadata": {"tag": "work"}, "archived": True}, headers=carol
    )
    assert changed.status_code == 200
    assert {k: changed.json()[k] for k in ("title", "metadata", "archived")} == {
        "title": "Renamed",
        "metadata": {"tag": "work"},
        "archived": True,
    }
    listed = client.get(gateway.url + "/threads", headers=carol).json()
    assert [t["threadId"] for t in listed["threads"]] == ["t2", "t0"]
    archived = client.get(gateway.url + "/threads?archived=true", headers=carol).json()
    assert [(t["threadId"], t["title"]) for t in archived["threads"]] == [("t1", "Renamed")]

    first = client.get(gateway.url + "/threads?archived=any&limit=2", headers=carol).json()
    assert [t["threadId"] for t in first["threads"]] == ["t2", "t1"] and first["nextCursor"]
    rest = client.get(f"{gateway.url}/threads?archived=any&limit=2&cursor={first['nextCursor']}", headers=carol).json()
    assert [t["threadId"] for t in rest["threads"]] == ["t0"] and rest["nextCursor"] is None

    big = {"blob": "x" * 17000}
    refused = client.patch(gateway.url + "/threads/t0", json={"metadata": big}, headers=carol)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "INVALID_INPUT"
    assert client.patch(gateway.url + "/threads/t0", json={"colour": "red"}, headers=carol).status_code == 400
    for query in ("limit=0", "limit=101", "archived=maybe", "cursor=%%%"):
        answer = client.get(f"{gateway.url}/threads?{query}", headers=carol)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "INVALID_INPUT", query
    assert client.get(gateway.url + "/threads").status_code == 401
    document = client.get(gateway.url + "/openapi/openapi.json").json()  # Litestar's, from the handlers' wire types
    paths = ["/agents", "/agents/{agent_id}", "/threads", "/threads/{thread_id}", "/threads/{thread_id}/runs", "/threads/{thread_id}/stop"]
    assert sorted(document["paths"]) == paths
    assert {"ThreadPage", "ThreadDetail", "RunPage", "StopAnswer", "ErrorEnvelope"} <= set(document["components"]["schemas"])


def test_under_the_static_token_each_user_id_has_its_own_list(start_gateway, client):
    gateway = start_gateway("--auth-token", "s3cret-token-value", "--thread-history", "all")
    token = {"authorization": "Bearer s3cret-token-value"}
    for user in ("u1", "u2"):
        body = run_body(f"hi from {user}", thread=f"{user}-thread", iac=ext(userId=user))
        assert post_sse(client, gateway.url + "/", body, headers=token).status == 200
    for user in ("u1", "u2"):
        listed = client.get(f"{gateway.url}/threads?userId={user}", headers=token).json()["threads"]
        assert [(t["threadId"], t["title"]) for t in listed] == [(f"{user}-thread", f"hi from {user}")]
    assert client.get(gateway.url + "/threads", headers=token).json()["threads"] == []
    assert client.get(gateway.url + "/threads/u1-thread?userId=u2", headers=token).json() == NOT_FOUND
    assert client.get(gateway.url + "/threads/u1-thread", headers=token).json() == NOT_FOUND
    assert client.get(gateway.url + "/threads/u1-thread?userId=u1", headers=token).json()["messageCount"] == 2
    assert joined(client, gateway.url, "u1-thread", token, "?userId=u2") == []


@pytest.mark.redis
def test_an_erased_thread_leaves_no_key_in_redis(redis_server, tmp_path, client):
    import redis

    gateway = Gateway(tmp_path, "--store", redis_server.url).start()
    try:
        turns(client, gateway.url, "to-erase", ["one", "two"])
        direct = redis.Redis.from_url(redis_server.url)
        tag = hashlib.sha256(b"to-erase").hexdigest()[:32]
        held = sorted(k.decode() for k in direct.scan_iter(f"agui:{{t:{tag}}}:*"))
        assert {k.rsplit(":", 2)[-2] if ":log" in k else k.rsplit(":", 1)[-1] for k in held} >= {"state", "conv", "summary"}
        lists = [k.decode() for k in direct.scan_iter("agui:{l:*}:threads")]
        assert any(direct.zscore(k, "to-erase") for k in lists)
        assert client.delete(gateway.url + "/threads/to-erase").status_code == 204
        assert sorted(k.decode() for k in direct.scan_iter(f"agui:{{t:{tag}}}:*")) == []
        assert not any(direct.zscore(k, "to-erase") for k in lists)
        assert client.get(gateway.url + "/threads/to-erase").json() == NOT_FOUND
    finally:
        gateway.stop()


def test_a_conversation_outlives_a_restart_on_the_file_store(tmp_path, client):
    gateway = Gateway(tmp_path).start()
    try:
        said = turns(client, gateway.url, "kept", ["before the restart", "and again"])
        gateway.stop()
        gateway.start()
        events = joined(client, gateway.url, "kept")
        assert events[1] == {"type": "MESSAGES_SNAPSHOT", "messages": said}
        assert [t["threadId"] for t in client.get(gateway.url + "/threads").json()["threads"]] == ["kept"]
    finally:
        gateway.stop()


def test_a_joins_ids_name_their_run_so_a_reconnect_across_two_runs_loses_nothing(tmp_path, client):
    """A page joined an idle thread, then a newer run began: reconnecting with the id it last got (the older run's
    end) gives the conversation again and the newer run from its start, never its middle; a reconnect at the end
    of the newest run is 204 (an EventSource stops)."""
    import threading

    gateway = Gateway(tmp_path).start()
    try:
        said = turns(client, gateway.url, "boundary", ["first"])
        first = client.get(gateway.url + "/threads/boundary/events", headers={"accept": "text/event-stream"})
        ids = [line[4:] for line in first.text.splitlines() if line.startswith("id: ")]
        older = json.loads(first.text.split("data: ", 1)[1].split("\n", 1)[0])["runId"]
        assert ids == [f"{older}:end"] * 4
        assert (
            client.get(
                gateway.url + "/threads/boundary/events", headers={"accept": "text/event-stream", "last-event-id": ids[-1]}
            ).status_code
            == 204
        )

        second = [*said, {"id": "m-second", "role": "user", "content": "/slow 2"}]
        body = run_body(None, thread="boundary", messages=second, forwardedProps={})
        runner = threading.Thread(target=lambda: post_sse(httpx.Client(timeout=60), gateway.url + "/", body))
        runner.start()
        try:
            gateway.wait_logged(f"run={body['runId']}")
            rejoined = client.get(
                gateway.url + "/threads/boundary/events", headers={"accept": "text/event-stream", "last-event-id": ids[-1]}
            )
        finally:
            runner.join(30)
        events = [json.loads(line[6:]) for line in rejoined.text.splitlines() if line.startswith("data: ")]
        assert [e["type"] for e in events[:3]] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
        assert events[0]["runId"] == body["runId"] and events[1]["messages"][-1]["id"] == "m-second"
        assert "".join(e.get("delta", "") for e in events) == "tick 1 tick 2 " and events[-1]["type"] == "RUN_FINISHED"
        last = [line[4:] for line in rejoined.text.splitlines() if line.startswith("id: ")][-1]
        assert last.startswith(body["runId"] + ":")
        done = client.get(gateway.url + "/threads/boundary/events", headers={"accept": "text/event-stream", "last-event-id": last})
        assert done.status_code == 204
    finally:
        gateway.stop()


@pytest.mark.redis
def test_the_live_list_over_websocket_hears_every_change_made_on_another_replica(redis_server, tmp_path, client):
    """A page watches its thread list on replica A (`threads.subscribe`); a new thread's run, a rename and an erase
    on replica B each reach it as a `threads.changed` frame."""
    import asyncio

    import websockets

    shared = ("--store", redis_server.url)
    a, b = Gateway(tmp_path, *shared).start(), Gateway(tmp_path, *shared).start()
    thread = "live-" + uuid.uuid4().hex[:8]

    async def watch() -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        async with websockets.connect(a.url.replace("http", "ws") + "/ws", subprotocols=["agui-mux.v1"]) as socket:
            await socket.send(json.dumps({"op": "threads.subscribe", "id": "list"}))
            assert json.loads(await socket.recv()) == {"id": "list", "op": "threads.subscribed"}
            await asyncio.to_thread(turns, client, b.url, thread, ["watched from afar"])
            await asyncio.to_thread(client.patch, f"{b.url}/threads/{thread}", json={"title": "Renamed"})
            await asyncio.to_thread(client.delete, f"{b.url}/threads/{thread}")
            async with asyncio.timeout(10):
                while not seen or not seen[-1].get("deleted"):
                    frame = json.loads(await socket.recv())
                    assert frame["id"] == "list" and frame["op"] == "threads.changed", frame
                    seen.append(frame)
        return seen

    try:
        seen = asyncio.run(watch())
    finally:
        a.stop()
        b.stop()
    views = [frame["thread"] for frame in seen if "thread" in frame]
    assert {view["threadId"] for view in views} == {thread}
    assert len(views) >= 3 and views[-1]["title"] == "Renamed"  # its run's start and end, then the rename (each read as it is then)
    assert any(view["title"] == "watched from afar" and view["status"] == "idle" for view in views)
    assert seen[-1] == {"id": "list", "op": "threads.changed", "threadId": thread, "deleted": True}
