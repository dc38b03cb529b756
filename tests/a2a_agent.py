"""A real A2A 1.0 agent for tests, built with a2a-sdk and served by uvicorn on loopback.

The first word of the user's text picks a script that emits the signals of A2A_BACKEND.md; every
request and every CancelTask is recorded in `calls` for the tests to inspect.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
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
from a2a.utils.errors import InternalError
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.a2a_wire import RuntimeWire
from tests.support import free_port

S = TaskState


def text_message(updater: TaskUpdater, text: str, message_id: str = "agent-msg-1") -> Message:
    return Message(
        message_id=message_id, role=Role.ROLE_AGENT, parts=[Part(text=text)], context_id=updater.context_id, task_id=updater.task_id
    )


def iac(**signals: Any) -> dict[str, Any]:
    return {"iac_code": signals}


def permission(task_id: str, input_id: str, tool_use_id: str, tool: str, prompt: str, **extra: Any) -> dict[str, Any]:
    """A permission input envelope as `input_required.permission_input_envelope` builds it."""
    return {
        "schemaVersion": 1,
        "kind": "permission",
        "requestTaskId": task_id,
        "inputId": input_id,
        "toolUseId": tool_use_id,
        "toolName": tool,
        "title": f"Run {tool}",
        "prompt": prompt,
        "options": [{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}],
        "required": True,
        **extra,
    }


def envelope_of(seq: int, kind: str, **extra: Any) -> dict[str, Any]:
    """A pipeline envelope as `pipeline_events._envelope` builds it."""
    return {
        "schemaVersion": "1.0",
        "extensionUri": "urn:iac-code:a2a:pipeline-events:v1",
        "eventId": f"evt-{seq}",
        "sequence": seq,
        "createdAt": f"2026-11-30T00:00:{seq:02d}Z",
        "eventType": kind,
        "pipelineRunId": "prun-1",
        "pipelineName": "selling_solution_first",
        "status": "working",
        **extra,
    }


class ScriptedAgent(AgentExecutor):
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.refuse_next_answer = 0
        self.refusal_data: Any = None  # the `data` of the refusal's JSON-RPC error
        self.last_input = ""
        self.scripts: dict[str, str] = {}  # task id -> the script that runs it
        self.decisions: dict[str, dict[str, str]] = {}  # task id -> sideband answers so far (input id -> decision)
        self.expected_answers: dict[str, int] = {}  # task id -> sideband answers it waits for
        self.envelopes: dict[str, list[dict[str, Any]]] = {}  # task id -> pipeline envelopes sent (pipeline/state "live")

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        message = MessageToDict(context.message) if context.message else {}
        self.calls.append({"method": "SendStreamingMessage", "message": message, "taskId": context.task_id})
        up = TaskUpdater(queue, context.task_id, context.context_id)
        data_parts = [p.get("data") for p in message.get("parts", []) if "data" in p]
        if context.current_task is not None and message.get("taskId"):
            await self.answer(up, message, data_parts)
            return
        self.last_input = context.get_user_input() or "plain"
        script = self.last_input.split()[0].lstrip("/").replace("-", "_")
        self.scripts[context.task_id] = script
        if script != "history":
            await queue.enqueue_event(
                Task(id=context.task_id, context_id=context.context_id, status=TaskStatus(state=S.TASK_STATE_SUBMITTED))
            )
        await getattr(self, "script_" + script, self.script_plain)(up, queue)

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        self.calls.append({"method": "CancelTask", "taskId": context.task_id})
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()

    # -- scripts --------------------------------------------------------------------------------------
    async def script_plain(self, up: TaskUpdater, queue: EventQueue) -> None:
        for chunk in ("Hello ", "from ", "A2A"):
            await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, chunk))
        await up.complete()

    async def script_bare(self, up: TaskUpdater, queue: EventQueue) -> None:
        """The same turn; the wire strips every result's wrapper key (`result` is the payload itself)."""
        await self.script_plain(up, queue)

    async def script_rich(self, up: TaskUpdater, queue: EventQueue) -> None:
        """One ordinary turn as the runtime streams it, ending with the final text repeat and INPUT_REQUIRED."""
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(iacCodeSessionId="sess-1"))
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(thinking={"type": "raw_thinking", "text": "Thinking about it."}))
        await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "Let me check. ", f"{up.task_id}-message"))
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(tool={"status": "started", "toolUseId": "tu-1", "name": "ros_validate"}))
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(tool={"status": "input_delta", "toolUseId": "tu-1", "name": "ros_validate"})
        )
        await up.update_status(
            S.TASK_STATE_WORKING,
            metadata=iac(tool={"status": "input_complete", "toolUseId": "tu-1", "name": "ros_validate", "toolInput": {"template": "vpc"}}),
        )
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(tool={"status": "progress", "toolUseId": "tu-1", "progress": 0.5}))
        for _ in range(2):  # the result is reported twice: shown once
            await up.update_status(
                S.TASK_STATE_WORKING, metadata=iac(tool={"status": "completed", "toolUseId": "tu-1", "result": {"valid": True}})
            )
        await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "All good.", f"{up.task_id}-message"))
        await up.update_status(
            S.TASK_STATE_WORKING,
            message=text_message(up, "Let me check. All good.", f"{up.task_id}-working"),
            metadata=iac(assistantFinal={"complete": True}),
        )
        await queue.enqueue_event(
            TaskArtifactUpdateEvent(
                task_id=up.task_id,
                context_id=up.context_id,
                artifact=Artifact(
                    artifact_id="art-1",
                    name="template.yaml",
                    parts=[Part(url="file:///ws/template.yaml", filename="template.yaml", media_type="text/yaml")],
                    metadata=_struct(
                        {
                            "uri": "file:///ws/template.yaml",
                            "mediaType": "text/yaml",
                            "byteSize": 42,
                            "sha256": "ab" * 32,
                            "sourcePath": "template.yaml",
                        }
                    ),
                ),
                append=False,
                last_chunk=True,
            )
        )
        usage = {"provider": "dashscope", "model": "qwen", "inputTokens": 10, "outputTokens": 5, "totalTokens": 20, "cachedInputTokens": 4}
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(usage=usage))
        usage = {"provider": "dashscope", "model": "qwen", "inputTokens": 1, "outputTokens": 2, "totalTokens": 3}
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(usage=usage))
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED)  # the normal end of a turn for this runtime

    async def script_final_only(self, up: TaskUpdater, queue: EventQueue) -> None:
        """A turn whose only text is the final status (nothing was streamed): it is shown."""
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(tool={"status": "started", "toolUseId": "tu-f", "name": "ls"}))
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(tool={"status": "completed", "toolUseId": "tu-f", "result": "ok"}))
        await up.update_status(
            S.TASK_STATE_WORKING,
            message=text_message(up, "Only at the end.", f"{up.task_id}-working"),
            metadata=iac(assistantFinal={"complete": True}),
        )
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED)

    async def script_pipeline(self, up: TaskUpdater, queue: EventQueue) -> None:
        """A pipeline turn: steps, two candidates writing in parallel, tools, usage and customs, single and batched."""
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(pipeline=envelope_of(1, "pipeline_started", scope="pipeline", iacCodeSessionId="sess-p"))
        )
        await up.update_status(
            S.TASK_STATE_WORKING,
            metadata=iac(
                pipeline=envelope_of(2, "step_started", scope="step", step={"id": "plan", "runId": "step-plan-1", "index": 0, "total": 2})
            ),
        )
        a = {"id": "cand-a", "runId": "crun-a", "index": 0, "attempt": 1}
        b = {"id": "cand-b", "runId": "crun-b", "index": 1, "attempt": 1}
        step = {"id": "generate", "runId": "cs-1"}
        batch = [
            envelope_of(3, "candidate_started", scope="candidate", candidate=a, taskId=up.task_id),
            envelope_of(4, "candidate_step_started", scope="candidate_step", candidate=a, candidateStep=step),
            envelope_of(5, "candidate_step_started", scope="candidate_step", candidate=b, candidateStep=step),
            envelope_of(6, "text_delta", scope="candidate_step", candidate=a, candidateStep=step, data={"text": "A says hi. "}),
            envelope_of(7, "text_delta", scope="candidate_step", candidate=b, candidateStep=step, data={"text": "B says hi. "}),
            envelope_of(8, "text_delta", scope="candidate_step", candidate=a, candidateStep=step, data={"text": "A is done."}),
            envelope_of(8, "text_delta", scope="candidate_step", candidate=a, data={"text": "dropped: old sequence"}),
            envelope_of(9, "thinking_delta", scope="step", data={"type": "raw_thinking", "text": "Weighing them."}),
            envelope_of(10, "tool_started", scope="step", data={"toolUseId": "pt-1", "toolName": "bash", "input": {"command": "pwd"}}),
            envelope_of(11, "tool_result", scope="step", data={"toolUseId": "pt-1", "toolName": "bash", "isError": False, "result": "/ws"}),
            envelope_of(
                12, "usage", data={"provider": "dashscope", "model": "qwen", "inputTokens": 7, "outputTokens": 3, "totalTokens": 10}
            ),
            envelope_of(13, "candidate_step_completed", scope="candidate_step", candidate=a, candidateStep=step),
            envelope_of(14, "candidate_step_failed", scope="candidate_step", candidate=b, candidateStep=step, data={"error": "quota"}),
            envelope_of(15, "internal_only_event"),  # not allow-listed: dropped
        ]
        batch.insert(4, dict(batch[3]))  # the same eventId twice: dropped
        await up.update_status(
            S.TASK_STATE_WORKING,
            metadata=iac(pipelineBatch={"schemaVersion": "1.0", "extensionUri": "urn:iac-code:a2a:pipeline-events:v1", "events": batch}),
        )
        await up.update_status(
            S.TASK_STATE_WORKING,
            metadata=iac(pipeline=envelope_of(16, "step_completed", scope="step", step={"id": "plan", "runId": "step-plan-1"})),
        )
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(pipeline=envelope_of(17, "pipeline_completed", status="completed")))
        await up.complete()

    async def script_permission(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(tool={"status": "started", "toolUseId": "tu-9", "name": "deploy"}))
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(tool={"status": "input_complete", "toolUseId": "tu-9", "inputSummary": "stack vpc"})
        )
        envelope = permission(
            up.task_id, "in-perm-1", "tu-9", "deploy", "Allow deploy?", title="Deploy the stack", purpose="Creates cloud resources"
        )
        envelope.update(safeSummary="deploy vpc", effect="cloud_write", isReadOnly=False, contextId=up.context_id)
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED, metadata=iac(input=envelope, permission={"pending": True}))

    async def script_permission_session(self, up: TaskUpdater, queue: EventQueue) -> None:
        """A permission in a turn that has an iac-code session (so a resume restores it first)."""
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(iacCodeSessionId="sess-r"))
        await self.script_permission(up, queue)

    async def script_permission_early(self, up: TaskUpdater, queue: EventQueue) -> None:
        """A permission whose answer stream ends right after `inputReceived` while the task goes on."""
        await self.script_permission(up, queue)

    async def script_two_permissions(self, up: TaskUpdater, queue: EventQueue) -> None:
        """Two parallel sub-pipeline permissions pending at once: each answer is its own SendMessage."""
        self.expected_answers[up.task_id] = 2
        pending = [
            permission(up.task_id, "perm-a", "tu-a", "bash", "Run bash?", subPipelineId="sub-a"),
            permission(up.task_id, "perm-b", "tu-b", "deploy", "Deploy?", subPipelineId="sub-b"),
        ]
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED, metadata=iac(pendingPermissions=pending))

    async def script_question(self, up: TaskUpdater, queue: EventQueue) -> None:
        question = {
            "required": True,
            "inputId": "ask-tu-q",
            "kind": "ask_user_question",
            "toolUseId": "tu-q",
            "prompt": "Which region?",
            "question": "Which region?",
            "options": [{"id": "cn-hangzhou", "label": "Hangzhou"}, {"id": "cn-beijing", "label": "Beijing"}, "cn-shanghai"],
            "allowFreeText": True,
            "freeTextPrompt": "Or type one",
        }
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED, metadata=iac(input=question))

    async def script_candidates(self, up: TaskUpdater, queue: EventQueue) -> None:
        options = [
            {
                "id": "c1",
                "label": "Small",
                "summary": "1 AZ",
                "architectureDiagram": "graph TD; a-->b",
                "totalMonthlyCost": 10,
                "costItems": [{"name": "ecs", "cost": 10}],
            },
            {
                "id": "c2",
                "label": "Large",
                "summary": "3 AZ",
                "architectureDiagram": "graph TD; a-->c",
                "totalMonthlyCost": 90,
                "costItems": [],
            },
        ]
        selection = {"required": True, "inputId": "in-c-1", "kind": "candidate_selection", "title": "Pick one", "options": options}
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED, metadata=iac(input=selection))

    async def script_confirm(self, up: TaskUpdater, queue: EventQueue) -> None:
        options = [{"id": "go", "label": "Deploy", "action": "deploy"}, {"id": "tweak", "label": "Adjust", "action": "adjust"}]
        confirmation = {
            "required": True,
            "inputId": "confirm-1",
            "kind": "deployment_confirmation",
            "title": "Deploy now?",
            "options": options,
        }
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED, metadata=iac(input=confirmation))

    async def script_resource(self, up: TaskUpdater, queue: EventQueue) -> None:
        selection = {
            "schemaVersion": 1,
            "kind": "cloud_resource_selection",
            "requestTaskId": up.task_id,
            "contextId": up.context_id,
            "inputId": "resource-" + "0" * 32,
            "toolUseId": "tu-r",
            "prompt": "Pick a VPC",
            "required": True,
            "selector": {"id": "vpc", "associationProperty": "ALIYUN::ECS::VPCId", "outputKind": "id", "profileHash": "h1"},
        }
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED, metadata=iac(input=selection))

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
        step = {"id": "select", "runId": "step-select-1"}
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(pipeline=envelope_of(1, "step_started", scope="step", step=step)))
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(pipeline=envelope_of(2, "pipeline_started")))
        selection = {"required": True, "inputId": "in-pa-1", "kind": "candidate_selection", "options": [{"id": "c1", "label": "Small"}]}
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED, metadata=iac(input=selection))

    async def script_history(self, up: TaskUpdater, queue: EventQueue) -> None:
        """The turn's text only in the Task snapshot's history (no status text)."""
        history = [
            Message(message_id="u-1", role=Role.ROLE_USER, parts=[Part(text="history")], context_id=up.context_id, task_id=up.task_id),
            text_message(up, "From the history. ", "h-1"),
            text_message(up, "Still history.", "h-2"),
        ]
        await queue.enqueue_event(
            Task(id=up.task_id, context_id=up.context_id, status=TaskStatus(state=S.TASK_STATE_WORKING), history=history)
        )
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED)

    async def script_early(self, up: TaskUpdater, queue: EventQueue) -> None:
        """The reply stream ends after the first text; the task goes on, for SubscribeToTask to follow."""
        await up.update_status(
            S.TASK_STATE_WORKING, message=text_message(up, "One, ", f"{up.task_id}-message"), metadata=iac(testCutStream=True)
        )
        await asyncio.sleep(0.5)
        for chunk in ("two, ", "three."):
            await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, chunk, f"{up.task_id}-message"))
            await asyncio.sleep(0.05)
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED)

    async def script_after_completed(self, up: TaskUpdater, queue: EventQueue) -> None:
        """COMPLETED, then (added by the wire) one more frame and a reply that stays open."""
        await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "Done."))
        await up.update_status(S.TASK_STATE_COMPLETED, metadata=iac(testLateFrame=True))

    async def script_usage_fail(self, up: TaskUpdater, queue: EventQueue) -> None:
        await up.update_status(
            S.TASK_STATE_WORKING, metadata=iac(usage={"model": "qwen", "inputTokens": 5, "outputTokens": 1, "totalTokens": 6})
        )
        await up.failed()

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

    async def script_long(self, up: TaskUpdater, queue: EventQueue) -> None:
        """`long N [permission]`: N ticks of 0.1 s, each a text chunk (one message) and a pipeline event, then the
        runtime's final text repeat and the end of the turn (or a permission). Slow enough to kill a replica in."""
        words = self.last_input.split()
        ticks = int(words[1]) if len(words) > 1 and words[1].isdigit() else 30
        message_id = f"{up.task_id}-message"
        envelopes = self.envelopes.setdefault(up.task_id, [])
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(iacCodeSessionId="sess-long"))
        for index in range(ticks):
            envelope = {**envelope_of(index + 1, "stack_progress", data={"tick": index}), "taskId": up.task_id}
            envelopes.append(envelope)
            await up.update_status(
                S.TASK_STATE_WORKING, message=text_message(up, f"w{index} ", message_id), metadata=iac(pipeline=envelope)
            )
            await asyncio.sleep(0.1)
        if "permission" in words:
            request = permission(up.task_id, "perm-long", "tu-long", "deploy", "Deploy now?")
            await up.update_status(S.TASK_STATE_INPUT_REQUIRED, metadata=iac(input=request))
            return
        whole = "".join(f"w{index} " for index in range(ticks))
        await up.update_status(
            S.TASK_STATE_WORKING, message=text_message(up, whole, f"{up.task_id}-working"), metadata=iac(assistantFinal={"complete": True})
        )
        await up.update_status(S.TASK_STATE_INPUT_REQUIRED)

    async def script_slow(self, up: TaskUpdater, queue: EventQueue) -> None:
        # The runtime names its session in its first update: the session event (a cancel needs its executionId)
        # goes out once both the task and the session ids are known.
        await up.update_status(S.TASK_STATE_WORKING, metadata=iac(iacCodeSessionId="sess-slow"))
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
        script = self.scripts.get(up.task_id, "")
        if script == "two_permissions":
            # The task goes on with an event of its own before the sideband ack is even sent: no stream carries
            # it to the gateway (pipeline/state "live" does).
            envelopes = self.envelopes.setdefault(up.task_id, [])
            envelopes.append({**envelope_of(len(envelopes) + 1, "stack_progress", data={"after": "answers"}), "taskId": up.task_id})
            await up.update_status(S.TASK_STATE_WORKING, metadata=iac(pipeline=envelopes[-1]))
            await asyncio.sleep(0.3)
            decided = ", ".join(f"{k}={v}" for k, v in sorted(self.decisions.get(up.task_id, {}).items()))
            await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, f"Decisions: {decided}.", "agent-msg-9"))
            await up.complete()
            return
        if data_parts:
            data = data_parts[0]
            received = {
                "kind": "permission",
                "inputId": data.get("inputId"),
                "toolUseId": data.get("toolUseId"),
                "decision": data.get("decision"),
            }
            await up.update_status(S.TASK_STATE_WORKING, metadata=iac(inputReceived=received, testCutStream=script == "permission_early"))
            if script == "permission_early":
                await asyncio.sleep(0.5)  # the reply already ended: only SubscribeToTask sees what follows
            # The runtime may repeat the input it just took: not a new interrupt.
            repeat = permission(up.task_id, data.get("inputId"), data.get("toolUseId"), "deploy", "Allow deploy?")
            await up.update_status(S.TASK_STATE_WORKING, metadata=iac(input=repeat))
            if data.get("decision") == "allow_once":
                await up.update_status(
                    S.TASK_STATE_WORKING,
                    metadata=iac(tool={"status": "completed", "toolUseId": data.get("toolUseId"), "result": "deployed"}),
                )
                await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "Deployed.", "agent-msg-9"))
            else:
                await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, "Not deployed.", "agent-msg-9"))
        else:
            text = "".join(p.get("text", "") for p in message.get("parts", []))
            await up.update_status(S.TASK_STATE_WORKING, message=text_message(up, f"You chose: {text}", "agent-msg-9"))
        await up.complete()


def _struct(values: dict[str, Any]) -> Any:
    from google.protobuf.struct_pb2 import Struct

    struct = Struct()
    struct.update(values)
    return struct


class RaisingHandler(DefaultRequestHandler):
    """a2a-sdk's own request handler, made to fail as the runtime does before a stream's first event: a2a-sdk then
    answers the streaming call with one plain JSON-RPC error body instead of an event stream."""

    raise_before_stream: dict[str, Any] | None = None  # the `data` of an InternalError for the next answer's stream
    forget_on_subscribe = False  # SubscribeToTask finds no task (a2a-sdk's own TaskNotFoundError, -32001)

    async def on_message_send_stream(self, params: Any, context: Any = None) -> Any:
        if self.raise_before_stream is not None and params.message.task_id:
            data, self.raise_before_stream = self.raise_before_stream, None
            raise InternalError("The session backup is still syncing (on purpose).", data=data)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_subscribe_to_task(self, params: Any, context: Any = None) -> Any:
        if self.forget_on_subscribe:
            await self.task_store.delete(params.id, context)
        async for event in super().on_subscribe_to_task(params, context):
            yield event


class A2AAgentServer:
    """The scripted agent on a free loopback port, in a background thread, behind the runtime's wire habits."""

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
        self.requests: list[dict[str, Any]] = []  # every JSON-RPC request body, as sent
        self.traceparents: list[str] = []  # the W3C traceparent of each JSON-RPC request
        self.rpc_headers: list[dict[str, str]] = []  # the A2A-Version and Authorization of each JSON-RPC request
        handler = self.handler = RaisingHandler(agent_executor=self.agent, task_store=self.task_store, agent_card=card)
        # absent (plain 404), ready, missing (404 JSON), retryable (409 nested, once), backup (409 SESSION_BACKUP_NOT_READY,
        # once), unavailable (503, once)
        self.restore_mode = "absent"
        self.pipeline_state: Any = None  # None: the extension is not offered; "live": each task's own envelopes
        extensions = [
            Route("/iac-code/session/ensure-restored", self._ensure_restored, methods=["POST"]),
            Route("/iac-code/pipeline/state", self._pipeline_state, methods=["GET"]),
        ]
        app = Starlette(routes=create_jsonrpc_routes(handler, "/") + create_agent_card_routes(card) + extensions)
        self.server = uvicorn.Server(uvicorn.Config(RuntimeWire(app, self), host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def _ensure_restored(self, request: Request) -> Response:
        self.agent.calls.append({"method": "ensure-restored", "body": await request.json()})
        mode = self.restore_mode
        if mode == "absent":
            return PlainTextResponse("Not Found", status_code=404)
        if mode == "missing":
            return JSONResponse({"status": "not_found"}, status_code=404)
        if mode in ("retryable", "backup", "unavailable"):
            self.restore_mode = "ready"
        if mode == "retryable":
            return JSONResponse({"error": {"code": "SESSION_LOCKED", "message": "busy", "retryable": True}}, status_code=409)
        if mode == "backup":
            return JSONResponse({"error": {"code": "SESSION_BACKUP_NOT_READY", "message": "syncing", "retryable": True}}, status_code=409)
        if mode == "unavailable":
            return JSONResponse({"error": "unavailable"}, status_code=503)
        return JSONResponse({"status": "restored"})

    async def _pipeline_state(self, request: Request) -> Response:
        self.agent.calls.append({"method": "pipeline-state", "params": dict(request.query_params)})
        if self.pipeline_state is None:
            return PlainTextResponse("Not Found", status_code=404)
        if self.pipeline_state == "live":  # the task's own envelopes after the cursor, as the runtime keeps them
            after = int(request.query_params.get("afterSequence") or 0)
            sent = self.agent.envelopes.get(request.query_params.get("taskId", ""), [])
            snapshot = {"schemaVersion": "1.1", "pipelineRunId": "prun-1", "lastSequence": len(sent)}
            return JSONResponse({"snapshot": snapshot, "events": [e for e in sent if e["sequence"] > after]})
        return JSONResponse(self.pipeline_state)

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


def live_agent() -> Iterator[A2AAgentServer]:
    """A started agent whose `pipeline/state` answers with each task's own envelopes, as the runtime keeps them;
    stopped afterwards (a fixture body: the adoption and partition tests share it)."""
    server = A2AAgentServer().start()
    server.pipeline_state = "live"
    yield server
    server.stop()


if __name__ == "__main__":  # python -m tests.a2a_agent PORT  (used by bench/a2a_flood.py)
    import sys

    server = A2AAgentServer()
    server.port = int(sys.argv[1])
    server.url = f"http://127.0.0.1:{server.port}/"
    server.server.config.port = server.port
    server.server.run()
