"""One admitted run: its state and its collaborators (event stream, lease keeper, translator, adoption record).
Its task is the lifecycle's (lifecycle.py); transports see only a `RunHandle` (handle.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from opentelemetry.trace import Span

from gateway import metrics
from gateway.agents.base import AgentBackend
from gateway.engine import documents
from gateway.engine.budget import UNBOUNDED, LiveBytes
from gateway.engine.history import HistoryPolicy, RunRecorder
from gateway.engine.lease import LeaseKeeper
from gateway.engine.logwriter import LogPolicy, LogWriter
from gateway.engine.machine import RunEvent, RunMachine, RunState, StopReason
from gateway.engine.outcome import Cancelled, Disconnected, Failed, HandedOff, Outcome, outcome_label
from gateway.engine.prepare import PreparedRun
from gateway.engine.replay import restore
from gateway.engine.retained import RetainedLogs
from gateway.engine.stream import EventStream
from gateway.engine.timers import LOOP_TIMERS, Timers
from gateway.engine.translator import Translator
from gateway.errors import GatewayError
from store import AdmitResult, Execution, Lease, StoreUnavailable, ThreadHistory, ThreadStore
from store.eventlog import LogMeta, LogRef, ros_digest

if TYPE_CHECKING:
    from gateway.engine.adopt import Adoption

log = logging.getLogger("agui.engine")

WATCH_CHECK_SECONDS = 1.0  # how often a detached run looks for a follower that came back


@dataclass(frozen=True, slots=True)
class RunServices:
    """What a run needs from the engine; `on_end` reports back when the run has settled."""

    store: ThreadStore
    agent: AgentBackend
    interrupt_ttl: float
    cancel_backend: Callable[[str, Any], Awaitable[None]]
    on_end: Callable[[Run], None]
    on_settled: Callable[[Run], None]  # the outcome is recorded and its events queued (the log may still be written)
    log_policy: LogPolicy | None = None  # None: no event log, no reattach (a disconnect always cancels at once)
    retained: RetainedLogs | None = None  # the byte budget of the ended runs' logs (with a log policy)
    timers: Timers = LOOP_TIMERS  # the time of the lease keeper, the grace window, the end-of-run retry, the log writes
    live: LiveBytes = UNBOUNDED  # the replica's memory budget for live runs' rings
    max_state_bytes: int = documents.MAX_STATE_BYTES  # a run's state document and messages snapshots (--max-state-bytes)
    history: HistoryPolicy | None = None  # which threads keep their conversation (--thread-history), and how much


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
    __slots__ = (
        "_adopt_written",
        "_deadline",
        "_waiting",
        "adopt_state",
        "adoption",
        "background",
        "execution",
        "grace",
        "history",
        "keeper",
        "lease",
        "machine",
        "outcome",
        "prepared",
        "recorder",
        "released",
        "running",
        "services",
        "span",
        "started",
        "stream",
        "task",
        "thread_id",
        "translator",
        "writer",
    )

    def __init__(
        self, services: RunServices, prepared: PreparedRun, key: str, admitted: AdmitResult, span: Span, adoption: Adoption | None = None
    ) -> None:
        execution = admitted.execution
        self.adoption = adoption
        self.adopt_state: dict[str, Any] | None = None  # the backend's latest Adoptable state
        self._adopt_written: dict[str, Any] | None = None  # the record the store holds
        self.released = False  # handed to another replica: the backend's task must go on
        self.services = services
        self.prepared = prepared
        self.thread_id = prepared.run.thread_id  # the client's; the lease holds the store's key
        self.lease = Lease(key, prepared.run.run_id, execution.execution_id if execution else "", admitted.fence)
        self.execution = execution  # read by the resume check and for the checkpoint, then released
        self.history: Sequence[Execution] = admitted.history
        self.machine = RunMachine()  # its state, whether the backend took the execution, and why it must stop
        self.outcome: Outcome | None = None
        self.running = False  # True once the task has begun: only then may stop() cancel it
        reopen = execution.open_steps if prepared.is_resume and execution is not None and execution.status == "interrupted" else []
        self.translator = Translator(
            _session(prepared, execution),
            execution.sequence if execution else 0,
            reopen,
            services.agent.session_keys,
            prepared.run.state if prepared.plain else documents.UNSET,  # the state the client holds, which patches fit
            services.max_state_bytes,
        )
        if adoption is not None:
            restore(self.translator, adoption.replayed)
            self.adopt_state = adoption.record.get("state")
        self.stream, self.writer, self.grace = self._log(services, prepared, key)
        self.recorder: RunRecorder | None = None  # the run's part of its thread's conversation (`record`)
        self._waiting: asyncio.Task[None] | None = None  # detached: waits for a follower to come back
        self.background = False  # a run with no client (`Prefer: respond-async`): followers come and go freely
        self._deadline: asyncio.TimerHandle | None = None  # when a run with no client is cancelled
        self.keeper: LeaseKeeper | None = None
        if services.store.needs_renewal:
            self.keeper = LeaseKeeper(
                services.store,
                self.lease,
                on_lost=self._lease_lost,
                on_cancel=lambda: self.stop(Cancelled()),
                timers=services.timers,
                on_renewed=self.write_adoptable,
            )
        self.started = time.monotonic()
        self.span = span  # the run's trace span, ended when it settles (its task runs inside it)
        self.task: asyncio.Task[None] | None = None  # started by the lifecycle (lifecycle.start)

    def _log(self, services: RunServices, prepared: PreparedRun, key: str) -> tuple[EventStream, LogWriter | None, float]:
        policy = services.log_policy
        if policy is None:
            return EventStream(self, budget=services.live), None, 0.0
        events = services.store.events
        adoption, fence = self.adoption, self.lease.fence
        ref = LogRef(key, self.lease.run_id)
        opened = adoption is not None and adoption.opened
        stream = EventStream(self, policy.bounds, start=adoption.head if adoption is not None else 0, budget=services.live)
        writer = LogWriter(events, ref, self, stream, fence=fence, created=opened, retained=services.retained, timers=services.timers)
        if events.live_writes:
            stream.watch(writer)
            if services.agent.adoptable and services.store.supports_adoption:
                # Another replica may go on with this run from its log: its followers see only what the log holds.
                stream.durable = stream.head
        return stream, writer, min(max(prepared.grace_seconds, 0.0), policy.max_grace_seconds)

    def record(self, scope: str, kept: ThreadHistory | None = None) -> None:
        """Keep this run's part of its thread's conversation (where the thread keeps one): its input messages the
        conversation lacks, then its events; `kept`: the thread's history, where the admission brought it."""
        policy, prepared = self.services.history, self.prepared
        if policy is None or not policy.keeps(prepared.plain):
            return
        sent = prepared.as_sent.messages if prepared.as_sent is not None else msgspec.to_builtins(prepared.run.messages)
        recorder = RunRecorder(policy, scope, self.thread_id, self.lease.run_id, [m for m in sent if isinstance(m, dict)])
        recorder.start(self.services.store, self.lease.thread_id, kept)
        self.recorder = self.stream.recorder = recorder

    def release_input(self) -> None:
        """The backend has its request: let go of what only building it read (the input's conversation, the admitted
        execution's record and the thread's history). Kept, they would live as long as the run: a long conversation
        all of it."""
        self.prepared.release_input()
        self.execution = None
        self.history = ()

    def is_released(self) -> bool:
        """Whether the backend's task must be left alone (the backend asks, as its request's `released`): the run
        was handed to another replica, or it can be adopted and this replica can no longer prove its lease."""
        if self.released:
            return True
        return self.adoptable_elsewhere() and self.keeper is not None and not self.keeper.holds()

    def adoptable_elsewhere(self) -> bool:
        """Another replica can go on with this run: the store holds its adoption record."""
        return self._adopt_written is not None

    # -- what its event stream and log writer ask of the run (it is their StreamOwner and LogOwner) ----------
    def log_first(self) -> int:
        """The log's first position: an adopter keeps its predecessor's entries until its own ring trims past its
        start."""
        adoption, first = self.adoption, self.stream.first
        return adoption.first if adoption is not None and first <= adoption.head + 1 else first

    # -- adoption ---------------------------------------------------------------------------------------
    def _record(self) -> dict[str, Any]:
        """What another replica needs to go on with this run (identities and cursors, never secrets)."""
        prepared, ext = self.prepared, self.prepared.workspace.extension
        return {
            "thread": self.thread_id,
            "ros": ext.ros_invocation_id,
            "userId": prepared.user_id,
            "cwd": prepared.workspace.cwd,
            "language": prepared.language,
            "digest": prepared.digest,
            "transport": prepared.transport,
            "grace": prepared.grace_seconds,
            "agent": prepared.agent,
            "state": self.adopt_state,
        }

    async def note_adoptable(self, state: dict[str, Any]) -> None:
        """The backend says how to follow it elsewhere: the store hears it at once the first time, then with the
        lease renewals (at most once per renewal)."""
        self.adopt_state = state
        if self._adopt_written is None:
            await self.write_adoptable()

    async def write_adoptable(self) -> None:
        if self.adopt_state is None or self.writer is None or not self.services.store.supports_adoption:
            return
        record = self._record()
        if record == self._adopt_written:
            return
        try:
            if await self.services.store.mark_adoptable(self.lease, record):
                self._adopt_written = record
        except StoreUnavailable as exc:
            log.warning("run %s: adoption record not written (%s); retried at the next renewal", self.lease.run_id, exc)

    async def hand_off(self) -> bool:
        """Give the run to another replica now (a drain): the lease goes, the backend's task goes on."""
        if self._adopt_written is None or self.machine.settled:
            return False
        try:
            if not await self.services.store.mark_adoptable(self.lease, self._record(), handoff=True):
                return False
        except StoreUnavailable:
            return False
        self.given_up()
        return True

    def given_up(self) -> None:
        """Another replica goes on with the run (adopted, fenced out, handed off): it ends here without touching the
        backend's task, which is no longer this replica's."""
        self.released = True
        self.stop(HandedOff())

    def _lease_lost(self, error: GatewayError) -> None:
        if self.adoptable_elsewhere():
            # Another replica adopted the run, or will once the lease is gone: its task goes on there, and this
            # replica's followers reattach to it (the log's rules). Nothing here may touch the task any more.
            log.warning("run %s lost its lease (%s): another replica goes on with it; stopping here", self.lease.run_id, error.code.name)
            self.given_up()
        else:
            self.stop(Failed(error))

    def log_meta(self) -> LogMeta:
        recorder = self.recorder
        inputs = msgspec.json.encode(recorder.fresh_input()).decode() if recorder is not None else ""
        return LogMeta(self.ros_digest, self.prepared.digest, self.services.store.owner_id, self.lease.execution_id, inputs)

    def log_fenced(self) -> None:
        """The log refused a write: another replica took the run over."""
        self.given_up()

    @property
    def ros_digest(self) -> str:
        return ros_digest(self.prepared.workspace.extension.ros_invocation_id, self.prepared.user_id)

    def run_in_background(self, seconds: float) -> None:
        """The run needs no client: nobody's leaving stops it, and it is cancelled after `seconds`."""
        self.background = True
        if not self.machine.settled:
            self._deadline = asyncio.get_running_loop().call_later(seconds, self._overdue, seconds)

    def _overdue(self, seconds: float) -> None:
        log.info("run %s with no client ran %.0fs (--max-background-seconds): cancelled", self.lease.run_id, seconds)
        self.stop(Cancelled())

    def stream_detached(self) -> None:
        """The last follower left: without a grace window the run stops now; with one it waits for a follower. A run
        with no client goes on."""
        if self.machine.settled or self.background:
            return
        if self.grace <= 0 or self.writer is None:
            self.stop(Disconnected())
        elif self._waiting is None:
            log.info("run %s: its last follower left; waiting up to %.1fs for one to attach", self.lease.run_id, self.grace)
            self._waiting = asyncio.get_running_loop().create_task(self._await_return(self.writer.ref))

    async def _await_return(self, ref: LogRef) -> None:
        services, events = self.services, self.services.store.events
        now, sleep = services.timers.now, services.timers.sleep
        deadline = now() + self.grace
        metrics.DETACHED_RUNS.inc()
        try:
            while not self.stream.followers:
                await sleep(min(WATCH_CHECK_SECONDS, max(0.0, deadline - now())))
                if self.stream.followers:
                    return
                try:
                    if events.shared and await events.watched(ref):  # attached through another replica
                        deadline = now() + self.grace
                        continue
                except StoreUnavailable:
                    pass
                if now() >= deadline:
                    log.info("run %s: nobody came back within %.1fs: cancelled", self.lease.run_id, self.grace)
                    self.stop(Disconnected())
                    return
        finally:
            metrics.DETACHED_RUNS.dec()
            self._waiting = None

    @property
    def state(self) -> RunState:
        return self.machine.state

    @property
    def accepted(self) -> bool:
        return self.machine.accepted

    @property
    def stop_reason(self) -> StopReason | None:
        return self.machine.stop_reason

    def fire(self, event: RunEvent) -> None:
        self.machine.fire(event)

    def stop(self, reason: StopReason) -> None:
        """Ask the run to end early; the machine decides whether it is heard and which reason stands."""
        if self.machine.ask_stop(reason) and self.running and self.task is not None:
            self.task.cancel()  # cancelled before its first step, a task never runs its body: the lifecycle reads
            # `stop_reason` instead

    def closed(self, outcome: Outcome) -> None:
        """The lifecycle's last step: the run lets go of its timers, span and ring, and reports its end."""
        if self._waiting is not None:
            self._waiting.cancel()
        if self._deadline is not None:
            self._deadline.cancel()
        self.span.set_attribute("agui.outcome", outcome_label(self.outcome or outcome))
        self.span.end()
        self.stream.release()
        if self.writer is not None:
            self.writer.release()
        if self.keeper is not None:
            self.keeper.release()
        self.services.on_end(self)
