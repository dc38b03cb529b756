"""One admitted run: its state, its collaborators (event stream, lease keeper, translator), and the task that
drives it to an outcome and settles it. Transports see only its `RunHandle`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from gateway.agents.base import AgentBackend
from gateway.engine.driver import announce, drive
from gateway.engine.faults import backend_error
from gateway.engine.lease import LeaseKeeper, Sleep
from gateway.engine.outcome import Cancelled, Disconnected, Failed, Outcome, RunState, check_transition, outcome_label
from gateway.engine.prepare import PreparedRun
from gateway.engine.settle import settle
from gateway.engine.stream import EventStream
from gateway.engine.translator import Translator
from gateway.protocol import events as e
from store import AdmitResult, Execution, Lease, ThreadStore

log = logging.getLogger("agui.engine")

StopReason = Cancelled | Failed | Disconnected


@dataclass(frozen=True, slots=True)
class RunServices:
    """What a run needs from the engine; `on_end` reports back when the run has settled."""

    store: ThreadStore
    agent: AgentBackend
    interrupt_ttl: float
    cancel_backend: Callable[[str, Any], Awaitable[None]]
    on_end: Callable[[Run], None]
    lease_sleep: Sleep = asyncio.sleep  # how the lease keeper waits between renewals (tests step it by hand)


def _session(prepared: PreparedRun, execution: Execution | None) -> dict[str, Any]:
    run = prepared.run
    return {
        "threadId": run.thread_id,
        "aguiRunId": run.run_id,
        "executionId": execution.execution_id if execution else "",
        "contextId": (execution.context_id if execution else None) or run.thread_id,
        "taskId": execution.task_id if execution else None,
        "rosInvocationId": prepared.workspace.extension.ros_invocation_id,
        "sessionId": execution.session_id if execution else None,
        "runtimeSessionId": prepared.runtime_session_id,
    }


class Run:
    def __init__(self, services: RunServices, prepared: PreparedRun, key: str, admitted: AdmitResult, span: Span) -> None:
        execution = admitted.execution
        self.services = services
        self.prepared = prepared
        self.thread_id = prepared.run.thread_id  # the client's; the lease holds the store's key
        self.lease = Lease(key, prepared.run.run_id, execution.execution_id if execution else "", admitted.fence)
        self.execution = execution
        self.history = admitted.history
        self.state = RunState.ADMITTED
        self.accepted = False  # the backend works on this execution: a new turn, or a resume whose answers it took
        self.outcome: Outcome | None = None
        self._stop: StopReason | None = None
        self._running = False  # True once the task has begun: only then may stop() cancel it
        reopen = execution.open_steps if prepared.is_resume and execution is not None and execution.status == "interrupted" else []
        self.translator = Translator(_session(prepared, execution), execution.sequence if execution else 0, reopen)
        self.stream = EventStream(on_consumer_gone=lambda: self.stop(Disconnected()))
        self.keeper: LeaseKeeper | None = None
        if services.store.needs_renewal:
            self.keeper = LeaseKeeper(
                services.store,
                self.lease,
                on_lost=lambda error: self.stop(Failed(error)),
                on_cancel=lambda: self.stop(Cancelled()),
                sleep=services.lease_sleep,
            )
        self.started = time.monotonic()
        self.span = span  # the run's trace span, ended when it settles (its task runs inside it)
        self.task = asyncio.get_running_loop().create_task(self._main(), name=f"run:{self.lease.run_id}")

    def move_to(self, state: RunState) -> None:
        check_transition(self.state, state)
        self.state = state
        if state is RunState.RUNNING:
            self.accepted = True

    def stop(self, reason: StopReason) -> None:
        """Ask the run to end early. Ignored once it is settling: its outcome is fixed by then.
        A failure (lost lease) overrides an earlier cancel or disconnect; otherwise the first reason wins."""
        if self.state in (RunState.SETTLING, RunState.ENDED):
            return
        if self._stop is None or isinstance(reason, Failed):
            self._stop = reason
        if self._running:  # a task cancelled before its first step never runs its body: _main checks _stop instead
            self.task.cancel()

    async def _main(self) -> None:
        # The task was created during admission: make the run's span current, so its children nest under it.
        otel_context.attach(trace.set_span_in_context(self.span))
        self._running = True
        if self.keeper is not None:
            self.keeper.start()
        try:
            outcome = await self._outcome() if self._stop is None else await self._stopped_before_start(self._stop)
        finally:
            if self.keeper is not None:
                self.keeper.stop()
        try:
            self.outcome = await settle(self, outcome)
        finally:
            self.span.set_attribute("agui.outcome", outcome_label(self.outcome or outcome))
            self.span.end()
            self.services.on_end(self)

    async def _stopped_before_start(self, reason: StopReason) -> Outcome:
        """Stopped before its task ran: the backend never saw it, but the stream still opens with RUN_STARTED."""
        await announce(self)
        return reason

    async def _outcome(self) -> Outcome:
        task = asyncio.current_task()
        try:
            outcome = await drive(self)
        except asyncio.CancelledError:
            outcome = self._stop or Disconnected()
        except Exception as exc:  # a backend that raises is a failed task, never a crashed stream
            log.exception("backend failure in run %s", self.lease.run_id)
            outcome = Failed(backend_error(exc))
        if task is not None:
            while task.cancelling():  # a stop that came as the backend finished: the backend's outcome stands
                task.uncancel()
        return outcome


class RunHandle:
    """What a transport holds: the run's events and a way to cancel it on purpose."""

    __slots__ = ("_run",)

    def __init__(self, run: Run) -> None:
        self._run = run

    @property
    def run_id(self) -> str:
        return self._run.lease.run_id

    @property
    def thread_id(self) -> str:
        return self._run.thread_id

    def events(self, heartbeat_seconds: float) -> AsyncIterator[list[e.Event] | None]:
        """Batches of events, or None after `heartbeat_seconds` of silence; leaving early disconnects the run."""
        return self._run.stream.batches(heartbeat_seconds)

    def cancel(self) -> None:
        """Cancel on purpose: the stream ends with RUN_FINISHED cancelled."""
        self._run.stop(Cancelled())
