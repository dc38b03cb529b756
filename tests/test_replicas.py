"""Several real gateway processes sharing one real redis-server: the contract holds across replicas."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import httpx
import pytest
import redis

from tests.support import Gateway, RedisServer, assert_well_formed_run, ext, pending_interrupt, post_sse, run_body, session_of
from tests.test_cancel_and_disconnect import CANCEL, open_stream, read_until

pytestmark = pytest.mark.redis
LEASE = "3"  # short, so that a dead replica frees its threads quickly in the tests


@pytest.fixture
def own_redis(tmp_path):
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


@pytest.fixture
def replicas(tmp_path, own_redis):
    started = [
        Gateway(tmp_path, "--store", own_redis.url, "--lease-seconds", LEASE, "--allowed-cwd", "/tmp", "--heartbeat-seconds", "0.5").start()
        for _ in range(3)
    ]
    yield started
    for server in started:
        server.stop()


def error_code(result) -> str:
    return json.loads(result.raw)["error"]["code"]


def test_busy_duplicate_and_conflict_across_replicas(replicas, client):
    a, b, _ = replicas
    body = run_body("/slow 2")
    holder: dict = {}
    worker = threading.Thread(target=lambda: holder.update(r=post_sse(httpx.Client(), a.url + "/", body)))
    worker.start()
    deadline = time.monotonic() + 5
    while client.get(a.url + "/health").json()["runsInFlight"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert error_code(post_sse(client, b.url + "/", run_body("x", thread=body["threadId"]))) == "THREAD_BUSY"
    assert error_code(post_sse(client, b.url + "/", body)) == "DUPLICATE_RUN_ID"
    changed = {**body, "messages": [{"id": "m", "role": "user", "content": "other"}]}
    assert error_code(post_sse(client, b.url + "/", changed)) == "RUN_ID_CONFLICT"
    moved = run_body("x", thread=body["threadId"], iac=ext(cwd="/tmp/elsewhere"))
    assert error_code(post_sse(client, b.url + "/", moved)) == "THREAD_BINDING_CONFLICT"
    worker.join()
    assert holder["r"].terminal.get("outcome") == {"type": "success"}, holder["r"].terminal
    assert post_sse(client, b.url + "/", run_body("next", thread=body["threadId"])).terminal["outcome"]["type"] == "success"
    # A plain thread binds no workspace: each replica's default one (under its own state directory) serves it.
    plain = {**run_body("plain", thread="plain-" + body["threadId"]), "forwardedProps": {}}
    assert post_sse(client, a.url + "/", plain).terminal["outcome"]["type"] == "success"
    again = {**run_body("again", thread=plain["threadId"]), "forwardedProps": {}}
    assert post_sse(client, b.url + "/", again).terminal["outcome"]["type"] == "success"


def test_cancel_through_another_replica(replicas, client):
    a, b, _ = replicas
    body = run_body("/slow 20")
    http, response, records = open_stream(a.url, body)
    head = read_until(records, "TEXT_MESSAGE_CONTENT")
    execution = session_of(head)["executionId"]
    started = time.monotonic()
    answer = client.post(b.url + CANCEL.format(execution), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"})
    assert answer.json() == {"executionId": execution, "status": "cancelled"}
    rest = list(records)
    assert time.monotonic() - started < 3, "A's stream ended within the lease (3 s): A itself stopped the run"
    events = head + rest
    assert_well_formed_run(events)
    assert events[-1]["outcome"] == {"type": "cancelled"}
    http.close()
    again = client.post(b.url + CANCEL.format(execution), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"})
    assert again.json()["status"] == "already_terminal"


def test_interrupt_on_one_replica_resume_on_another(replicas, client):
    a, b, c = replicas
    body = run_body('/tool deploy {"stack":"vpc"}')
    interrupt = pending_interrupt(post_sse(client, a.url + "/", body))
    entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
    resumed = post_sse(client, b.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert_well_formed_run(resumed.events)
    assert resumed.terminal["outcome"]["type"] == "success" and resumed.of("TOOL_CALL_RESULT")
    again = post_sse(client, c.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert again.terminal["code"] == "RESUME_ALREADY_APPLIED" and not again.of("TOOL_CALL_RESULT")


def test_pipeline_steps_reopen_on_another_replica(replicas, client):
    a, b, _ = replicas
    body = run_body("/pipeline")
    interrupt = pending_interrupt(post_sse(client, a.url + "/", body))
    entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"candidateId": "cand-a"}}]
    resumed = post_sse(client, b.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert resumed.types()[:3] == ["RUN_STARTED", "STEP_STARTED", "STEP_STARTED"]
    assert resumed.terminal["outcome"]["type"] == "success"


def test_a_killed_replica_frees_its_threads_after_the_lease(replicas, client):
    a, b, _ = replicas
    body = run_body("/slow 30")
    http, response, records = open_stream(a.url, body)
    head = read_until(records, "TEXT_MESSAGE_CONTENT")
    execution = session_of(head)["executionId"]
    a.kill()
    http.close()
    killed_at = time.monotonic()
    assert error_code(post_sse(client, b.url + "/", run_body("x", thread=body["threadId"]))) == "THREAD_BUSY"
    while True:
        result = post_sse(client, b.url + "/", run_body("after the lease", thread=body["threadId"]))
        if result.status == 200:
            break
        assert time.monotonic() - killed_at < float(LEASE) + 3
        time.sleep(0.2)
    assert result.terminal["outcome"]["type"] == "success"
    lost = client.post(b.url + CANCEL.format(execution), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"})
    assert lost.status_code == 409 and lost.json()["error"]["code"] == "EXECUTION_LOST"


def test_racing_clients_on_one_thread_admit_exactly_one(replicas):
    for round_index in range(3):
        body = run_body("/slow 1")
        statuses: list[tuple[int, str]] = []

        def attempt(index: int, body: dict = body, statuses: list = statuses) -> None:
            server = replicas[index % len(replicas)]
            with httpx.Client(timeout=30) as http:
                result = post_sse(http, server.url + "/", {**body, "runId": f"{body['runId']}-{index}"})
                statuses.append((result.status, "ok" if result.status == 200 else error_code(result)))

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(statuses) == [(200, "ok")] + [(409, "THREAD_BUSY")] * 11, (round_index, statuses)
    with httpx.Client() as http:  # the thread state is intact afterwards
        assert post_sse(http, replicas[0].url + "/", run_body("after", thread=body["threadId"])).status == 200


def test_a_ticket_from_one_replica_opens_a_socket_on_another(tmp_path, own_redis):
    import asyncio

    import websockets

    env = {"AGUI_GATEWAY_AUTH_TOKEN": "tok"}
    a = Gateway(tmp_path, "--store", own_redis.url, "--allowed-cwd", "/tmp", env=env).start()
    b = Gateway(tmp_path, "--store", own_redis.url, "--allowed-cwd", "/tmp", env=env).start()
    try:
        ticket = httpx.post(a.url + "/ws/tickets", headers={"authorization": "Bearer tok"}).json()["ticket"]

        async def use() -> str:
            async with websockets.connect(b.url.replace("http", "ws") + f"/ws?ticket={ticket}") as ws:
                await ws.send(json.dumps(run_body("hi")))
                while True:
                    event = json.loads(await ws.recv())
                    if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                        return event["type"]

        assert asyncio.run(use()) == "RUN_FINISHED"
    finally:
        a.stop()
        b.stop()


def test_redis_outage_fails_fast_and_recovers(tmp_path, own_redis, client):
    gateway = Gateway(tmp_path, "--store", own_redis.url, "--lease-seconds", LEASE, "--allowed-cwd", "/tmp").start()
    try:
        body = run_body("/slow 30")
        http, response, records = open_stream(gateway.url, body)
        read_until(records, "TEXT_MESSAGE_CONTENT")
        own_redis.stop()
        started = time.monotonic()
        refused = post_sse(client, gateway.url + "/", run_body("during the outage"))
        assert refused.status == 503 and error_code(refused) == "STATE_PERSISTENCE_FAILED"
        assert time.monotonic() - started < 3, "admission fails fast"
        health = client.get(gateway.url + "/health").json()
        assert health["status"] == "degraded" and health["store"]["reachable"] is False
        # The run in flight cannot renew its lease: it ends with RUN_ERROR, never a false success.
        rest = list(records)
        assert rest[-1]["type"] == "RUN_ERROR" and rest[-1]["code"] == "STATE_PERSISTENCE_FAILED"
        http.close()
        own_redis.start()
        deadline = time.monotonic() + 10
        while True:
            result = post_sse(client, gateway.url + "/", run_body("after the outage"))
            if result.status == 200:
                break
            assert time.monotonic() < deadline, result.raw
            time.sleep(0.2)
        assert result.terminal["outcome"]["type"] == "success"
        assert client.get(gateway.url + "/health").json()["store"]["reachable"] is True
    finally:
        gateway.stop()


def test_no_secret_reaches_redis(replicas, own_redis, client):
    from tests.test_secrets import SECRETS, secret_ext

    a, b, _ = replicas
    body = run_body("/tool deploy {}", iac=secret_ext())
    interrupt = pending_interrupt(post_sse(client, a.url + "/", body))
    entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
    assert post_sse(client, b.url + "/", run_body(None, thread=body["threadId"], resume=entry, iac=secret_ext())).status == 200
    assert post_sse(client, a.url + "/invocations", run_body("hello", iac=secret_ext(thinking={"enabled": True}))).status == 200
    assert post_sse(client, b.url + "/", run_body("/pipeline", iac=secret_ext())).status == 200
    db = redis.Redis(port=own_redis.port)
    keys = list(db.scan_iter("*"))
    assert keys
    kinds = set()
    for key in keys:
        kind = db.type(key)
        kinds.add(kind)
        if kind == b"stream":  # a run's event log
            value = b"".join(data for _, fields in db.xrange(key) for data in fields.values())
        elif kind == b"hash":  # an event log's meta
            value = b"".join(k + v for k, v in db.hgetall(key).items())
        else:
            assert kind == b"string", key
            value = db.get(key)
        assert db.pttl(key) > 0, f"{key!r} has no TTL"
        for name, secret in SECRETS.items():
            assert secret.encode() not in key and secret.encode() not in value, f"{name} leaked into {key!r}"
    assert {b"stream", b"hash", b"string"} <= kinds  # the event logs were scanned too


def test_400_concurrent_short_runs_on_one_redis_never_fail(tmp_path, own_redis):
    """Load alone never fails a run: 400 runs at once on a replica whose pool takes 16 commands at a time (the runs'
    scripts share the wire's own connection; tests/test_redis_wire.py shows pooled commands waiting for a slot),
    and the end of every run is recorded."""
    import asyncio

    server = Gateway(
        tmp_path, "--store", own_redis.url, "--allowed-cwd", "/tmp", "--redis-max-connections", "16", "--max-connections-per-client", "0"
    ).start()
    try:

        async def flood() -> list[tuple[int, str]]:
            limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
            async with httpx.AsyncClient(timeout=60, limits=limits) as http:

                async def one(index: int) -> tuple[int, str]:
                    response = await http.post(server.url + "/", json=run_body(f"short {index}"))
                    data = [line for line in response.text.split("\n") if line.startswith("data: ")]
                    return response.status_code, json.loads(data[-1][6:])["type"] if data else response.text[:200]

                return await asyncio.gather(*(one(i) for i in range(400)))

        results = asyncio.run(flood())
        failures = [r for r in results if r != (200, "RUN_FINISHED")]
        assert failures == [], f"{len(failures)} of 400 runs failed: {failures[:5]}"
        assert "could not record the end" not in server.logs()
        keys = redis.Redis(port=own_redis.port).keys("agui:{t:*}:state")
        docs = [json.loads(raw) for raw in redis.Redis(port=own_redis.port).mget(keys)]
        assert len(docs) == 400 and all(doc["active"] is None for doc in docs), "every run's end was recorded"
    finally:
        server.stop()


def test_runs_that_end_as_their_lease_is_renewed_are_never_reported_lost(tmp_path, own_redis):
    """Issue: a renewal answered "not ok" because the run had just released its lease ended a completed run as
    EXECUTION_LOST (12 of 80 runs measured). With a 1 s lease, renewals run every 0.33 s, so the ends of 200
    one-second runs keep landing on renewals in flight."""
    import asyncio

    server = Gateway(tmp_path, "--store", own_redis.url, "--lease-seconds", "1", "--allowed-cwd", "/tmp").start()
    try:

        async def batch(http: httpx.AsyncClient, size: int) -> list[str]:
            async def one() -> str:
                response = await http.post(server.url + "/", json=run_body("/slow 1"))
                last = [line for line in response.text.split("\n") if line.startswith("data: ")][-1]
                event = json.loads(last[6:])
                return event["type"] if event["type"] != "RUN_ERROR" else event["code"]

            return await asyncio.gather(*(one() for _ in range(size)))

        async def all_runs() -> list[str]:
            async with httpx.AsyncClient(timeout=60) as http:
                outcomes: list[str] = []
                for _ in range(10):
                    outcomes += await batch(http, 20)
                return outcomes

        outcomes = asyncio.run(all_runs())
        assert outcomes.count("RUN_FINISHED") == 200, {o: outcomes.count(o) for o in set(outcomes)}
    finally:
        server.stop()


def test_a_short_run_costs_two_redis_round_trips(tmp_path, own_redis, client):
    """Admission, then the end with the run's whole event log pipelined with it: the chunks the gateway sends Redis
    that name the run (its id is in the admission, the end and the logged events) are two. A figure of the tuning
    annex's wire (server/annex.py): measured with the annex on, whatever the environment says."""
    from tests.tcp_proxy import TcpProxy

    with TcpProxy(own_redis.port) as proxy:
        store = f"redis://127.0.0.1:{proxy.port}/0"
        gateway = Gateway(tmp_path, "--store", store, "--allowed-cwd", "/tmp", "--tuning", "on").start()
        try:
            assert post_sse(client, gateway.url + "/", run_body("warm up")).status == 200  # the scripts get loaded
            body = run_body("hello")
            result = post_sse(client, gateway.url + "/", body)
            assert result.terminal["outcome"] == {"type": "success"}
            round_trips: dict[tuple[int, int], bytes] = {}  # what went up between two replies, in however many chunks
            for trip, chunk in proxy.sent:
                round_trips[trip] = round_trips.get(trip, b"") + chunk
            naming = [sent for sent in round_trips.values() if body["runId"].encode() in sent]
            assert len(naming) == 2, [sent[:120] for sent in naming]
            assert naming[1].count(b"EVALSHA") == 2, "the end and the log write leave together"
            url = f"{gateway.url}/threads/{body['threadId']}/runs/{body['runId']}/events?rosInvocationId=inv-1"
            replay = client.get(url, headers={"accept": "text/event-stream"})
            assert replay.status_code == 200, replay.text
            assert replay.content.count(b"data: ") == len(result.events), "the log written with the end is whole"
            # Scripts gone (a restarted or flushed Redis): the pipelined end falls back to the calls that load them.
            subprocess.run(["redis-cli", "-p", str(own_redis.port), "SCRIPT", "FLUSH"], check=True, capture_output=True)
            again = run_body("hello again")
            assert post_sse(client, gateway.url + "/", again).terminal["outcome"] == {"type": "success"}
            url = f"{gateway.url}/threads/{again['threadId']}/runs/{again['runId']}/events?rosInvocationId=inv-1"
            assert b'"RUN_FINISHED"' in client.get(url, headers={"accept": "text/event-stream"}).content
        finally:
            gateway.stop()
