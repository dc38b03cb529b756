"""The iac-code runtime's wire habits around the a2a-sdk app of the test agent (IAC_CODE_A2A_WIRE.md).

An ASGI wrapper that behaves as the real runtime does where a2a-sdk alone would not: it validates answers as
`input_required.parse_permission_response` does, acknowledges sideband answers sent with SendMessage, and, when
a frame asks for it, ends an answer stream early, sends a frame after COMPLETED, or strips the result wrapper.
It also plays the hostile or broken agent some tests need (a dropped connection, a refused answer, a deep frame).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

PERMISSION_KEYS = {"schemaVersion", "kind", "requestTaskId", "inputId", "toolUseId", "decision"}
WRAPPERS = ("task", "statusUpdate", "artifactUpdate", "message")


def rpc_error(request_id: Any, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def answer_problem(message: dict[str, Any]) -> str | None:
    """Why the runtime would refuse this permission answer (-32602), or None when it takes it."""
    parts = message.get("parts") or []
    data_parts = [p for p in parts if "data" in p]
    if not data_parts:
        return None
    if len(parts) != 1:
        return "a permission answer has exactly one part"
    part = parts[0]
    if part.get("mediaType") != "application/json" or not isinstance(part.get("data"), dict):
        return "a permission answer is one application/json data part"
    data = part["data"]
    if set(data) != PERMISSION_KEYS or data.get("kind") != "permission":
        return f"a permission answer has exactly the keys {sorted(PERMISSION_KEYS)}"
    if message.get("role") != "ROLE_USER" or message.get("taskId") != data.get("requestTaskId"):
        return "a permission answer comes from the user, on the task that asked"
    return None


class RuntimeWire:
    """Wraps the a2a-sdk ASGI app; `agent` is the ScriptedAgent (for its calls, decisions and switches)."""

    def __init__(self, app: Any, server: Any) -> None:
        self.app = app
        self.server = server

    @property
    def agent(self) -> Any:
        return self.server.agent

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/":
            return await self.app(scope, receive, send)
        raw = await _body(receive)
        body = json.loads(raw or b"{}")
        method = body.get("method", "")
        self.server.rpc_methods.append(method)
        headers = dict(scope["headers"])
        self.server.traceparents.append(headers.get(b"traceparent", b"").decode())
        self.server.rpc_headers.append({name: headers.get(name.encode(), b"").decode() for name in ("a2a-version", "authorization")})
        self.server.requests.append(body)
        message = (body.get("params") or {}).get("message") or {}
        text = "".join(p.get("text", "") for p in message.get("parts", []))
        replay = _replay(raw, receive)
        if text == "deep-frame":
            return await self._deep_frame(body, send)
        if self.agent.refuse_next_answer:
            if text.startswith("drop"):
                return await self._drop(body, send)
            if method == "SendStreamingMessage" and message.get("taskId"):
                self.agent.refuse_next_answer -= 1
                self.agent.calls.append({"method": "refused", "message": message})
                return await _sse(send, [rpc_error(body.get("id"), -32603, "not now (on purpose)", self.agent.refusal_data)])
        if method in ("SendStreamingMessage", "SendMessage") and message.get("taskId"):
            problem = answer_problem(message)
            if problem is not None:
                self.agent.calls.append({"method": "invalid-answer", "message": message, "problem": problem})
                error = rpc_error(body.get("id"), -32602, problem)
                return await (_sse(send, [error]) if method == "SendStreamingMessage" else _json(send, error))
        if method == "SendMessage":
            return await self._sideband(body, message, scope, replay, send)
        frames = _FrameFilter(send, bare=text.startswith("bare"))
        return await self.app(scope, frames.receive(replay), frames)

    async def _sideband(self, body: dict[str, Any], message: dict[str, Any], scope: Any, replay: Any, send: Any) -> None:
        """A sub-pipeline's permission answer: acknowledged at once; the last one lets the task go on."""
        data = message["parts"][0]["data"]
        task_id = message["taskId"]
        self.agent.calls.append({"method": "SendMessage", "message": message})
        decisions = self.agent.decisions.setdefault(task_id, {})
        decisions[data["inputId"]] = data["decision"]
        if len(decisions) >= self.agent.expected_answers.get(task_id, 1):
            body = {**body, "params": {**body["params"], "configuration": {"returnImmediately": True}}}
            await self.app(scope, _replay(json.dumps(body).encode(), replay), _discard)
            await self._until_not_waiting(task_id)
        ack = {
            "role": "ROLE_AGENT",
            "messageId": f"ack-{data['inputId']}",
            "contextId": message.get("contextId"),
            "taskId": task_id,
            "parts": [
                {
                    "data": {
                        **{k: data[k] for k in ("inputId", "toolUseId", "decision")},
                        "schemaVersion": 1,
                        "kind": "permission_ack",
                        "accepted": True,
                    },
                    "mediaType": "application/json",
                }
            ],
        }
        await _json(send, json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "result": {"message": ack}}).encode())

    async def _until_not_waiting(self, task_id: str) -> None:
        from a2a.types import TaskState

        for _ in range(150):
            owners = self.server.task_store._impl.tasks.values()  # every owner's tasks (the store keys them by owner)
            task = next((tasks[task_id] for tasks in owners if task_id in tasks), None)
            if task is not None and task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                return
            await asyncio.sleep(0.02)

    async def _deep_frame(self, body: dict[str, Any], send: Any) -> None:
        """A hostile agent: one frame whose metadata nests 300 levels deep."""
        nested = "[" * 300 + "1" + "]" * 300
        context = json.dumps(body["params"]["message"]["contextId"])
        frame = '{"jsonrpc":"2.0","id":' + json.dumps(body.get("id")) + ',"result":{"task":{"id":"deep-task","contextId":' + context
        frame += ',"status":{"state":"TASK_STATE_WORKING"},"metadata":{"x":' + nested + "}}}}"
        await _sse(send, [frame.encode()])

    async def _drop(self, body: dict[str, Any], send: Any) -> None:
        """A dropped connection: one frame, then the socket goes away mid-stream."""
        self.agent.refuse_next_answer -= 1
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        task = {"id": "dropped-task", "contextId": body["params"]["message"]["contextId"], "status": {"state": "TASK_STATE_WORKING"}}
        frame = json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "result": {"task": task}})
        await send({"type": "http.response.body", "body": f"data: {frame}\n\n".encode(), "more_body": True})
        raise ConnectionResetError("dropped on purpose")


class _FrameFilter:
    """Rewrites the SSE frames of a streamed reply as the runtime's habits ask (markers in `metadata.iac_code`):
    `testCutStream` ends the reply after that frame while the task goes on; `testLateFrame` sends one more
    frame after it and then keeps the reply open; `bare` strips each result's wrapper key."""

    def __init__(self, send: Any, *, bare: bool) -> None:
        self.send = send
        self.bare = bare
        self.buffer = b""
        self.cut = False

    def receive(self, receive: Any) -> Any:
        """After a cut the app never hears that the client went: the task goes on, as the runtime's does."""

        async def wrapped() -> dict[str, Any]:
            message = await receive()
            if self.cut and message.get("type") == "http.disconnect":
                await asyncio.Event().wait()  # never: the app is ended by its own last frame
            return message

        return wrapped

    async def __call__(self, message: dict[str, Any]) -> None:
        if self.cut:
            return  # the client was told the reply ended; the task itself goes on
        if message["type"] != "http.response.body":
            await self.send(message)
            return
        self.buffer += message.get("body", b"").replace(b"\r\n", b"\n")
        records, _, self.buffer = self.buffer.rpartition(b"\n\n")
        for record in records.split(b"\n\n") if records else []:
            await self._record(record)
            if self.cut:
                return
        if not message.get("more_body"):
            await self.send({"type": "http.response.body", "body": self.buffer, "more_body": False})

    async def _record(self, record: bytes) -> None:
        lines = record.split(b"\n")
        data = [line[5:].strip() for line in lines if line.startswith(b"data:")]
        if not data:
            await self.send({"type": "http.response.body", "body": record + b"\n\n", "more_body": True})
            return
        frame = json.loads(data[0])
        result = frame.get("result") or {}
        iac = _iac_of(result)
        if self.bare:
            key = next((k for k in WRAPPERS if k in result), None)
            if key is not None:
                frame["result"] = result[key]
        await self.send({"type": "http.response.body", "body": b"data: " + json.dumps(frame).encode() + b"\n\n", "more_body": True})
        if iac.get("testCutStream"):
            self.cut = True
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        elif iac.get("testLateFrame"):
            update = next(iter(result.values()))
            late = {
                "taskId": update.get("taskId"),
                "contextId": update.get("contextId"),
                "status": {
                    "state": "TASK_STATE_WORKING",
                    "message": {"messageId": "late", "role": "ROLE_AGENT", "parts": [{"text": "late"}]},
                },
            }
            body = json.dumps({"jsonrpc": "2.0", "id": frame.get("id"), "result": {"statusUpdate": late}})
            await self.send({"type": "http.response.body", "body": f"data: {body}\n\n".encode(), "more_body": True})
            self.cut = True
            await asyncio.sleep(10)  # a runtime that keeps its reply open: the gateway must not wait for it
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})


def _iac_of(result: dict[str, Any]) -> dict[str, Any]:
    """The markers of a status update (a Task snapshot repeats them in its metadata: not a new request)."""
    update = result.get("statusUpdate")
    metadata = update.get("metadata") if isinstance(update, dict) else None
    iac = metadata.get("iac_code") if isinstance(metadata, dict) else None
    return iac if isinstance(iac, dict) else {}


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(raw: bytes, receive: Any) -> Any:
    """The body once, then the real channel (which reports the disconnect)."""
    pending = [raw]

    async def replay() -> dict[str, Any]:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        return await receive()

    return replay


async def _discard(message: dict[str, Any]) -> None:
    return None


async def _sse(send: Any, frames: list[bytes]) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b"".join(b"data: " + f + b"\n\n" for f in frames)})


async def _json(send: Any, body: bytes) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
