"""A real A2A 1.0 agent for tests, built with a2a-sdk and served by uvicorn on loopback.

The first word of the user's text picks a script that emits the signals of A2A_BACKEND.md; every
request and every CancelTask is recorded in `calls` for the tests to inspect.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.support import free_port

S = TaskState


def text_message(updater: TaskUpdater, text: str, message_id: str = "agent-msg-1") -> Message:
    return Message(
        message_id=message_id, role=Role.ROLE_AGENT, parts=[Part(text=text)], context_id=updater.context_id, task_id=updater.task_id
    )


def iac(**signals: Any) -> dict[str, Any]:
    return {"iac_code": signals}


class ScriptedAgent(AgentExecutor):
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.refuse_next_answer = 0
        self.last_input = ""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        message = MessageToDict(context.message) if context.message else {}
        self.calls.append({"method": "SendStreamingMessage", "message": message, "taskId": context.task_id})
        up = TaskUpdater(queue, context.task_id, context.context_id)
        if not context.current_task:
            await queue.enqueue_event(
                Task(id=context.task_id, context_id=context.context_id, status=TaskStatus(state=S.TASK_STATE_SUBMITTED))
            )
        data_parts = [p.get("data") for p in message.get("parts", []) if "data" in p]
        if context.current_task is not None and (data_parts or message.get("parts")):
            await self.answer(up, message, data_parts)
            return
        self.last_input = context.get_user_input() or "plain"
        script = self.last_input.split()[0].lstrip("/")
        await getattr(self, "script_" + script.replace("-", "_"), self.script_plain)(up, queue)

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        self.calls.append({"method": "CancelTask", "taskId": context.task_id})
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()

    # -- scripts --------------------------------------------------------------------------------------
    async def script_plain(self, up: TaskUpdater, queue: EventQueue) -> None:
        for chunk in ("Hello ", "from ", "A2A"):
            await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, chunk))
        await up.complete()

    async def script_rich(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(iacCodeSessionId="sess-1"))
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(thinking={"type": "raw_thinking", "text": "Thinking about it."}))
        await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "Let me check. "))
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(tool={"status": "started", "toolUseId": "tu-1", "name": "ros_validate"}))
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(tool={"status": "input_complete", "toolUseId": "tu-1", "toolInput": {"template": "vpc"}})
        )
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(tool={"status": "progress", "toolUseId": "tu-1", "progress": 0.5}))
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(tool={"status": "completed", "toolUseId": "tu-1", "result": {"valid": True}})
        )
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(tool={"status": "completed", "toolUseId": "tu-1", "result": {"valid": True}})
        )
        await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "All good.", "agent-msg-2"))
        # As the runtime ends a turn: the whole answer again, under another message id, marked assistantFinal.
        await up.update_status(
            S.TASK_STATE_WORKING,
            message=text_message(up, "Let me check. All good.", f"{up.task_id}-working"),
            metadata=iac(assistantFinal={"complete": True}),
        )
        await queue.enqueue_event(
            TaskArtifactUpdateEvent(
                task_id=up.task_id,
                context_id=up.context_id,
                artifact=Artifact(artifact_id="art-1", name="template.yaml", parts=[Part(text="ROSTemplateFormatVersion: 2015-09-01")]),
            )
        )
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(usage={"inputTokens": 10, "outputTokens": 5, "totalTokens": 15, "model": "qwen"})
        )
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(usage={"inputTokens": 1, "outputTokens": 2, "totalTokens": 3, "model": "qwen"})
        )
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED)  # the normal end of a turn for this runtime

    async def script_pipeline(self, up: TaskUpdater, queue: EventQueue) -> None:
        def env(seq: int, kind: str, **extra: Any) -> dict[str, Any]:
            return {"eventId": f"ev-{seq}", "sequence": seq, "eventType": kind, **extra}

        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(pipeline=env(1, "step_started", step="plan")))
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(pipeline=env(2, "pipeline_started", data={"pipelineName": "selling"})))
        await up.update_status(
            S.TASK_STATE_WORKING,
            metadata=iac(
                pipelineBatch={
                    "events": [
                        env(3, "text_delta", data={"text": "Planning. "}),
                        env(4, "candidate_started", candidate="cand-a"),
                        env(4, "candidate_started", candidate="cand-a"),  # duplicate: dropped
                        env(5, "step_finished", step="plan"),
                        env(6, "internal_only_event"),  # not allow-listed: dropped
                    ]
                }
            ),
        )
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(pipeline=env(2, "pipeline_started")))  # old sequence: dropped
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(pipeline=env(7, "pipeline_completed", data={"ok": True})))
        await up.complete()

    async def script_permission(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(tool={"status": "started", "toolUseId": "tu-9", "name": "deploy"}))
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(tool={"status": "input_complete", "toolUseId": "tu-9", "inputSummary": "stack vpc"})
        )
        await up.update_status(
            S.TASK_STATE_INPUT_REQUIRED,
            metadata=iac(
                input={
                    "required": True,
                    "inputId": "in-perm-1",
                    "kind": "permission",
                    "toolUseId": "tu-9",
                    "toolName": "deploy",
                    "title": "Deploy the stack",
                    "purpose": "Creates cloud resources",
                    "safeSummary": "deploy vpc",
                    "prompt": "Allow deploy?",
                    "requestTaskId": up.task_id,
                    "options": [{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}],
                }
            ),
        )

    async def script_question(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(
            S.TASK_STATE_INPUT_REQUIRED,
            metadata=iac(
                input={
                    "required": True,
                    "inputId": "in-q-1",
                    "kind": "ask_user_question",
                    "question": "Which region?",
                    "options": [{"id": "cn-hangzhou", "label": "Hangzhou"}, {"id": "cn-beijing", "label": "Beijing"}],
                    "allowFreeText": True,
                }
            ),
        )

    async def script_candidates(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(
            S.TASK_STATE_INPUT_REQUIRED,
            metadata=iac(
                input={
                    "required": True,
                    "inputId": "in-c-1",
                    "kind": "candidate_selection",
                    "title": "Pick one",
                    "options": [
                        {"id": "c1", "label": "Small", "summary": "1 AZ", "cost": 10},
                        {"id": "c2", "label": "Large", "summary": "3 AZ", "cost": 90},
                    ],
                }
            ),
        )

    async def script_pending(self, up: TaskUpdater, queue: EventQueue) -> None:
        await queue.enqueue_event(
            Task(
                id=up.task_id,
                context_id=up.context_id,
                status=TaskStatus(state=S.TASK_STATE_INPUT_REQUIRED),
                metadata=iac(pendingPermissions=[{"inputId": "in-p-2", "toolUseId": "tu-2", "toolName": "delete", "prompt": "Delete?"}]),
            )
        )

    async def script_pipeline_ask(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(pipeline={"eventId": "pa-1", "sequence": 1, "eventType": "step_started", "step": "select"})
        )
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(pipeline={"eventId": "pa-2", "sequence": 2, "eventType": "pipeline_started"})
        )
        await up.update_status(
            S.TASK_STATE_INPUT_REQUIRED,
            metadata=iac(
                input={"required": True, "inputId": "in-pa-1", "kind": "candidate_selection", "options": [{"id": "c1", "label": "Small"}]}
            ),
        )

    async def script_fail(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "Trying... "))
        await up.failed()

    async def script_reject(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.reject()

    async def script_canceled(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.cancel()

    async def script_auth(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.requires_auth()

    async def script_foreign(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "ok "))
        await queue.enqueue_event(
            TaskStatusUpdateEvent(task_id=up.task_id, context_id="someone-elses-context", status=TaskStatus(state=S.TASK_STATE_WORKING))
        )
        await up.complete()

    async def script_stuck(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "I will stop talking."))

    async def script_slow(self, up: TaskUpdater, queue: EventQueue) -> None:
        for index in range(100):
            await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, f"tick {index} "))
            await asyncio.sleep(0.1)
        await up.complete()

    async def script_flood(self, up: TaskUpdater, queue: EventQueue) -> None:
        words = (self.last_input or "").split()
        count = int(words[1]) if len(words) > 1 and words[1].isdigit() else self.flood_count
        for _ in range(count):
            await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "x "))
        await up.complete()

    flood_count = 1000

    # -- answers --------------------------------------------------------------------------------------
    async def answer(self, up: TaskUpdater, message: dict[str, Any], data_parts: list[Any]) -> None:
        if data_parts:
            decision = data_parts[0].get("decision")
            if decision == "allow_once":
                await up.update_status(
                    S.TASK_STATE_WORKING,
                    metadata=iac(tool={"status": "completed", "toolUseId": data_parts[0].get("toolUseId"), "result": "deployed"}),
                )
                await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "Deployed.", "agent-msg-9"))
            else:
                await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "Not deployed.", "agent-msg-9"))
        else:
            text = "".join(p.get("text", "") for p in message.get("parts", []))
            await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, f"You chose: {text}", "agent-msg-9"))
        await up.complete()


class A2AAgentServer:
    """The scripted agent on a free loopback port, in a background thread."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.agent = ScriptedAgent()
        card = AgentCard(
            name="scripted",
            description="test agent",
            version="1",
            supported_interfaces=[AgentInterface(url=self.url, protocol_binding="JSONRPC", protocol_version="1.0")],
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text"],
            default_output_modes=["text"],
            skills=[AgentSkill(id="scripted", name="scripted", description="scripted signals", tags=["test"])],
        )
        self.task_store = InMemoryTaskStore()
        self.rpc_methods: list[str] = []
        self.traceparents: list[str] = []  # the W3C traceparent of each JSON-RPC request
        handler = DefaultRequestHandler(agent_executor=self.agent, task_store=self.task_store, agent_card=card)
        self.restore_mode = "absent"  # absent (plain 404), ready, missing (404 JSON), retryable (409)
        self.pipeline_state: dict[str, Any] | None = None  # None: the extension is not offered
        extensions = [
            Route("/iac-code/session/ensure-restored", self._ensure_restored, methods=["POST"]),
            Route("/iac-code/pipeline/state", self._pipeline_state, methods=["GET"]),
        ]
        app = Starlette(routes=create_jsonrpc_routes(handler, "/") + create_agent_card_routes(card) + extensions)
        self.server = uvicorn.Server(uvicorn.Config(self._refusing(app), host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def _ensure_restored(self, request: Request) -> Response:
        self.agent.calls.append({"method": "ensure-restored", "body": await request.json()})
        if self.restore_mode == "absent":
            return PlainTextResponse("Not Found", status_code=404)
        if self.restore_mode == "missing":
            return JSONResponse({"status": "missing"}, status_code=404)
        if self.restore_mode == "retryable":
            self.restore_mode = "ready"
            return JSONResponse({"retryable": True}, status_code=409)
        return JSONResponse({"status": "restored"})

    async def _pipeline_state(self, request: Request) -> Response:
        self.agent.calls.append({"method": "pipeline-state", "params": dict(request.query_params)})
        if self.pipeline_state is None:
            return PlainTextResponse("Not Found", status_code=404)
        return JSONResponse(self.pipeline_state)

    def _refusing(self, app):
        """While `agent.refuse_next_answer` > 0, an answer's reply stream starts with a JSON-RPC error (the task lives on)."""

        async def wrapped(scope, receive, send):
            if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/":
                return await app(scope, receive, send)
            chunks = []
            while True:
                message = await receive()
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
            body = json.loads(b"".join(chunks) or b"{}")
            self.rpc_methods.append(body.get("method", ""))
            self.traceparents.append(dict(scope["headers"]).get(b"traceparent", b"").decode())
            replayed = [b"".join(chunks)]

            async def replay():
                # The body once, then the real channel (which reports the disconnect).
                if replayed:
                    return {"type": "http.request", "body": replayed.pop(), "more_body": False}
                return await receive()

            text = "".join(p.get("text", "") for p in (body.get("params", {}).get("message") or {}).get("parts", []))
            if text == "deep-frame":
                # A hostile agent: one frame whose metadata nests 300 levels deep.
                nested = "[" * 300 + "1" + "]" * 300
                frame = (
                    '{"jsonrpc":"2.0","id":'
                    + json.dumps(body.get("id"))
                    + ',"result":{"task":{"id":"deep-task","contextId":'
                    + json.dumps(body["params"]["message"]["contextId"])
                    + ',"status":{"state":"TASK_STATE_WORKING"},"metadata":{"x":'
                    + nested
                    + "}}}}"
                )
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
                await send({"type": "http.response.body", "body": f"data: {frame}\n\n".encode()})
                return None
            if not self.agent.refuse_next_answer:
                return await app(scope, replay, send)
            if text.startswith("drop"):
                # A dropped connection: one frame, then the socket goes away mid-stream.
                self.agent.refuse_next_answer -= 1
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
                frame = {
                    "jsonrpc": "2.0",
                    "id": body.get("id"),
                    "result": {
                        "task": {
                            "id": "dropped-task",
                            "contextId": body["params"]["message"]["contextId"],
                            "status": {"state": "TASK_STATE_WORKING"},
                        }
                    },
                }
                await send({"type": "http.response.body", "body": f"data: {json.dumps(frame)}\n\n".encode(), "more_body": True})
                raise ConnectionResetError("dropped on purpose")
            if body.get("method") == "SendStreamingMessage" and body["params"]["message"].get("taskId"):
                self.agent.refuse_next_answer -= 1
                self.agent.calls.append({"method": "refused", "message": body["params"]["message"]})
                error = json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "error": {"code": -32603, "message": "not now (on purpose)"}})
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
                await send({"type": "http.response.body", "body": f"data: {error}\n\n".encode()})
                return None
            return await app(scope, replay, send)

        return wrapped

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self.agent.calls

    def start(self) -> A2AAgentServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


if __name__ == "__main__":  # python -m tests.a2a_agent PORT  (used by bench/a2a_flood.py)
    import sys

    server = A2AAgentServer()
    server.port = int(sys.argv[1])
    server.url = f"http://127.0.0.1:{server.port}/"
    server.server.config.port = server.port
    server.server.run()
