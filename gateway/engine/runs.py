"""The run engine: admits a prepared run against the store, drives the backend, and streams translated events."""

from __future__ import annotations

import asyncio
import logging

import msgspec
import time
import uuid
from datetime import datetime, timezone
from typing import AsyncIterator, Callable

from gateway import PROTOCOL_VERSION
from gateway.agents.base import AgentBackend, AgentRequest
from gateway.engine import signals as s
from gateway.engine.prepare import PreparedRun
from gateway.engine.resume import check_resume
from gateway.engine.translator import Translator
from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import message_for
from gateway.protocol import events as e
from gateway.protocol import validate
from store import Admission, PendingInterrupt, Rejected, StoreUnavailable, ThreadStore

log = logging.getLogger("agui.engine")

QUEUE_SIZE = 256  # batches of events buffered per run before the backend is slowed down
_END = object()


def _message_id(prepared: PreparedRun) -> str | None:
    message = validate.last_user_message(prepared.run)
    return message.id if message is not None and isinstance(message.id, str) else None


def _store_error(exc: BaseException) -> GatewayError:
    if isinstance(exc, Rejected):
        return GatewayError(ErrorCode[exc.code], exc.field, exc.detail)
    return GatewayError(ErrorCode.STATE_PERSISTENCE_FAILED)


class Run:
    """One admitted run: a driver task feeding a bounded queue that one transport consumer drains."""

    def __init__(self, engine: RunEngine, prepared: PreparedRun, execution, history, fence: int) -> None:
        self.engine = engine
        self.prepared = prepared
        self.thread_id = prepared.run.thread_id
        self.run_id = prepared.run.run_id
        self.execution = execution
        self.execution_id = execution.execution_id if execution else ""
        self.history = history
        self.fence = fence
        self.queue: asyncio.Queue = asyncio.Queue(QUEUE_SIZE)
        self.cancel_requested = False
        # A resume's answers count once the backend took them; until then its interrupts stay pending.
        self.accepted = not prepared.is_resume
        self.failure: GatewayError | None = None  # set when the run must end with RUN_ERROR (lease lost)
        self.terminal_sent = False
        self.outcome = "running"
        self.started = time.monotonic()
        session = {
            "threadId": self.thread_id,
            "aguiRunId": self.run_id,
            "executionId": self.execution_id,
            "contextId": (execution.context_id if execution else None) or self.thread_id,
            "taskId": execution.task_id if execution else None,
            "rosInvocationId": prepared.workspace.extension.ros_invocation_id,
            "sessionId": execution.session_id if execution else None,
            "runtimeSessionId": prepared.runtime_session_id,
        }
        resuming = prepared.is_resume and execution is not None and execution.status == "interrupted"
        self.translator = Translator(
            session,
            execution.sequence if execution else 0,
            execution.open_steps if resuming else [],
        )
        self.lease_keeper: asyncio.Task | None = None
        self.task = asyncio.get_running_loop().create_task(self._drive(), name=f"run:{self.run_id}")

    # -- consumer side -------------------------------------------------------------
    async def batches(self, heartbeat_seconds: float) -> AsyncIterator[list[e.Event] | None]:
        """Yield lists of events as they come (coalesced), or None after `heartbeat_seconds` of silence."""
        queue = self.queue
        try:
            while True:
                try:
                    item = queue.get_nowait()
                except asyncio.QueueEmpty:
                    try:
                        async with asyncio.timeout(heartbeat_seconds):
                            item = await queue.get()
                    except TimeoutError:
                        yield None
                        continue
                if item is _END:
                    return
                batch = list(item)
                while not queue.empty():
                    item = queue.get_nowait()
                    if item is _END:
                        yield batch
                        return
                    batch.extend(item)
                yield batch
        finally:
            if not self.task.done() and not self.terminal_sent:
                # The client went away during an active run: cancel the backend task.
                self.task.cancel()

    def cancel(self) -> None:
        """Cancel on purpose (cancel extension): the stream ends with the cancelled outcome."""
        self.cancel_requested = True
        if not self.task.done():
            self.task.cancel()

    def fail(self, error: GatewayError) -> None:
        """End the run with RUN_ERROR (e.g. its lease could not be renewed); the backend task is cancelled."""
        self.failure = error
        if not self.task.done():
            self.task.cancel()

    async def keep_lease(self) -> None:
        """Renew the run's lease every third of its lifetime; act on a cancel intent seen there."""
        store = self.engine.store
        period = store.lease_seconds / 3
        loop = asyncio.get_running_loop()
        last_ok = loop.time()
        while not self.task.done():
            await asyncio.sleep(period)
            try:
                renewed = await store.renew(self.thread_id, self.run_id, self.fence)
            except StoreUnavailable:
                if loop.time() - last_ok >= store.lease_seconds * 0.9:
                    self.fail(GatewayError(ErrorCode.STATE_PERSISTENCE_FAILED, detail="The run lease could not be renewed."))
                    return
                continue
            if not renewed.ok:
                self.fail(GatewayError(ErrorCode.EXECUTION_LOST, "runId", "The run lost its lease."))
                return
            last_ok = loop.time()
            if renewed.cancel_requested and not self.cancel_requested:
                self.cancel()

    # -- driver side ----------------------------------------------------------------
    async def _put(self, events: list[e.Event]) -> None:
        if events:
            await self.queue.put(events)

    async def _put_terminal(self, events: list[e.Event]) -> None:
        """Queue the closing events and the terminal one; nothing may follow a terminal event."""
        if not self.terminal_sent:
            self.terminal_sent = True
            await self.queue.put(events)

    async def _finish(self, status: str | None) -> None:
        try:
            await asyncio.shield(
                self.engine.store.finish_run(
                    self.thread_id,
                    self.run_id,
                    self.execution_id,
                    status,
                    sequence=self.translator.sequence,
                    identities=self.translator.identities(),
                    now=self.engine.clock(),
                    fence=self.fence,
                )
            )
        except (StoreUnavailable, Rejected) as exc:
            log.warning("could not record the end of run %s: %s", self.run_id, exc)

    def _error_event(self, error: GatewayError) -> e.RunError:
        return e.RunError(
            code=error.code.name,
            message=message_for(error, self.prepared.language),
            metadata={"threadId": self.thread_id, "runId": self.run_id},
        )

    async def _fail(self, error: GatewayError, status: str | None) -> None:
        self.outcome = error.code.name
        await self._finish(status)
        await self._put_terminal([self._error_event(error)])

    async def _drive(self) -> None:
        t = self.translator
        agent_stream = None
        try:
            run = self.prepared.run
            started = e.RunStarted(
                thread_id=self.thread_id,
                run_id=self.run_id,
                protocol_version=PROTOCOL_VERSION,
                parent_run_id=run.parent_run_id if isinstance(run.parent_run_id, str) else None,
            )
            await self._put([started, *t.reopen_steps()])
            answers: tuple = ()
            digests: dict[str, str] = {}
            if self.prepared.is_resume:
                try:
                    answers, digests = check_resume(
                        run.resume, self.execution, self.history, self.prepared.workspace.extension.ros_invocation_id
                    )
                except GatewayError as error:
                    await self._fail(error, None)
                    return
            request = AgentRequest(
                thread_id=self.thread_id,
                run_id=self.run_id,
                execution_id=self.execution_id,
                cwd=self.prepared.workspace.cwd,
                language=self.prepared.language,
                extension=self.prepared.workspace.extension,
                user_text=self.prepared.user_text,
                image_count=self.prepared.image_count,
                message_id=_message_id(self.prepared),
                images=validate.inline_images(validate.last_user_message(self.prepared.run)) if self.prepared.image_count else (),
                resume=answers,
                checkpoint=self.execution.checkpoint if answers else None,
            )
            agent_stream = self.engine.agent.run(request)
            terminal: s.Signal | None = None
            async for signal in agent_stream:
                if not self.accepted and not isinstance(signal, s.Failed):
                    # The backend produced its first signal: it accepted the answers. Only now drop the pending state.
                    try:
                        await self.engine.store.accept_resume(
                            self.thread_id, self.run_id, self.execution_id, digests, self.engine.clock(), fence=self.fence
                        )
                    except (StoreUnavailable, Rejected) as exc:
                        await self._fail(_store_error(exc), "failed")
                        return
                    self.accepted = True
                if isinstance(signal, s.TERMINAL_SIGNALS):
                    terminal = signal
                    break
                await self._put(t.translate(signal))
            await self._end(terminal or s.Completed())
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            await self._close_backend(agent_stream)
            agent_stream = None
            if self.failure is not None:
                await self._fail(self.failure, self._ending("failed"))
            elif self.cancel_requested:
                await self._end_cancelled([*t.session_event(), *t.close_all()], self._ending("cancelled"))
            else:
                self.outcome = "disconnected"
                await self._finish(self._ending("cancelled"))
        except Exception as exc:  # a backend that raises is a failed task, never a crashed stream
            log.exception("backend failure in run %s", self.run_id)
            code = ErrorCode.A2A_UNAVAILABLE if isinstance(exc, (ConnectionError, OSError)) else ErrorCode.A2A_EXECUTION_FAILED
            await self._fail(GatewayError(code), self._ending("failed"))
        finally:
            await self._close_backend(agent_stream)
            if self.outcome != "disconnected":
                await self.queue.put(_END)
            self.engine._forget(self)

    def _ending(self, status: str) -> str | None:
        """How a run that stops early ends its execution: a resume whose answers were never accepted keeps
        the interrupts pending (None leaves the execution as it is)."""
        return status if self.accepted else None

    async def _close_backend(self, agent_stream) -> None:
        if agent_stream is not None:
            try:
                await agent_stream.aclose()
            except Exception:  # noqa: BLE001 - closing must never mask the run's outcome
                log.debug("backend stream raised on close", exc_info=True)

    async def _end(self, signal: s.Signal) -> None:
        t = self.translator
        if isinstance(signal, s.Failed):
            code = ErrorCode[signal.code] if signal.code in ErrorCode.__members__ else ErrorCode.A2A_EXECUTION_FAILED
            await self._put(t.session_event())
            await self._fail(GatewayError(code, detail=signal.message[:500]), self._ending("failed"))
            return
        if isinstance(signal, s.InputRequired):
            await self._interrupt(signal)
            return
        closing = [*t.session_event(), *t.close_all()]
        await self._finish("completed")
        self.outcome = "success"
        finished = e.RunFinished(
            thread_id=self.thread_id,
            run_id=self.run_id,
            outcome=e.SuccessOutcome(),
            result=signal.result if isinstance(signal, s.Completed) else None,
            usage=t.usage or None,
        )
        await self._put_terminal([*closing, finished])

    async def _end_cancelled(self, closing: list[e.Event], status: str | None) -> None:
        """The cancelled outcome, after every open span was closed."""
        self.outcome = "cancelled"
        await self._finish(status)
        finished = e.RunFinished(thread_id=self.thread_id, run_id=self.run_id, outcome=e.CancelledOutcome())
        await self._put_terminal([*closing, finished])

    async def _interrupt(self, signal: s.InputRequired) -> None:
        t = self.translator
        open_steps = list(t.steps)
        closing = [*t.session_event(), *t.close_all()]
        ttl = self.engine.interrupt_ttl
        now = self.engine.clock()
        expires = now + ttl if ttl > 0 else None
        expires_text = (
            datetime.fromtimestamp(expires, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z") if expires else None
        )
        wire = [
            e.Interrupt(
                id=i.id,
                reason=i.reason,
                message=i.message,
                tool_call_id=i.tool_call_id,
                response_schema=i.response_schema,
                expires_at=expires_text,
                metadata=i.metadata,
            )
            for i in signal.interrupts
        ]
        pending = [
            PendingInterrupt(
                id=i.id,
                reason=i.reason,
                wire=msgspec.to_builtins(w),
                response_schema=i.response_schema,
                tool_call_id=i.tool_call_id,
                expires_at=expires,
            )
            for i, w in zip(signal.interrupts, wire)
        ]
        try:
            await self.engine.store.save_interrupt(
                self.thread_id,
                self.run_id,
                self.execution_id,
                pending,
                checkpoint=signal.checkpoint,
                open_steps=open_steps,
                sequence=t.sequence,
                identities=t.identities(),
                now=now,
                fence=self.fence,
            )
        except (StoreUnavailable, Rejected) as exc:
            # Nothing is announced as recoverable unless it was persisted: fail and cancel the backend task.
            await self.engine.cancel_backend(self.execution_id, signal.checkpoint)
            if isinstance(exc, Rejected) and exc.code == "CANCELLED":
                await self._end_cancelled(closing, "cancelled")  # a cancel intent arrived meanwhile: it wins
            else:
                await self._fail(GatewayError(ErrorCode.STATE_PERSISTENCE_FAILED), "failed")
            return
        self.outcome = "interrupt"
        finished = e.RunFinished(
            thread_id=self.thread_id,
            run_id=self.run_id,
            outcome=e.InterruptOutcome(interrupts=wire),
            usage=t.usage or None,
        )
        await self._put_terminal([*closing, finished])


class RunEngine:
    """Transport-agnostic: takes a PreparedRun, returns a Run whose batches a transport frames."""

    def __init__(
        self,
        store: ThreadStore,
        agent: AgentBackend,
        *,
        interrupt_ttl: float,
        clock: Callable[[], float] = time.time,
        on_busy_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.store = store
        self.agent = agent
        self.interrupt_ttl = interrupt_ttl
        self.clock = clock
        self.on_busy_change = on_busy_change
        self.accepting = True  # False while draining at shutdown
        self.max_runs = 0  # cap on runs in flight on this process (0: none)
        self._starting = 0  # admissions in progress, counted against the cap
        self.runs: dict[str, Run] = {}  # run id -> live run on this process
        self.by_execution: dict[str, Run] = {}

    @property
    def in_flight(self) -> int:
        return len(self.runs)

    async def start(self, prepared: PreparedRun) -> Run:
        """Admit atomically (binding, idempotency, busy, resume-required); raise GatewayError before any event."""
        if not self.accepting:
            raise GatewayError(ErrorCode.SHUTTING_DOWN)
        if self.max_runs and len(self.runs) + self._starting >= self.max_runs:
            raise GatewayError(ErrorCode.SERVICE_QUOTA_EXCEEDED)
        self._starting += 1
        try:
            return await self._admit(prepared)
        finally:
            self._starting -= 1

    async def _admit(self, prepared: PreparedRun) -> Run:
        ext = prepared.workspace.extension
        admission = Admission(
            thread_id=prepared.run.thread_id,
            run_id=prepared.run.run_id,
            digest=prepared.digest,
            cwd=prepared.workspace.cwd,
            user_id=ext.user_id if isinstance(ext.user_id, str) else None,
            ros_invocation_id=ext.ros_invocation_id,
            is_resume=prepared.is_resume,
            new_execution_id=f"exec-{uuid.uuid4().hex}",
            owner=self.store.owner_id,
            now=self.clock(),
            lease_seconds=self.store.lease_seconds,
        )
        try:
            result = await self.store.admit(admission)
        except (Rejected, StoreUnavailable) as exc:
            raise _store_error(exc) from None
        if result.expired is not None:
            await self.cancel_backend(result.expired.execution_id, result.expired.checkpoint)
        run = Run(self, prepared, result.execution, result.history, result.fence)
        if self.store.needs_renewal:
            run.lease_keeper = asyncio.get_running_loop().create_task(run.keep_lease())
        was_idle = not self.runs
        self.runs[run.run_id] = run
        if run.execution_id:
            self.by_execution[run.execution_id] = run
        if was_idle and self.on_busy_change:
            self.on_busy_change(True)
        log.info(
            "run started thread=%s run=%s execution=%s resume=%s runtime_session=%s",
            run.thread_id, run.run_id, run.execution_id, prepared.is_resume, prepared.runtime_session_id,
        )
        return run

    def _forget(self, run: Run) -> None:
        if run.lease_keeper is not None:
            run.lease_keeper.cancel()
        self.runs.pop(run.run_id, None)
        if self.by_execution.get(run.execution_id) is run:
            del self.by_execution[run.execution_id]
        log.info(
            "run ended thread=%s run=%s outcome=%s seconds=%.3f",
            run.thread_id, run.run_id, run.outcome, time.monotonic() - run.started,
        )
        if not self.runs and self.on_busy_change:
            self.on_busy_change(False)

    async def cancel_backend(self, execution_id: str, checkpoint) -> None:
        try:
            await self.agent.cancel_execution(execution_id, checkpoint)
        except Exception:  # noqa: BLE001 - best effort; the state already says cancelled
            log.warning("backend could not cancel execution %s", execution_id, exc_info=True)

    async def cancel(self, thread_id: str, execution_id: str, ros_invocation_id: str) -> str:
        """Cancel extension: 'cancelled' or 'already_terminal'; raise EXECUTION_NOT_FOUND / EXECUTION_LOST."""
        try:
            result = await self.store.cancel(thread_id, execution_id, ros_invocation_id, self.clock())
        except (Rejected, StoreUnavailable) as exc:
            raise _store_error(exc) from None
        if result.status == "not_found":
            raise GatewayError(ErrorCode.EXECUTION_NOT_FOUND)
        if result.status == "lost":
            raise GatewayError(ErrorCode.EXECUTION_LOST, "executionId")
        if result.status == "cancelled":
            run = self.by_execution.get(execution_id)
            if run is not None:
                run.cancel()
            elif result.running_owner is not None:
                await self.store.notify_cancel(result.running_owner, thread_id, execution_id)
            elif result.execution is not None and result.execution.status == "interrupted":
                await self.cancel_backend(execution_id, result.execution.checkpoint)
        return result.status

    def cancel_local(self, thread_id: str, execution_id: str) -> None:
        """A cancel wake-up from another replica: the durable intent is already recorded."""
        run = self.by_execution.get(execution_id)
        if run is not None and run.thread_id == thread_id:
            run.cancel()

    async def drain(self, grace_seconds: float) -> None:
        """Stop admitting runs; wait for active ones up to the grace period, then cancel the rest on purpose."""
        self.accepting = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_seconds
        while self.runs and loop.time() < deadline:
            await asyncio.sleep(0.05)
        for run in list(self.runs.values()):
            run.cancel()
        pending = [run.task for run in self.runs.values()]
        if pending:
            await asyncio.wait(pending, timeout=5)

    async def shutdown(self) -> None:
        for run in list(self.runs.values()):
            run.task.cancel()
        await asyncio.gather(*(r.task for r in list(self.runs.values())), return_exceptions=True)
