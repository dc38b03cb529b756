"""The A2A backend: drives the calls of one run (new turn or resume) against an A2A 1.0 agent, speaking only signals.

Reading frames is `frames`, encoding what is sent is `messages`, the checks before an answer are `preflight`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx

from gateway.agents import signals as s
from gateway.agents.a2a import messages
from gateway.agents.a2a.client import A2AClient, A2AError, MalformedFrame
from gateway.agents.a2a.frames import TERMINAL_STATES, FrameReader, ProtocolViolation
from gateway.agents.a2a.preflight import check_task, recover_pipeline, refused, restore, unavailable
from gateway.agents.base import AgentBackend, AgentRequest

log = logging.getLogger("agui.a2a")
CANCEL_TIMEOUT = 5.0
SUBSCRIBE_ATTEMPTS = 3  # SubscribeToTask streams that may end early, one after another, before GetTask decides


def context_id_for(thread_id: str) -> str:
    """Fixed for the thread's life: `agui-` + sha256(threadId)[:40], as the original adapter does."""
    return "agui-" + hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


class EndRun(Exception):
    """Ends the run with `failure`: an answer the agent did not take (no frame, or an error first; the interrupts
    stay), or one whose taking ends the task."""

    def __init__(self, failure: s.Failed) -> None:
        super().__init__(failure.message)
        self.failure = failure


class A2ABackend(AgentBackend):
    name = "a2a"
    capabilities: ClassVar[dict[str, Any]] = {
        "humanInTheLoop": {"supported": True, "interrupts": True, "approvals": True}
    }  # the runtime's input-required

    def __init__(self, url: str, token: str | None = None, *, follow_idle: float = 300.0) -> None:
        self.client = A2AClient(url, token)
        self.follow_idle = follow_idle

    session_keys = ("taskId", "sessionId")  # IAC_CODE_A2A_WIRE.md §3: once both the task and session ids are known
    adoptable = True  # the task lives in the agent: any replica can follow it with SubscribeToTask

    def run(self, request: AgentRequest) -> AsyncIterator[s.Signal]:
        context_id = context_id_for(request.thread_id)
        checkpoint = request.checkpoint or {}
        if request.resume:
            answered = frozenset(a.interrupt_id for a in request.resume)
            cursor = int(checkpoint.get("lastSequence") or 0)
            reader = FrameReader(context_id, checkpoint.get("taskId"), checkpoint.get("sessionId"), cursor, answered)
            return self._drive(request, reader, self._resume(request, reader))
        reader = FrameReader(context_id)
        return self._drive(request, reader, self._new_turn(request, reader))

    def follow(self, request: AgentRequest, state: dict[str, Any], shown: dict[str, str]) -> AsyncIterator[s.Signal]:
        applied = frozenset(str(i) for i in state.get("applied") or [])
        reader = FrameReader(
            context_id_for(request.thread_id), state.get("taskId"), state.get("sessionId"), int(state.get("cursor") or 0), applied
        )
        reader.announced = True  # the first owner announced the identities
        reader.text_shown = bool(shown)
        reader.pipeline.seen.update(str(e) for e in state.get("seenEvents") or [])
        reader.pipeline_text = dict(shown)
        reader.said = dict(shown)
        return self._drive(request, reader, self._adopted(reader))

    async def _drive(self, request: AgentRequest, reader: FrameReader, turn: AsyncIterator[s.Signal]) -> AsyncIterator[s.Signal]:
        """One run's calls, with its failures mapped (§6) and the task cancelled when the run is abandoned."""
        finished = False
        try:
            async for signal in turn:
                yield signal
            finished = True
        except EndRun as exc:
            finished = True
            yield exc.failure
            return
        except (ProtocolViolation, MalformedFrame) as exc:
            finished = True
            await self._cancel_task(reader.task_id)
            what = f"broke the identity mapping: {exc}" if isinstance(exc, ProtocolViolation) else f"sent {exc}"
            yield s.Failed(message=f"The agent {what}.", code="A2A_PROTOCOL_ERROR")
            return
        except A2AError as exc:
            finished = True
            # An error frame after the stream began: the run ends, and the task it started is cancelled, as
            # on a transport failure; nobody could answer or follow it once its execution is marked failed.
            await self._cancel_task(reader.task_id if self._owns_task(request, reader) else None)
            failure = refused(exc)
            if failure.code == "A2A_UNAVAILABLE":
                failure = s.Failed(message=f"The agent answered with an error: {str(exc)[:300]}", code="A2A_EXECUTION_FAILED")
            yield failure
            return
        except (httpx.HTTPError, OSError) as exc:
            finished = True
            await self._cancel_task(reader.task_id if self._owns_task(request, reader) else None)
            yield unavailable(exc)
            return
        finally:
            if not finished and self._owns_task(request, reader):  # cancelled, or its client went away: stop the task
                await self._cancel_task(reader.task_id)
        yield end_of(reader)

    @staticmethod
    def _owns_task(request: AgentRequest, reader: FrameReader) -> bool:
        """A resume the agent has not taken yet leaves the task alone (its interrupts stay answerable), and so
        does a run handed to another replica."""
        return (not request.resume or reader.frames > 0) and not request.released()

    # -- an adopted run --------------------------------------------------------------------------------
    async def _adopted(self, reader: FrameReader) -> AsyncIterator[s.Signal]:
        """Another replica started this run and stopped: recover what was missed, then follow the task."""
        if not reader.task_id:
            raise EndRun(s.Failed(message="The adopted run had no agent task yet.", code="EXECUTION_LOST"))
        for signal in await recover_pipeline(self.client, reader):
            yield signal
        reader.recovering = True
        async for signal in self._follow(reader):
            yield signal
        held: list[s.Signal] = []
        reader.flush_held(held)
        for signal in held:
            yield signal

    # -- a new turn ---------------------------------------------------------------------------------
    async def _new_turn(self, request: AgentRequest, reader: FrameReader) -> AsyncIterator[s.Signal]:
        message = messages.new_turn(request, reader.context_id)
        async for signal in self._read(reader, self.client.stream("SendStreamingMessage", messages.params(message))):
            yield signal
        if not reader.stop and reader.task_id:
            async for signal in self._follow(reader):
                yield signal

    # -- a resume -----------------------------------------------------------------------------------
    async def _resume(self, request: AgentRequest, reader: FrameReader) -> AsyncIterator[s.Signal]:
        if not reader.task_id:
            raise EndRun(s.Failed(message="The execution has no agent task to answer.", code="EXECUTION_LOST"))
        problem = await restore(self.client, request.cwd, reader.session_id, reader.task_id) or await check_task(self.client, reader)
        if problem is not None:
            raise EndRun(problem)
        recovered = await recover_pipeline(self.client, reader)
        outbound = messages.answers(request, reader.context_id, reader.task_id)
        if any(item.cancels for item in outbound):
            # A dismissed question or choice: the task cannot go on without it, so it is cancelled (§4).
            await self._cancel_task(reader.task_id)
            yield s.Accepted()
            raise EndRun(s.Failed(message="The question was dismissed, so the agent's task was cancelled.", code="CANCELLED"))
        taken, before = False, reader.pipeline.cursor
        for index, item in enumerate(outbound):
            assert item.message is not None
            if item.streamed:
                frames = self.client.stream("SendStreamingMessage", messages.params(item.message))
                signals = self._read(reader, frames, first_is_acceptance=not taken)
            else:
                signals = self._send(reader, item.message, first_is_acceptance=not taken)
            async for signal in signals:
                if not taken:
                    taken = True
                    yield s.Accepted()
                    for recovered_signal in recovered:  # what was missed, once the answer is accepted
                        yield recovered_signal
                yield signal
            last = index == len(outbound) - 1
            if reader.inputs or reader.state in TERMINAL_STATES:
                return  # the task moved on (or ended) before the remaining answers: they are not sent
            if not last:
                reader.stop = False  # an earlier answer's stream: the next answer goes on
        if outbound[-1].streamed:
            if not reader.stop:
                async for signal in self._follow(reader):
                    yield signal
            return
        async for signal in self._after_sideband(reader, before):
            yield signal

    async def _after_sideband(self, reader: FrameReader, before: int) -> AsyncIterator[s.Signal]:
        """SendMessage only says the answers were taken (§4): GetTask says where the task is now, SubscribeToTask
        follows it unless it ended, and a recovery from the cursor the answers were sent at brings back what the
        task said in between, which no stream carried."""
        for signal in await self._snapshot(reader):
            yield signal
        if not reader.stop:
            async for signal in self._follow(reader):
                yield signal
        for signal in await recover_pipeline(self.client, reader, after=before):
            yield signal

    async def _send(self, reader: FrameReader, message: dict[str, Any], *, first_is_acceptance: bool) -> AsyncIterator[s.Signal]:
        """A sideband answer: SendMessage, whose reply only says it was taken."""
        try:
            reply = await self.client.call("SendMessage", messages.params(message))
        except A2AError as exc:
            if first_is_acceptance:
                raise EndRun(refused(exc)) from exc
            raise
        for signal in reader.read(reply if isinstance(reply, dict) else {}):
            yield signal

    # -- reading -----------------------------------------------------------------------------------
    async def _read(
        self, reader: FrameReader, frames: AsyncIterator[dict[str, Any]], *, first_is_acceptance: bool = False, idle: float | None = None
    ) -> AsyncIterator[s.Signal]:
        """Map frames until the reader says stop (the stream is then closed, never read past its end). With
        `idle`, a stream silent that long raises TimeoutError."""
        seen = 0
        try:
            while True:
                try:
                    async with asyncio.timeout(idle):  # in this task: the stream's trace span stays in one context
                        result = await anext(frames)
                except StopAsyncIteration:
                    break
                seen += 1
                if reader.reconcile:  # an adopted run's subscription is tapped by now (its snapshot came first)
                    reader.reconcile = False
                    for signal in await self._reconciled(reader):
                        yield signal
                for signal in reader.read(result):
                    yield signal
                adoption = reader.adoption()
                if adoption is not None:
                    yield s.Adoptable(state=adoption)
                if reader.stop:
                    return
        except A2AError as exc:
            if first_is_acceptance and seen == 0:
                raise EndRun(refused(exc)) from exc
            raise
        finally:
            await _close(frames)
        if first_is_acceptance and seen == 0:
            raise EndRun(s.Failed(message="The agent's answer stream ended before its first frame.", code="A2A_UNAVAILABLE"))

    async def _follow(self, reader: FrameReader) -> AsyncIterator[s.Signal]:
        """The stream ended while the task still works: follow it with SubscribeToTask, then ask GetTask."""
        for _ in range(SUBSCRIBE_ATTEMPTS):
            frames = self.client.stream("SubscribeToTask", {"id": reader.task_id})
            try:
                async for signal in self._read(reader, frames, idle=self.follow_idle):
                    yield signal
            except A2AError as exc:
                log.info("SubscribeToTask %s refused: %s", reader.task_id, str(exc)[:200])
                break
            except TimeoutError:
                for signal in await self._snapshot(reader):
                    yield signal
                if reader.stop:
                    return
                await self._cancel_task(reader.task_id)
                silent = f"The agent's task sent nothing for {self.follow_idle:g} s while still working; it was cancelled."
                raise EndRun(s.Failed(message=silent, code="A2A_EXECUTION_FAILED")) from None
            if reader.stop:
                return
        for signal in await self._snapshot(reader):
            yield signal

    async def _reconciled(self, reader: FrameReader) -> list[s.Signal]:
        try:
            task = await self.client.call("GetTask", {"id": reader.task_id, "historyLength": 100})
        except (A2AError, httpx.HTTPError) as exc:
            log.info("GetTask %s after the subscription failed (%s): text missed in between stays missed", reader.task_id, exc)
            return []
        return reader.reconciled(task.get("task", task) if isinstance(task, dict) else {})

    async def _snapshot(self, reader: FrameReader) -> list[s.Signal]:
        task = await self.client.call("GetTask", {"id": reader.task_id, "historyLength": 100})
        return reader.read({"task": task.get("task", task) if isinstance(task, dict) else {}})

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


def end_of(reader: FrameReader) -> s.Signal:
    """The run's end from the last state seen (§6): inputs, success, a cancel, or a failure."""
    if reader.inputs:
        checkpoint = {
            "taskId": reader.task_id,
            "contextId": reader.context_id,
            "sessionId": reader.session_id,
            "lastSequence": reader.pipeline.cursor,
            "inputs": {request.id: meta for request, meta in reader.inputs},
        }
        return s.InputRequired(interrupts=[request for request, _ in reader.inputs], checkpoint=checkpoint)
    if reader.state in ("completed", "input-required"):
        return s.Completed()
    if reader.state == "canceled":
        return s.Failed(message="The agent cancelled the task.", code="CANCELLED")
    if reader.state in (None, "working", "submitted"):
        return s.Failed(message="The agent's stream ended while the task was still working.", code="A2A_EXECUTION_FAILED")
    return s.Failed(message=f"The agent task ended in state '{reader.state}'.", code="A2A_EXECUTION_FAILED")


async def _close(frames: AsyncIterator[Any]) -> None:
    aclose = getattr(frames, "aclose", None)
    if aclose is not None:
        await aclose()
