"""The A2A backend: drives an A2A 1.0 agent for each run (new turn or resume) and speaks only signals."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx

from gateway.agents import signals as s
from gateway.agents.a2a.client import A2AClient, A2AError, MalformedFrame
from gateway.agents.a2a.mapping import FrameMapper, ProtocolViolation, normalise_state
from gateway.agents.base import AgentBackend, AgentRequest

log = logging.getLogger("agui.a2a")
CANCEL_TIMEOUT = 5.0


def context_id_for(thread_id: str) -> str:
    """Fixed for the thread's life: `agui-` + sha256(threadId)[:40], as the original adapter does."""
    return "agui-" + hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def iac_metadata(request: AgentRequest) -> dict[str, Any]:
    """The request's options in snake case for `metadata.iac_code`; the only place secrets travel."""
    options = request.options
    values: dict[str, Any] = {
        "cwd": request.cwd,
        "rosInvocationId": options.invocation_id,
        "preferredLanguage": request.language,
        "iac_code_model": options.model,
        "iac_code_api_key": options.api_key,
        "thinking": options.thinking,
        "user_id": options.user_id,
        "channel": options.channel,
        "candidatePresentation": options.candidate_presentation,
        "run_mode": options.run_mode,
        "pipeline_name": options.pipeline_name,
        "cleanupOnly": options.cleanup_only,
    }
    cloud = options.cloud
    if cloud is not None:
        values.update(
            alibaba_cloud_access_key_id=cloud.access_key_id,
            alibaba_cloud_access_key_secret=cloud.access_key_secret,
            alibaba_cloud_security_token=cloud.security_token,
            alibaba_cloud_region_id=cloud.region_id,
        )
    return {k: v for k, v in values.items() if isinstance(v, (str, bool, int, dict)) and v != {}}  # UNSET/None dropped


class A2ABackend(AgentBackend):
    name = "a2a"

    def __init__(self, url: str, token: str | None = None) -> None:
        self.client = A2AClient(url, token)

    def _new_turn(self, request: AgentRequest, context_id: str) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [{"text": request.user_text}] if request.user_text else []
        for index, (mime, data) in enumerate(request.images):
            parts.append({"raw": data, "filename": f"image-{index}", "mediaType": mime})
        return {
            "messageId": request.message_id or f"msg-{request.run_id}",
            "role": "ROLE_USER",
            "contextId": context_id,
            "parts": parts,
            "metadata": {"iac_code": iac_metadata(request)},
        }

    def _answer(self, request: AgentRequest, context_id: str, task_id: str | None) -> dict[str, Any]:
        inputs = (request.checkpoint or {}).get("inputs", {})
        parts: list[dict[str, Any]] = []
        for answer in request.resume:
            meta = inputs.get(answer.interrupt_id, {})
            payload = answer.payload if isinstance(answer.payload, dict) else {}
            if meta.get("kind") == "permission":
                decision = payload.get("decision", "deny") if answer.status == "resolved" else "deny"
                parts.append(
                    {
                        "data": {
                            "schemaVersion": 1,
                            "kind": "permission",
                            "requestTaskId": meta.get("requestTaskId") or task_id,
                            "inputId": meta.get("inputId", answer.interrupt_id),
                            "toolUseId": meta.get("toolUseId"),
                            "decision": decision,
                        },
                        "mediaType": "application/json",
                    }
                )
            else:
                value = next(iter(payload.values()), "") if answer.status == "resolved" else ""
                label = next((o["label"] for o in meta.get("options", []) if o.get("value") == value), None)
                parts.append({"text": str(label or value) if answer.status == "resolved" else "(dismissed)"})
        return {
            "messageId": f"answer-{request.run_id}",
            "role": "ROLE_USER",
            "contextId": context_id,
            "taskId": task_id,
            "parts": parts,
            "metadata": {"iac_code": iac_metadata(request)},
        }

    async def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:
        context_id = context_id_for(request.thread_id)
        checkpoint = request.checkpoint or {}
        task_id = checkpoint.get("taskId") if request.resume else None
        mapper = FrameMapper(context_id, task_id, checkpoint.get("sessionId"), int(checkpoint.get("lastSequence", 0)))
        message = self._answer(request, context_id, task_id) if request.resume else self._new_turn(request, context_id)
        recovered: list[s.Signal] = []
        if request.resume and task_id:
            problem = await self._restore(request, checkpoint, task_id) or await self._preflight(context_id, task_id)
            if problem is not None:
                yield problem
                return
            recovered = await self._recover_pipeline(mapper, task_id)
        finished = False
        try:
            async for result in self.client.stream("SendStreamingMessage", {"message": message}):
                signals = mapper.map(result)
                if recovered and signals:
                    # The answer is accepted at this first valid frame; only now replay what was missed.
                    signals = signals[:1] + recovered + signals[1:]
                    recovered = []
                for signal in signals:
                    yield signal
            finished = True
        except ProtocolViolation as exc:
            finished = True
            await self._cancel_task(mapper.task_id)
            yield s.Failed(message=f"The agent broke the identity mapping: {exc}.", code="A2A_PROTOCOL_ERROR")
            return
        except MalformedFrame as exc:
            finished = True
            await self._cancel_task(mapper.task_id)
            yield s.Failed(message=f"The agent sent {exc}.", code="A2A_PROTOCOL_ERROR")
            return
        except A2AError as exc:
            finished = True
            yield s.Failed(message=f"The agent answered with an error: {str(exc)[:300]}", code="A2A_EXECUTION_FAILED")
            return
        except (httpx.HTTPError, OSError) as exc:
            finished = True
            await self._cancel_task(mapper.task_id)
            yield s.Failed(message=f"The agent is unavailable ({type(exc).__name__}).", code="A2A_UNAVAILABLE")
            return
        finally:
            if not finished:  # the run was cancelled or its client went away: stop the agent's task too
                await self._cancel_task(mapper.task_id)
        yield self._end(mapper)

    async def _restore(self, request: AgentRequest, checkpoint: dict[str, Any], task_id: str) -> s.Signal | None:
        """`POST /iac-code/session/ensure-restored` before a resume, when the agent offers it."""
        body = {"cwd": request.cwd, "sessionId": checkpoint.get("sessionId"), "taskId": task_id}
        try:
            response = await self.client.extension("POST", "/iac-code/session/ensure-restored", json=body)
        except httpx.HTTPError as exc:
            return s.Failed(message=f"The agent is unavailable ({type(exc).__name__}).", code="A2A_UNAVAILABLE")
        if response is None or response.status_code == 200:
            return None
        if response.status_code == 404:
            return s.Failed(message="The agent could not restore the session.", code="EXECUTION_LOST")
        if response.status_code == 409 and _json(response).get("retryable"):
            return s.Failed(message="The agent is restoring the session; retry the answer.", code="A2A_UNAVAILABLE")
        return s.Failed(message=f"Session restore failed (HTTP {response.status_code}).", code="A2A_EXECUTION_FAILED")

    async def _preflight(self, context_id: str, task_id: str) -> s.Signal | None:
        """`GetTask` before a resume: the task must still exist, be the bound one, and wait for input."""
        try:
            task = await self.client.call("GetTask", {"id": task_id, "historyLength": 100})
        except A2AError:
            return s.Failed(message="The agent no longer knows the task this answer is for.", code="EXECUTION_LOST")
        except (httpx.HTTPError, OSError) as exc:
            return s.Failed(message=f"The agent is unavailable ({type(exc).__name__}).", code="A2A_UNAVAILABLE")
        task = task if isinstance(task, dict) else {}
        if task.get("id", task_id) != task_id or task.get("contextId", context_id) != context_id:
            return s.Failed(message="The agent reports another task or context for this answer.", code="A2A_PROTOCOL_ERROR")
        state = normalise_state((task.get("status") or {}).get("state"))
        if state in ("completed", "canceled", "failed", "rejected"):
            return s.Failed(message=f"The task already ended ({state}).", code="EXECUTION_LOST")
        return None

    async def _recover_pipeline(self, mapper: FrameMapper, task_id: str) -> list[s.Signal]:
        """`GET /iac-code/pipeline/state`: a snapshot, then the events missed since the last sequence seen."""
        try:
            response = await self.client.extension(
                "GET", "/iac-code/pipeline/state", params={"taskId": task_id, "afterSequence": mapper.last_sequence}
            )
        except httpx.HTTPError:
            return []
        if response is None or response.status_code != 200:
            return []
        state = _json(response)
        out: list[s.Signal] = []
        snapshot = state.get("snapshot")
        if isinstance(snapshot, dict):
            out.append(s.ActivitySnapshot(activity_type="iac-code.pipeline.v1", content=snapshot))
        for envelope in state.get("events") or []:
            if isinstance(envelope, dict):
                mapper.pipeline(envelope, out)
        return out

    def _end(self, mapper: FrameMapper) -> s.Signal:
        if mapper.inputs:
            checkpoint = {
                "taskId": mapper.task_id,
                "contextId": mapper.context_id,
                "sessionId": mapper.session_id,
                "lastSequence": mapper.last_sequence,
                "inputs": {request.id: meta for request, meta in mapper.inputs},
            }
            return s.InputRequired(interrupts=[request for request, _ in mapper.inputs], checkpoint=checkpoint)
        if mapper.state in ("completed", "input-required"):
            return s.Completed()
        if mapper.state == "canceled":
            return s.Failed(message="The agent cancelled the task.", code="CANCELLED")
        return s.Failed(message=f"The agent task ended in state '{mapper.state}'.", code="A2A_EXECUTION_FAILED")

    async def _cancel_task(self, task_id: str | None) -> None:
        if not task_id:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self.client.call("CancelTask", {"id": task_id})), CANCEL_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - best effort; the task may already be terminal
            log.info("CancelTask %s not applied: %s", task_id, type(exc).__name__)

    async def cancel_execution(self, execution_id: str, checkpoint: Any) -> None:
        await self._cancel_task((checkpoint or {}).get("taskId"))

    async def aclose(self) -> None:
        await self.client.aclose()


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
