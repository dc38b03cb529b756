"""Hostile and broken clients against real servers, with raw sockets where a well-behaved client cannot misbehave.
Each attack is shown not to slow a normal run on another thread."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import threading
import time
import uuid

import httpx
import pytest
import websockets

from tests.support import Gateway, post_sse, run_body

HUGE = "x" * 257

# Every connection limit holds on both HTTP parsers: httptools (the default) and h11 (--http h11).
PARSERS = ("httptools", "h11")


def normal_run_seconds(url: str) -> float:
    started = time.monotonic()
    with httpx.Client(timeout=30) as http:
        result = post_sse(http, url + "/", run_body("still fast"))
    assert result.status == 200 and result.terminal["outcome"]["type"] == "success"
    return time.monotonic() - started


def assert_still_fast(url: str, baseline: float) -> None:
    during = normal_run_seconds(url)
    assert during < max(1.0, baseline * 10), f"a normal run took {during:.2f} s during the attack (baseline {baseline:.3f} s)"


def content_length(head: bytes) -> int:
    found = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
    return int(found.group(1)) if found else 0


def read_all(raw: socket.socket) -> bytes:
    """Everything the server sends until it closes (or stops for the socket's timeout)."""
    answer = b""
    with contextlib.suppress(ConnectionResetError, TimeoutError):
        while chunk := raw.recv(65536):
            answer += chunk
    return answer


def raw_request(port: int, data: bytes, *, source: str = "127.0.0.1", timeout: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as raw:
        raw.sendall(data)
        return read_all(raw)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.update(threadId=HUGE), "threadId"),
        (lambda b: b.update(runId=HUGE), "runId"),
        (lambda b: b.update(parentRunId=HUGE), "parentRunId"),
        (lambda b: b["messages"][0].update(id=HUGE), "messages[0].id"),
        (lambda b: b["messages"].append({"id": "t", "role": "tool", "content": "x", "toolCallId": HUGE}), "messages[1].toolCallId"),
        (lambda b: b.update(resume=[{"interruptId": HUGE, "status": "cancelled"}]), "resume[0].interruptId"),
    ],
)
def test_identifiers_are_bounded(gateway, client, mutate, field):
    body = run_body("hi")
    mutate(body)
    refused = client.post(gateway.url + "/", json=body)
    assert refused.status_code == 400 and refused.json()["error"]["field"] == field


async def test_stream_ids_are_bounded_and_the_socket_cap_has_its_own_code(gateway):
    url = gateway.url.replace("http", "ws") + "/ws"
    async with websockets.connect(url, subprotocols=["agui-mux.v1"]) as ws:
        await ws.send(json.dumps({"op": "run", "id": HUGE, "input": run_body("x")}))
        refused = json.loads(await ws.recv())["event"]
        assert refused["type"] == "RUN_ERROR" and refused["code"] == "INVALID_INPUT" and refused["metadata"]["field"] == "id"
        for index in range(17):
            await ws.send(json.dumps({"op": "run", "id": f"s{index}", "input": run_body("/sleep 30", thread=f"t-{uuid.uuid4().hex}")}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if frame["id"] == "s16":
                assert frame["event"]["code"] == "TOO_MANY_RUNS_ON_SOCKET", frame
                break


@pytest.mark.parametrize("http", PARSERS)
@pytest.mark.timing
def test_a_client_that_never_reads_frees_its_run_and_thread_after_the_send_deadline(start_gateway, http):
    server = start_gateway("--http", http, "--send-timeout-seconds", "2", "--max-concurrent-runs", "3")
    baseline = normal_run_seconds(server.url)
    body = run_body("/flood 1000000")
    request = json.dumps(body).encode()
    head = f"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len(request)}\r\n\r\n".encode()
    stalled = []
    for index in range(2):  # two stalled readers, with room left for a normal run
        raw = socket.create_connection(("127.0.0.1", server.port))
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.sendall(head + (request if index == 0 else json.dumps(run_body("/flood 1000000")).encode()))
        stalled.append(raw)
    try:
        time.sleep(0.5)
        assert_still_fast(server.url, baseline)
        deadline = time.monotonic() + 15
        with httpx.Client(timeout=30) as http:
            while True:  # the stalled run's thread is free again once its client is dropped
                again = post_sse(http, server.url + "/", run_body("mine again", thread=body["threadId"]))
                if again.status == 200:
                    break
                assert again.status == 409 and time.monotonic() < deadline, again.raw
                time.sleep(0.25)
            while json.loads(http.get(server.url + "/health").text)["runsInFlight"]:  # the other stalled run settles too
                assert time.monotonic() < deadline, "a stalled reader's run is still in flight"
                time.sleep(0.1)
    finally:
        for raw in stalled:
            raw.close()
    assert "run ended" in server.logs() and "disconnected" in server.logs()


def masked_text_frame(payload: bytes) -> bytes:
    mask = os.urandom(4)
    length = len(payload)
    head = bytes([0x81])
    if length < 126:
        head += bytes([0x80 | length])
    elif length < 65536:
        head += bytes([0x80 | 126]) + length.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + length.to_bytes(8, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


@pytest.mark.timing
def test_a_websocket_that_never_reads_is_dropped_at_the_send_deadline(start_gateway):
    server = start_gateway("--send-timeout-seconds", "2")
    baseline = normal_run_seconds(server.url)
    body = run_body("/flood 1000000")
    raw = socket.create_connection(("127.0.0.1", server.port))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    raw.sendall(
        f"GET /ws HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
        f"sec-websocket-key: {key}\r\nsec-websocket-version: 13\r\n\r\n".encode()
    )
    assert raw.recv(4096).startswith(b"HTTP/1.1 101")
    raw.sendall(masked_text_frame(json.dumps(body).encode()))  # then this client reads nothing more
    try:
        time.sleep(0.5)
        assert_still_fast(server.url, baseline)
        deadline = time.monotonic() + 15
        with httpx.Client(timeout=30) as http:
            while True:
                answer = post_sse(http, server.url + "/", run_body("free again", thread=body["threadId"]))
                if answer.status == 200:
                    break
                assert answer.status == 409 and time.monotonic() < deadline, answer.raw
                time.sleep(0.25)
        # The gateway closed the socket at the deadline: the run ended as its client's going, after its writes had
        # stalled for the 2 s deadline (the run's own clock, in its log line), and the client's socket is dead.
        server.wait_logged(f"run={body['runId']} outcome=disconnected")
        ended = re.search(rf"run={body['runId']} outcome=disconnected seconds=([0-9.]+)", server.logs())
        assert ended and 2.0 <= float(ended.group(1)) < 15, server.logs()[-2000:]
        raw.settimeout(10)  # a socket left open, or one the kernel still feeds, fails here
        with pytest.raises(ConnectionResetError):
            while raw.recv(1 << 20):
                pass  # what reached this socket's own buffer before the reset
    finally:
        raw.close()


@pytest.mark.parametrize("http", PARSERS)
@pytest.mark.timing
def test_slowloris_connections_are_cut_and_do_not_starve_others(start_gateway, http):
    server = start_gateway("--http", http, "--header-timeout-seconds", "2", "--max-connections-per-client", "100")
    baseline = normal_run_seconds(server.url)
    attackers: list[socket.socket] = []
    refused_over_cap = 0
    for _ in range(500):  # from another loopback address, so the cap applies to the attacker only
        raw = socket.create_connection(("127.0.0.1", server.port), source_address=("127.0.0.2", 0))
        raw.sendall(b"POST / HTTP/1.1\r\nhost: x\r\nx-slow: ")
        attackers.append(raw)
    try:
        time.sleep(0.3)
        assert_still_fast(server.url, baseline)
        for raw in attackers:
            raw.settimeout(6)
            try:
                answer = raw.recv(4096)
            except (ConnectionResetError, TimeoutError):
                answer = b""
            if answer.startswith(b"HTTP/1.1 429"):
                refused_over_cap += 1
            else:
                assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
        assert refused_over_cap == 400, "100 connections per address; the rest refused at once"
    finally:
        for raw in attackers:
            raw.close()


@pytest.mark.parametrize("http", PARSERS)
@pytest.mark.timing
def test_a_head_trickled_on_a_kept_alive_connection_gets_408_at_its_deadline(start_gateway, http):
    """A request answered whole, then the next head on the same connection stops halfway: its deadline runs from
    that chunk (a head whole in one chunk starts none), and the client reads a 408, not a silent close."""
    server = start_gateway("--http", http, "--header-timeout-seconds", "1")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(b"GET /ping HTTP/1.1\r\nhost: x\r\n\r\n")
        first = b""
        while b"\r\n\r\n" not in first or len(first.partition(b"\r\n\r\n")[2]) < content_length(first):
            first += raw.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 "), first[:100]
        time.sleep(1.5)  # idle between requests longer than the head deadline: no head, no deadline
        raw.sendall(b"GET /ping HTTP/1.1\r\nhost: x\r\nx-slow: ")
        started = time.monotonic()
        answer = read_all(raw)
    assert answer.startswith(b"HTTP/1.1 408 ") and b'"code":"REQUEST_TIMEOUT"' in answer, answer[:200]
    assert 0.5 < time.monotonic() - started < 5


@pytest.mark.parametrize("http", PARSERS)
@pytest.mark.timing
def test_a_trickled_body_gets_408_and_an_oversized_chunked_body_a_413_then_a_close(start_gateway, http):
    server = start_gateway("--http", http, "--body-timeout-seconds", "2")
    baseline = normal_run_seconds(server.url)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{")
        answer = read_all(raw)
    assert answer.startswith(b"HTTP/1.1 408") and b"REQUEST_TIMEOUT" in answer
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (1024 * 1024, b"a" * 1024 * 1024)
        sent = [0]

        def keep_sending() -> None:  # as fast as the server takes it, up to 200 MiB
            with contextlib.suppress(OSError):
                while sent[0] < 200:
                    raw.sendall(chunk)
                    sent[0] += 1

        sender = threading.Thread(target=keep_sending, daemon=True)
        sender.start()
        answer = raw.recv(4096)
        sender.join(10)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
        assert not sender.is_alive() and sent[0] < 60, f"the server stopped reading after the 413 ({sent[0]} MiB went in, not 200)"
    assert_still_fast(server.url, baseline)


def deep_body(run_id: str, depth: int = 5000) -> str:
    """A run input whose state nests `depth` arrays deep (as text: no encoder could build it)."""
    body = run_body("hi", run=run_id, state={"x": "PLACEHOLDER"})
    return json.dumps(body).replace('"PLACEHOLDER"', "[" * depth + '"deep"' + "]" * depth)


async def test_deep_json_is_invalid_input_everywhere(gateway, client):
    headers = {"content-type": "application/json"}
    root = client.post(gateway.url + "/", content=deep_body("deep-root"), headers=headers)
    assert root.status_code == 400 and root.json()["error"]["code"] == "INVALID_INPUT"
    invocations = post_sse(client, gateway.url + "/invocations", None, raw=deep_body("deep-inv").encode())
    assert invocations.status == 400 and invocations.events[0]["code"] == "VALIDATION_ERROR"
    url = gateway.url.replace("http", "ws") + "/ws"
    async with websockets.connect(url) as ws:
        await ws.send(deep_body("deep-ws"))
        refused = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert refused["type"] == "RUN_ERROR" and refused["code"] == "INVALID_INPUT"
        await ws.send(json.dumps(run_body("still open")))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "RUN_STARTED"
    async with websockets.connect(url, subprotocols=["agui-mux.v1"]) as ws:
        await ws.send('{"op":"run","id":"d","input":' + deep_body("deep-mux") + "}")
        refused = json.loads(await asyncio.wait_for(ws.recv(), 10))["event"]
        assert refused["type"] == "RUN_ERROR" and refused["code"] == "INVALID_INPUT"
        await ws.send(json.dumps({"op": "run", "id": "ok", "input": run_body("fine")}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["event"]["type"] == "RUN_STARTED"


def test_a_symlink_out_of_an_allowed_root_is_refused(start_gateway, client, tmp_path):
    root = tmp_path / "root"
    (root / "project").mkdir(parents=True)
    os.symlink("/etc", root / "escape")
    server = start_gateway("--allowed-cwd", str(root))

    def iac(cwd):
        return {"schemaVersion": 1, "rosInvocationId": "inv", "cwd": cwd}

    refused = client.post(server.url + "/", json=run_body("x", iac=iac(str(root / "escape"))))
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "forwardedProps.iacCode.cwd"
    inside = post_sse(client, server.url + "/", run_body("x", iac=iac(str(root / "project"))))
    assert inside.status == 200


def test_log_lines_cannot_be_forged_and_never_hold_credentials(start_gateway, client):
    server = start_gateway()
    forged = "t\r\n2026-01-01 00:00:00,000 INFO agui.engine: FORGED"
    post_sse(client, server.url + "/", run_body("hi", thread=forged))
    secrets = {"ticket": "tkt-" + uuid.uuid4().hex, "token": "tok-" + uuid.uuid4().hex, "access_token": "acc-" + uuid.uuid4().hex}
    for name, value in secrets.items():
        with contextlib.suppress(Exception):
            asyncio.run(_open_ws(server.url.replace("http", "ws") + f"/ws?{name}={value}"))
        client.get(server.url + f"/health?{name}={value}")
    server.stop()
    logs = server.logs()
    assert "FORGED" in logs and not any(line.startswith("2026-01-01") for line in logs.splitlines())
    for value in secrets.values():
        assert value not in logs


async def _open_ws(url: str) -> None:
    async with websockets.connect(url):
        pass


def test_http_level_refusals_use_the_contract_shape(gateway, client):
    smuggled = raw_request(
        gateway.port,
        b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    )
    assert smuggled.startswith(b"HTTP/1.1 400") and b'"code":"INVALID_INPUT"' in smuggled
    nul = client.get(gateway.url + "/ui/%00")
    assert nul.status_code == 404 and nul.json()["error"]["code"] == "NOT_FOUND"


ROUTES = {
    "/": "POST",
    "/invocations": "POST",
    "/ws/tickets": "POST",
    "/health": "GET",
    "/ping": "GET",
    "/extensions/iac-code/v1/executions/e/cancel": "POST",
    "/ui/": "GET",
}


def test_every_route_answers_wrong_methods_and_bad_paths_in_the_contract_shape(gateway, client):
    for path, method in ROUTES.items():
        for wrong in ("GET", "POST", "PUT", "DELETE", "PATCH"):
            if wrong == method:
                continue
            response = client.request(wrong, gateway.url + path)
            if path == "/invocations":
                assert response.text.startswith("data: ") and '"type":"RUN_ERROR"' in response.text, (wrong, path, response.text)
            else:
                assert response.status_code == 405, (wrong, path, response.status_code)
                assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    for bad in ("/nope", "/ws/tickets/x", "/extensions/iac-code/v1/executions", "/ui/../../etc/passwd", "/%ff"):
        response = client.get(gateway.url + bad)
        assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND", (bad, response.text)


def test_the_run_routes_have_one_entrance_whatever_the_method_or_the_spelling_of_the_path(gateway, client):
    """`/`, `/invocations` and `/ws` are served by the fast path alone: a wrong method names what is allowed,
    OPTIONS answers it, `//` and a trailing slash name the same route, and a WebSocket opens on `/ws/` too."""
    for path in ("/", "/invocations", "/invocations/", "//invocations"):
        wrong = client.get(gateway.url + path)
        assert wrong.headers["allow"] == "OPTIONS, POST", (path, wrong.headers)
        assert "METHOD_NOT_ALLOWED" in wrong.text
        options = client.options(gateway.url + path)
        assert options.status_code == 204 and options.headers["allow"] == "OPTIONS, POST"
    assert client.get(gateway.url + "/ws/").json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    result = post_sse(client, gateway.url + "//", run_body("through a double slash"))
    assert "".join(e["delta"] for e in result.of("TEXT_MESSAGE_CONTENT")) == "You said: through a double slash"

    async def opens(path: str) -> str:
        async with websockets.connect(gateway.url.replace("http", "ws") + path) as ws:
            return ws.response.reason_phrase

    for path in ("/ws", "/ws/", "//ws"):
        assert asyncio.run(opens(path)) == "Switching Protocols", path
    with pytest.raises(websockets.InvalidStatus):
        asyncio.run(opens("/invocations"))


def test_cancel_with_another_user_id_is_an_unknown_execution(gateway, client):
    iac = {"schemaVersion": 1, "rosInvocationId": "inv-c", "cwd": "/tmp", "userId": "alice"}
    body = run_body("/tool deploy {}", iac=iac)
    first = post_sse(client, gateway.url + "/", body)
    execution = first.custom("iac-code.session.v1")[0]["executionId"]
    path = f"{gateway.url}/extensions/iac-code/v1/executions/{execution}/cancel"
    other = client.post(path, json={"threadId": body["threadId"], "rosInvocationId": "inv-c", "userId": "mallory"})
    nobody = client.post(path, json={"threadId": body["threadId"], "rosInvocationId": "inv-c"})
    unknown = client.post(f"{gateway.url}/extensions/iac-code/v1/executions/exec-x/cancel", json={"threadId": "t", "rosInvocationId": "i"})
    assert other.status_code == nobody.status_code == unknown.status_code == 404
    assert other.json() == unknown.json()
    mine = client.post(path, json={"threadId": body["threadId"], "rosInvocationId": "inv-c", "userId": "alice"})
    assert mine.json()["status"] == "cancelled"


def test_silent_and_reconnecting_sockets_leave_descriptors_for_normal_runs(tmp_path):
    """At a descriptor limit of 256, 300 sockets that never send a byte and tricklers that reconnect as soon as they
    are closed (from another loopback address) neither starve normal runs nor keep their descriptors."""
    server = Gateway(tmp_path, "--allowed-cwd", "/tmp", "--header-timeout-seconds", "2", nofile=256).start()
    try:
        baseline = min(normal_run_seconds(server.url) for _ in range(3))
        silent: list[socket.socket] = []
        for _ in range(300):
            raw = socket.socket()
            raw.bind(("127.0.0.2", 0))
            raw.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                raw.connect(("127.0.0.1", server.port))
            silent.append(raw)
        stop = threading.Event()
        reconnects = [0]

        def trickle() -> None:  # bounded: at most 2,000 connections, for as long as the normal runs take
            while not stop.is_set() and reconnects[0] < 2000:
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", server.port), timeout=5, source_address=("127.0.0.2", 0)) as raw,
                ):
                    raw.sendall(b"POST / HTTP/1.1\r\nhost: x\r\n")
                    reconnects[0] += 1
                    raw.recv(1)  # until the server closes it

        tricklers = [threading.Thread(target=trickle) for _ in range(8)]
        for thread in tricklers:
            thread.start()
        try:
            time.sleep(0.5)
            during = [normal_run_seconds(server.url) for _ in range(10)]
        finally:
            stop.set()
            for thread in tricklers:
                thread.join(10)
        assert max(during) < max(1.0, baseline * 10), (baseline, during)
        assert reconnects[0] > 0
        time.sleep(3)  # past the header timeout: the silent sockets the server held are closed, with no answer
        answers = {"closed": 0, "refused": 0, "open": 0}
        for raw in silent:
            raw.setblocking(True)
            raw.settimeout(1)
            answer = b""
            try:
                while chunk := raw.recv(65536):
                    answer += chunk
            except TimeoutError:
                answers["open"] += 1
                continue
            except ConnectionResetError:
                pass
            answers["refused" if answer.startswith(b"HTTP/1.1 429") else "closed"] += 1
            assert answer == b"" or answer.startswith(b"HTTP/1.1 429"), answer[:80]
        assert answers["open"] == 0, answers
        held = answers["closed"]
        assert 0 < held <= (256 - 64) // 4 + 8, answers  # one address holds a share of the descriptors at most
        assert answers["refused"] + held == len(silent)
        health = httpx.get(server.url + "/health", timeout=5).json()
        assert health["fileDescriptors"]["open"] < 128, health["fileDescriptors"]
    finally:
        for raw in silent:
            raw.close()
        server.stop()


@pytest.mark.parametrize("http", PARSERS)
@pytest.mark.timing
def test_head_limits_pipelining_and_malformed_requests_on_either_parser(start_gateway, http):
    """431 past 64 KiB of head, read by the client rather than lost to a reset; a silent connection closed at the
    head deadline with no answer; pipelined requests answered in order; a malformed request a contract 400."""
    server = start_gateway("--http", http, "--header-timeout-seconds", "1")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(b"GET /ping HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * (70 * 1024) + b"\r\n\r\n")
        answer = read_all(raw)
    assert answer.startswith(b"HTTP/1.1 431 ") and b'"code":"INVALID_INPUT"' in answer, answer[:200]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        started = time.monotonic()
        assert read_all(raw) == b"" and 0.5 < time.monotonic() - started < 5, "closed at the head deadline, unanswered"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(b"GET /ping HTTP/1.1\r\nhost: x\r\n\r\nGET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        answer = read_all(raw)
    assert answer.count(b"HTTP/1.1 200 ") == 2 and answer.index(b'"status"') < answer.index(b"runsInFlight"), answer[:300]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(b"GET /ping HTTP/1.1\r\nhost x\r\n\r\n")
        answer = read_all(raw)
    assert answer.startswith(b"HTTP/1.1 400 ") and b'"code":"INVALID_INPUT"' in answer, answer[:200]
    assert " ERROR " not in server.logs()
