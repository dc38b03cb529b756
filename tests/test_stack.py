"""The deployment run for real: the compose stack (Redis, three gateways, nginx) brought up with docker-compose the
way deploy/README.md says, and every request made through nginx on 127.0.0.1; then the same image started alone
as an AgentCore container with OAuth against an issuer container."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
import time
from typing import Any

import httpx
import pytest
import websockets
from testcontainers.core.container import DockerContainer
from websockets.exceptions import ConnectionClosed

from tests.issuer import Issuer
from tests.stack import Stack, engine, ensure_base_images, guide_commands
from tests.support import assert_well_formed_run, free_port, parse_sse, pending_interrupt, post_sse, run_body, session_of

pytestmark = pytest.mark.stack
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def stack():
    client = engine()
    if client is None:
        pytest.skip("no Docker engine answers (scripts/test.sh counts a skip as a failure)")
    ensure_base_images()
    started = Stack(client)
    try:
        yield started.up()
    finally:
        started.down()


def plain(text: str | None, **fields: Any) -> dict[str, Any]:
    """A plain AG-UI request (no iac-code extension), as @ag-ui/client 1.0 sends it: it runs in the image's default
    workspace."""
    return run_body(text, forwardedProps={}, protocolVersion="1.0", **fields)


def headers(stack: Stack, request_id: str | None = None) -> dict[str, str]:
    found = {"authorization": f"Bearer {stack.token}"}
    if request_id:
        found["x-request-id"] = request_id
    return found


def post(stack: Stack, body: dict[str, Any], request_id: str | None = None, path: str = "/"):
    with httpx.Client(timeout=60) as http:
        return post_sse(http, stack.url() + path, body, headers=headers(stack, request_id))


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_the_image_runs_as_10001_on_0_0_0_0_8080_read_only_logs_json_and_passes_its_healthcheck(stack):
    gateway = stack.raw(stack.gateways[0])
    status = gateway.exec_run(["cat", "/proc/1/status"]).output.decode()
    assert "\nUid:\t10001\t10001" in status, status
    listening = gateway.exec_run(["cat", "/proc/net/tcp"]).output.decode().splitlines()[1:]
    assert any(line.split()[1] == "00000000:1F90" and line.split()[3] == "0A" for line in listening), listening
    assert gateway.exec_run(["touch", "/opt/agui/x"]).exit_code != 0, "the root filesystem is read-only"
    assert gateway.exec_run(["touch", "/var/lib/agui/x"]).exit_code == 0, "state lives under /var/lib/agui"
    lines = [line for line in stack.logs(stack.gateways[0]).splitlines() if line.strip()]
    assert lines and all(json.loads(line)["level"] for line in lines), lines[:5]
    image = stack.client.images.get(stack.image_of("gateway"))
    check = image.attrs["Config"]["Healthcheck"]["Test"]
    assert check[0] == "CMD" and gateway.exec_run(check[1:]).exit_code == 0, check
    base = stack.client.images.get(image.attrs["Config"]["Labels"]["org.opencontainers.image.base.name"])
    added = image.attrs["Size"] - base.attrs["Size"]
    print(f"image {image.attrs['Size'] / MIB:.1f} MiB, {added / MIB:.1f} MiB above its base")
    assert added <= 60 * MIB, f"the project's layers are {added / MIB:.1f} MiB (goal: at most 60)"


def test_the_guides_agentcore_example_runs_through_the_stack_with_the_token_from_dotenv(stack):
    example = guide_commands("stack-example")
    assert "http://localhost:8080/" in example
    answered = stack.shell(example.replace("http://localhost:8080/", stack.url() + "/"), timeout=60)
    assert answered.returncode == 0, answered.stderr
    events, _, _ = parse_sse(answered.stdout.encode())
    assert_well_formed_run(events)
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}, events[-1]
    without = stack.shell(example.replace("http://localhost:8080/", stack.url() + "/").replace("Bearer $TOKEN", "Bearer wrong"))
    assert '"code":"UNAUTHORIZED"' in without.stdout.replace(" ", ""), without.stdout[:300]


def test_a_request_without_an_id_has_one_id_in_nginx_the_replica_and_the_response(stack):
    forged = "203.0.113.7"
    with httpx.Client(timeout=60) as http:
        result = post_sse(http, stack.url() + "/", plain("hello"), headers={**headers(stack), "x-forwarded-for": forged})
    assert result.status == 200 and result.terminal["type"] == "RUN_FINISHED"
    request_id = result.headers["x-request-id"]
    lb = stack.containers["lb"][0]
    nginx_line = wait_for(
        lambda: next((json.loads(line) for line in stack.logs(lb).splitlines() if request_id in line), None), 5, "nginx logged it"
    )
    assert nginx_line["requestId"] == request_id and nginx_line["path"] == "/"
    replica = wait_for(lambda: stack.served_by(request_id), 5, "one replica logged the same id")
    assert len(replica) == 1
    access = [json.loads(line)["message"] for line in stack.logs(replica[0]).splitlines() if request_id in line and '"agui.access"' in line]
    assert access and access[0].startswith("POST / 200"), access
    assert access[0].endswith(f" from {nginx_line['client']}") and forged not in access[0], (access, nginx_line)


def test_sse_through_nginx_is_unbuffered_and_carries_heartbeats(stack):
    started = time.monotonic()
    arrivals: list[tuple[float, str]] = []
    with httpx.Client(timeout=60) as http:
        body = json.dumps(plain("/sleep 17"))
        with http.stream(
            "POST", stack.url() + "/", content=body, headers={**headers(stack), "content-type": "application/json"}
        ) as response:
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                arrivals.append((time.monotonic() - started, line))
    first_event = next(at for at, line in arrivals if line.startswith("data:"))
    heartbeats = [at for at, line in arrivals if line.startswith(":")]
    assert first_event < 2, f"RUN_STARTED reached the client after {first_event:.1f} s: nginx buffered the stream"
    assert heartbeats and 13 < heartbeats[0] < 17, arrivals
    events, _, _ = parse_sse(("\n".join(line for _, line in arrivals) + "\n").encode())
    assert_well_formed_run(events)
    assert events[-1]["type"] == "RUN_FINISHED" and arrivals[-1][0] >= 16.5


def test_invocations_through_nginx(stack):
    result = post(stack, plain("hello from agentcore"), path="/invocations")
    assert result.status == 200, result.raw
    assert_well_formed_run(result.events)
    assert result.terminal["outcome"] == {"type": "success"}
    unauthenticated = httpx.post(stack.url() + "/", json=plain("hello"), timeout=10)
    assert unauthenticated.status_code == 401 and unauthenticated.json()["error"]["code"] == "UNAUTHORIZED"


def test_a_body_over_the_limit_gets_the_gateways_413_not_nginxs(stack):
    body = plain("x" * (12 * MIB + 4096))
    response = httpx.post(stack.url() + "/", json=body, headers=headers(stack, "too-big-1"), timeout=60)
    assert response.status_code == 413
    assert response.headers["content-type"].startswith("application/json"), response.text[:200]
    assert response.json()["error"]["code"] == "INVALID_INPUT"
    assert response.headers["x-request-id"] == "too-big-1"


async def _ws_run(url: str, text: str, extra: dict[str, str]) -> list[dict[str, Any]]:
    async with websockets.connect(url, additional_headers=extra) as ws:
        await ws.send(json.dumps(plain(text)))
        events = []
        while not events or events[-1]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
            events.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
        return events


def test_websocket_runs_through_nginx_and_a_ticket_from_one_replica_opens_a_socket_on_another(stack):
    ws_url = stack.url().replace("http", "ws") + "/ws"
    crossed = []
    for attempt in range(8):  # round robin across replicas: a ticket and its socket soon land on different ones
        issued = httpx.post(stack.url() + "/ws/tickets", headers=headers(stack, f"ticket-{attempt}"), timeout=10)
        assert issued.status_code == 201, issued.text
        events = asyncio.run(_ws_run(f"{ws_url}?ticket={issued.json()['ticket']}", "hello", {"x-request-id": f"socket-{attempt}"}))
        assert_well_formed_run(events)
        assert events[-1]["outcome"] == {"type": "success"}
        issuer = wait_for(lambda a=attempt: stack.served_by(f"ticket-{a}"), 5, "the ticket request is in one replica's log")
        opener = wait_for(lambda a=attempt: stack.served_by(f"socket-{a}"), 5, "the socket is in one replica's log")
        if issuer != opener:
            crossed.append(attempt)
            break
    assert crossed, "every ticket was used on the replica that issued it: nginx did not spread the requests"
    bearer = asyncio.run(_ws_run(ws_url, "hello", headers(stack)))
    assert bearer[-1]["type"] == "RUN_FINISHED"


def test_cancel_through_another_replica(stack):
    for attempt in range(8):
        holder: dict[str, Any] = {}
        body = plain("/slow 30")
        request_id = f"slow-{attempt}"
        worker = threading.Thread(target=lambda h=holder, b=body, r=request_id: h.update(result=post(stack, b, r)))
        worker.start()
        runner = wait_for(lambda r=request_id: stack.served_by(r), 10, "the run started on one replica")
        thread = body["threadId"]
        execution = wait_for(lambda g=runner[0], t=thread: _execution_of(stack, g, t), 10, "the run's execution id is logged")
        cancel = httpx.post(
            f"{stack.url()}/extensions/iac-code/v1/executions/{execution}/cancel",
            json={"threadId": body["threadId"], "rosInvocationId": f"thread:{body['threadId']}"},
            headers=headers(stack, f"cancel-{attempt}"),
            timeout=10,
        )
        assert cancel.status_code == 200 and cancel.json() == {"executionId": execution, "status": "cancelled"}, cancel.text
        worker.join(30)
        result = holder["result"]
        assert_well_formed_run(result.events)
        assert session_of(result.events)["executionId"] == execution
        assert result.terminal["type"] == "RUN_FINISHED" and result.terminal["outcome"] == {"type": "cancelled"}, result.terminal
        if stack.served_by(f"cancel-{attempt}") != runner:
            return
    raise AssertionError("every cancel reached the replica that ran the run: nginx did not spread the requests")


def _execution_of(stack: Stack, gateway: DockerContainer, thread_id: str) -> str | None:
    for line in stack.logs(gateway).splitlines():
        if f"thread={thread_id} " in line and "run started" in line:
            return line.split("execution=")[1].split()[0]
    return None


def test_a_redis_restart_keeps_pending_interrupts_and_idempotency_records(stack):
    first = post(stack, plain('/tool deploy {"stack":"vpc"}'))
    interrupt = pending_interrupt(first)
    finished_body = plain("hello")
    finished = post(stack, finished_body)
    assert finished.terminal["outcome"] == {"type": "success"}
    time.sleep(1.5)  # appendfsync everysec: what was acknowledged more than a second ago is on disk
    redis = stack.containers["redis"][0]
    stack.raw(redis).restart(timeout=10)
    stack.wait_healthy(redis)
    thread = first.events[0]["threadId"]
    answer = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
    resumed = wait_for(lambda: _ok(post(stack, plain(None, thread=thread, resume=answer))), 30, "the gateways reconnect to Redis")
    assert resumed.terminal["outcome"] == {"type": "success"}, resumed.terminal
    assert resumed.of("TOOL_CALL_RESULT"), "the interrupt survived the restart and its tool ran"
    again = httpx.post(stack.url() + "/", json=finished_body, headers=headers(stack), timeout=30)
    assert again.status_code == 409 and again.json()["error"]["code"] == "DUPLICATE_RUN_ID", again.text


def _ok(result):
    return result if result.status == 200 else None


def test_docker_kill_of_a_replica_mid_run_frees_its_thread_keeps_interrupts_and_leaves_the_pool(stack):
    waiting = post(stack, plain('/tool deploy {"stack":"vpc"}'))
    interrupt = pending_interrupt(waiting)
    body = plain("/slow 60")
    holder: dict[str, Any] = {}

    def stream() -> None:
        try:
            holder["result"] = post(stack, body, "doomed-1")
        except httpx.HTTPError as exc:
            holder["error"] = exc

    worker = threading.Thread(target=stream)
    worker.start()
    victim = wait_for(lambda: stack.served_by("doomed-1"), 10, "the run started on one replica")[0]
    address = stack.address(victim)
    stack.raw(victim).kill()
    killed_at = time.monotonic()
    worker.join(30)
    assert not worker.is_alive(), "the client's stream ended when its replica died"
    assert not stack.state(victim)["Running"]

    lease = float(stack.service("gateway")["environment"]["AGUI_GATEWAY_LEASE_SECONDS"])
    statuses = []

    def thread_is_free():
        response = httpx.post(stack.url() + "/", json=plain("again", thread=body["threadId"]), headers=headers(stack), timeout=30)
        statuses.append(response.status_code if response.status_code == 200 else (response.status_code, response.json()["error"]["code"]))
        return response.status_code == 200

    wait_for(thread_is_free, lease + 10, f"the thread is free after the lease: {statuses}")
    assert time.monotonic() - killed_at < lease + 10
    assert set(statuses[:-1]) <= {(409, "THREAD_BUSY")}, statuses

    resumed = post(
        stack,
        plain(
            None,
            thread=waiting.events[0]["threadId"],
            resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}],
        ),
    )
    assert resumed.status == 200 and resumed.terminal["outcome"] == {"type": "success"}, resumed.raw[-500:]

    # nginx re-resolves the replicas every 5 s: once that passed, the dead address is never tried again.
    time.sleep(max(0.0, 6 - (time.monotonic() - killed_at)))
    lb = stack.containers["lb"][0]
    before = len(stack.logs(lb).splitlines())
    for index in range(12):
        assert httpx.get(stack.url() + "/ping", headers={"x-request-id": f"after-kill-{index}"}, timeout=10).status_code == 200

    def logged() -> list[dict[str, Any]] | None:
        # nginx writes a request's line after its answer, and docker shows it a moment later: wait for all twelve.
        found = [json.loads(line) for line in stack.logs(lb).splitlines()[before:] if '"after-kill-' in line]
        return found if len(found) >= 12 else None

    lines = wait_for(logged, 10, "nginx logged the twelve requests")
    assert len(lines) == 12 and all(line["status"] == 200 for line in lines), lines
    assert not [line for line in lines if address in line["upstream"]], f"nginx still tries the dead replica {address}: {lines}"
    retried = [json.loads(line) for line in stack.logs(lb).splitlines() if line.startswith("{") and address in line]
    slowest = max((line["seconds"] for line in retried), default=0)
    print(f"after the kill, {len(retried)} request(s) tried the dead replica first and were retried (slowest {slowest} s)")


def test_docker_stop_drains_a_replica_runs_finish_and_sockets_get_1001(stack):
    url = stack.url().replace("http", "ws") + "/ws"
    live = [g for g in stack.gateways if stack.state(g)["Running"]]
    grace = int(stack.service("gateway")["stop_grace_period"].rstrip("s"))

    async def scenario() -> tuple[list[list[dict[str, Any]]], list[int | None], list[int]]:
        sockets = [await websockets.connect(url, additional_headers=headers(stack, f"drain-{i}")) for i in range(6)]
        for ws in sockets:
            await ws.send(json.dumps(plain("/slow 4")))
            assert json.loads(await ws.recv())["type"] == "RUN_STARTED"
        owners = [wait_for(lambda i=i: stack.served_by(f"drain-{i}"), 5, "each socket's run is logged")[0] for i in range(6)]
        victim = owners[0]
        assert victim in live
        stopping = asyncio.get_running_loop().run_in_executor(None, lambda: stack.raw(victim).stop(timeout=grace))
        await asyncio.sleep(0.5)
        during = []
        for _ in range(6):  # new requests during the drain go to the other replicas (503 is retried by nginx)
            result = await asyncio.to_thread(post, stack, plain("hello"))
            during.append(result.status)
        events: list[list[dict[str, Any]]] = []
        codes: list[int | None] = []
        for ws, owner in zip(sockets, owners, strict=True):
            seen = [{"type": "RUN_STARTED"}]
            try:
                while seen[-1]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
                    seen.append(json.loads(await asyncio.wait_for(ws.recv(), 20)))
                if owner is victim:
                    await asyncio.wait_for(ws.recv(), 20)
            except ConnectionClosed as closed:
                codes.append(closed.rcvd.code if closed.rcvd else None)
            else:
                codes.append(None)
                await ws.close()
            events.append(seen)
        await stopping
        return events, [c if o is victim else None for c, o in zip(codes, owners, strict=True)], during

    events, codes, during = asyncio.run(scenario())
    assert all(run[-1]["type"] == "RUN_FINISHED" and run[-1]["outcome"] == {"type": "success"} for run in events), events
    assert [code for code in codes if code is not None] and all(code in (None, 1001) for code in codes), codes
    assert during == [200] * 6, during


def test_agentcore_container_serves_ping_invocations_and_ws_with_oauth(stack):
    issuer = Issuer()
    issuer.add_key("k1")
    issuer.issuer = "http://issuer:8000/realm"
    with tempfile.TemporaryDirectory() as served:
        os.makedirs(os.path.join(served, "realm", ".well-known"))
        with open(os.path.join(served, "realm", ".well-known", "openid-configuration"), "w") as handle:
            json.dump({"issuer": issuer.issuer, "jwks_uri": issuer.issuer + "/jwks"}, handle)
        with open(os.path.join(served, "realm", "jwks"), "w") as handle:
            json.dump(issuer.jwks(), handle)
        os.chmod(served, 0o755)
        port = free_port()
        base = stack.client.images.get(stack.image_of("gateway")).attrs["Config"]["Labels"]["org.opencontainers.image.base.name"]
        idp = DockerContainer(base, command=["python3", "-m", "http.server", "8000", "--directory", "/srv"], network=stack.network)
        idp.with_network_aliases("issuer").with_volume_mapping(served, "/srv", "ro")
        runtime = DockerContainer(
            stack.image_of("gateway"),
            network=stack.network,
            env={
                "AGUI_GATEWAY_OAUTH_DISCOVERY_URL": issuer.issuer + "/.well-known/openid-configuration",
                "AGUI_GATEWAY_OAUTH_AUDIENCE": "api://agui",
                "AGUI_GATEWAY_PUBLIC_URL": f"http://127.0.0.1:{port}",
            },
            read_only=True,
        )
        runtime.tmpfs["/var/lib/agui"] = "uid=10001,gid=10001,mode=0700"
        runtime.ports["8080/tcp"] = ("127.0.0.1", port)  # type: ignore[assignment]
        with idp, runtime:
            stack.wait_healthy(runtime)
            url = f"http://127.0.0.1:{port}"
            assert httpx.get(url + "/ping", timeout=10).json()["status"] in ("Healthy", "HealthyBusy")
            refused = httpx.post(url + "/invocations", json=plain("hi"), timeout=10)
            assert refused.status_code == 401 and "resource_metadata=" in refused.headers["www-authenticate"]
            token = issuer.token()
            with httpx.Client(timeout=60) as http:
                result = post_sse(http, url + "/invocations", plain("hello"), headers={"authorization": f"Bearer {token}"})
            assert result.status == 200 and result.terminal["outcome"] == {"type": "success"}, result.raw[-500:]
            events = asyncio.run(_ws_run(url.replace("http", "ws") + "/ws", "hello", {"authorization": f"Bearer {token}"}))
            assert events[-1]["type"] == "RUN_FINISHED"
    issuer.close()
