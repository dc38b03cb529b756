"""Test helpers: start real gateway processes, build requests, parse SSE and validate every event with ag_ui.core."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from ag_ui.core import Event as AguiEvent
from pydantic import TypeAdapter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVENT_ADAPTER = TypeAdapter(AguiEvent)
TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BackgroundServer:
    """An ASGI app (a peer agent for the tests) under uvicorn on a free loopback port, in a background thread;
    `url` is its AG-UI route, `requests` holds each request's body as the app received it, and `dropped` lists the
    paths of responses whose client went away mid-stream (what the app itself is told: ASGI's `http.disconnect`
    before its response ended)."""

    def __init__(self, app: Any, path: str) -> None:
        import threading

        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}{path}"
        self.dropped: list[str] = []
        self.requests: list[bytes] = []  # each request's whole body, as the app received it
        self.server = uvicorn.Server(uvicorn.Config(self._watched(app), host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def _watched(self, app: Any) -> Any:
        async def watched(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await app(scope, receive, send)
            ended = False
            body: list[bytes] = []

            async def sending(message: Any) -> None:
                nonlocal ended
                ended = ended or (message["type"] == "http.response.body" and not message.get("more_body", False))
                await send(message)

            async def receiving() -> Any:
                message = await receive()
                if message["type"] == "http.disconnect" and not ended:
                    self.dropped.append(scope["path"])
                elif message["type"] == "http.request":
                    body.append(message.get("body", b""))
                    if not message.get("more_body", False):
                        self.requests.append(b"".join(body))
                return message

            return await app(scope, receiving, sending)

        return watched

    def start(self) -> Any:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class Gateway:
    """A real `python -m server` process on loopback, with its log captured to a file."""

    def __init__(self, tmp_path, *args: str, env: dict[str, str] | None = None, nofile: int | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.state_dir = str(tmp_path / f"state-{self.port}")
        self.log_path = str(tmp_path / f"gateway-{self.port}.log")
        # "{url}" in an argument stands for this gateway's own URL (e.g. --public-url {url}).
        own = [arg.replace("{url}", self.url) for arg in args]
        self.args = ["--port", str(self.port), "--state-dir", self.state_dir, "--log-level", "debug", *own]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.nofile = nofile  # a descriptor limit (soft and hard) for the process, as a small host would have

    def _limit(self) -> None:
        if self.nofile is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def start(self) -> Gateway:
        with open(self.log_path, "ab") as log:  # the child has its own descriptor of it
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "server", *self.args], cwd=ROOT, env=self.env, stdout=log, stderr=log, preexec_fn=self._limit
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited: {self.logs()}")
            try:
                if httpx.get(self.url + "/ping", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError(f"gateway did not start: {self.logs()}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.proc:
            self.proc.kill()
            self.proc.wait()

    def logs(self) -> str:
        with open(self.log_path, "rb") as handle:
            return handle.read().decode(errors="replace")

    def wait_logged(self, text: str, timeout: float = 15, count: int = 1) -> None:
        """Poll the log until `text` appears (`count` times): what the gateway saw happen, not a clock's guess."""
        deadline = time.monotonic() + timeout
        while self.logs().count(text) < count:
            assert time.monotonic() < deadline, f"the gateway never logged {text!r}"
            time.sleep(0.02)


def ext(**overrides: Any) -> dict[str, Any]:
    base = {"schemaVersion": 1, "rosInvocationId": "inv-1", "cwd": "/tmp/agui-tests/ws"}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def run_body(
    text: str | None = "hello",
    *,
    thread: str | None = None,
    run: str | None = None,
    iac: dict | None = None,
    resume: list | None = None,
    messages: list | None = None,
    **extra: Any,
) -> dict[str, Any]:
    if messages is None:
        messages = [] if text is None else [{"id": "m-" + uuid.uuid4().hex[:6], "role": "user", "content": text}]
    body = {
        "threadId": thread or "thread-" + uuid.uuid4().hex[:12],
        "runId": run or "run-" + uuid.uuid4().hex[:12],
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": iac if iac is not None else ext()},
    }
    if resume is not None:
        body["resume"] = resume
    body.update(extra)
    return body


def raw_run_request(port: int, text: str) -> bytes:
    """A run request (a new thread, `text` as the user's message) as the bytes a raw socket sends."""
    body = json.dumps(run_body(text)).encode()
    head = (
        f"POST / HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"accept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def read_chunked_response(sock: socket.socket) -> bytes:
    """A whole chunked HTTP/1.1 response, head included, read off a raw socket to its last chunk."""
    raw = b""
    while not raw.endswith(b"0\r\n\r\n"):
        chunk = sock.recv(65536)
        assert chunk, "the connection closed before the response ended"
        raw += chunk
    return raw


def dechunk(raw: bytes) -> bytes:
    """The body of a whole chunked HTTP/1.1 response (head included in `raw`)."""
    body, rest = b"", raw.split(b"\r\n\r\n", 1)[1]
    while True:
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            return body
        body, rest = body + rest[:size], rest[size + 2 :]


@dataclass
class SseResult:
    status: int
    headers: httpx.Headers
    raw: bytes
    events: list[dict[str, Any]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)  # each event's `id:` (its position), None where absent

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    @property
    def terminal(self) -> dict[str, Any]:
        return self.events[-1]

    def custom(self, name: str) -> list[dict[str, Any]]:
        return [e["value"] for e in self.events if e["type"] == "CUSTOM" and e["name"] == name]


def parse_sse(raw: bytes) -> tuple[list[dict[str, Any]], list[str], list[str | None]]:
    """Parse an SSE body strictly: LF only, an optional `id:` line then one `data:` line per record; validate each
    event with ag_ui.core. Returns the events, the comments and each event's id (None where it had none)."""
    assert b"\r" not in raw, "SSE must use LF line endings only"
    events, comments, ids = [], [], []
    for record in raw.decode().split("\n\n"):
        if not record:
            continue
        lines = record.split("\n")
        if lines[0].startswith(":"):
            assert len(lines) == 1, f"a comment is a record of its own: {record!r}"
            comments.append(lines[0])
            continue
        event_id = None
        if lines[0].startswith("id: "):
            event_id = lines.pop(0)[4:]
            assert event_id.isdigit(), event_id
        assert len(lines) == 1, f"one data line per record expected: {record!r}"
        assert lines[0].startswith("data: "), lines[0]
        event = json.loads(lines[0][6:])
        assert_no_nulls({key: value for key, value in event.items() if key not in PAYLOAD_FIELDS})
        EVENT_ADAPTER.validate_python(event)
        events.append(event)
        ids.append(event_id)
    return events, comments, ids


# The fields whose values are the agent's or the user's own JSON (a state, a patch, a raw framework event, a
# custom value, messages): null is data there. Every other field is the gateway's, where an optional one is
# omitted, never null.
PAYLOAD_FIELDS = frozenset({"snapshot", "delta", "patch", "event", "value", "messages", "content", "result"})


def assert_no_nulls(value: Any, path: str = "$") -> None:
    """No field of the gateway's is sent as null; an agent's `rawEvent` is its own, passed on as it sent it."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert item is not None, f"null at {path}.{key}"
            if key != "rawEvent":
                assert_no_nulls(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            assert_no_nulls(item, f"{path}[{index}]")


def assert_well_formed_run(events: list[dict[str, Any]]) -> None:
    """RUN_STARTED first (protocolVersion 1.0), one terminal last with matching ids, spans balanced."""
    assert events and events[0]["type"] == "RUN_STARTED", events[:1]
    assert events[0]["protocolVersion"] == "1.0"
    assert events[-1]["type"] in TERMINAL
    assert sum(e["type"] in TERMINAL for e in events) == 1
    if events[-1]["type"] == "RUN_FINISHED":
        assert (events[-1]["threadId"], events[-1]["runId"]) == (events[0]["threadId"], events[0]["runId"])
        open_spans: set[tuple[str, str]] = set()
        pairs = {
            "TEXT_MESSAGE_START": ("TEXT_MESSAGE_END", "messageId"),
            "REASONING_START": ("REASONING_END", "messageId"),
            "REASONING_MESSAGE_START": ("REASONING_MESSAGE_END", "messageId"),
            "TOOL_CALL_START": ("TOOL_CALL_END", "toolCallId"),
            "STEP_STARTED": ("STEP_FINISHED", "stepName"),
        }
        closers = {end: (start, key) for start, (end, key) in pairs.items()}
        for event in events:
            kind = event["type"]
            if kind in pairs:
                span = (kind, event[pairs[kind][1]])
                assert span not in open_spans, f"span opened twice: {span}"
                open_spans.add(span)
            elif kind in closers:
                start, key = closers[kind]
                assert (start, event[key]) in open_spans, f"closing a span that is not open: {event}"
                open_spans.discard((start, event[key]))
        assert not open_spans, f"spans left open: {open_spans}"


def post_sse(client: httpx.Client, url: str, body: Any, *, headers: dict[str, str] | None = None, raw: bytes | None = None) -> SseResult:
    hdrs = {"content-type": "application/json", "accept": "text/event-stream", **(headers or {})}
    content = raw if raw is not None else json.dumps(body).encode()
    response = client.post(url, content=content, headers=hdrs, timeout=60)
    result = SseResult(response.status_code, response.headers, response.content)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        result.events, result.comments, result.ids = parse_sse(response.content)
    return result


def session_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The `iac-code.session.v1` value of a run's events."""
    return next(e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "iac-code.session.v1")


def pending_interrupt(result: SseResult) -> dict[str, Any]:
    assert "outcome" in result.terminal, result.terminal
    outcome = result.terminal["outcome"]
    assert outcome["type"] == "interrupt", result.terminal
    return outcome["interrupts"][0]


class InProcessGateway:
    """A real uvicorn server in a background thread, for apps built with an injected store or agent."""

    def __init__(self, app) -> None:
        import threading

        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        from server.serve import uvicorn_options

        options = uvicorn_options(app.state.services.settings)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None, **options))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> InProcessGateway:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "in-process server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class RedisServer:
    """A real redis-server on a free loopback port, in a temp dir; can be stopped and restarted on the same port."""

    def __init__(self, directory, *extra_args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.extra_args = list(extra_args)
        self.directory = str(directory)
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        import shutil

        binary = shutil.which("redis-server")
        assert binary, "redis-server is required for these tests (.ci/run installs it)"
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.directory,
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def thread_state(state_dir: str, thread_id: str) -> dict | None:
    """A thread's newest state as the file store's journal holds it on disk (acknowledged writes are there)."""
    from store.journal import payload_of, scan

    with open(os.path.join(state_dir, "threads.journal"), "rb") as handle:
        data = handle.read()
    slot = scan(data).slots.get(thread_id)
    if slot is None:
        return None
    payload = payload_of(data[slot[0] : slot[0] + slot[1]])
    assert payload is not None
    return json.loads(payload)


def corrupt_thread(state_dir: str, thread_id: str) -> None:
    """Append to a stopped gateway's journal a record for `thread_id` whose checksum does not hold."""
    from store.journal import HEADER, state_record

    path = os.path.join(state_dir, "threads.journal")
    line = state_record(json.dumps({"thread_id": thread_id, "updated_at": 0}).encode())
    with open(path, "ab") as handle:
        if handle.tell() == 0:
            handle.write(HEADER)
        handle.write(line[:1] + b"00000000" + line[9:])
