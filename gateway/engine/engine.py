"""The run engine: admission against the store in one atomic step, the registry of live runs, cancel routing, drain."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec
from opentelemetry import trace
from opentelemetry.trace import Span

from gateway import metrics, tracing
from gateway.agents.base import AgentBackend
from gateway.agents.catalog import Agents
from gateway.engine import documents, lifecycle
from gateway.engine.adopt import Adopter, Adoption
from gateway.engine.budget import LiveBytes
from gateway.engine.caller import ANONYMOUS, Caller, check_user_id, list_scope, thread_key
from gateway.engine.conversation import Conversation
from gateway.engine.eager import start_eagerly
from gateway.engine.faults import as_contract_error, store_error
from gateway.engine.follow import LogHandle
from gateway.engine.handle import LiveHandle, RunHandle
from gateway.engine.history import HistoryPolicy
from gateway.engine.hydrate import HydratedRun, IdleThread, idle_events, snapshot_events
from gateway.engine.logwriter import LogPolicy
from gateway.engine.outcome import Cancelled, Disconnected, failure_reason, outcome_label
from gateway.engine.prepare import Multitask, PreparedRun
from gateway.engine.queue import Dequeued, Waiting, WaitingHandle, Wakes
from gateway.engine.retained import RetainedLogs
from gateway.engine.run import Run, RunServices
from gateway.engine.stream import PositionGone, PositionUnknown, TooManyFollowers
from gateway.engine.threads import Threads
from gateway.engine.timers import LOOP_TIMERS, Timers
from gateway.errors import ErrorCode, GatewayError
from gateway.ids import random_hex
from gateway.log_output import LeanLogger
from store import (
    Admission,
    AdmitResult,
    CancelStatus,
    ExecutionStatus,
    LatestRun,
    Lease,
    Progress,
    Rejected,
    Rejection,
    StoreUnavailable,
    ThreadHistory,
    ThreadStore,
)
from store.base import latest_run_of, thread_agent
from store.eventlog import READ_LIMIT, LogRef, ros_digest

# A run's log is written behind its stream (the first write ~20 ms after it starts): a client that drops and
# attaches to another replica at once may look before it exists, so an unknown run is looked up a few more times.
LOG_APPEAR_TRIES = 4
LOG_APPEAR_PAUSE = 0.05
# Every EXECUTION_NOT_FOUND refusal of an attach answers after this long at least: an unknown run takes the looks
# above, and a known run with the wrong identity must not answer sooner (which runs exist is nobody's business).
REFUSAL_SECONDS = LOG_APPEAR_TRIES * LOG_APPEAR_PAUSE + 0.05
NEVER_GIVEN_OUT = "This position was never given out."

log = logging.getLogger("agui.engine")
run_lines = LeanLogger("agui.engine")  # a run's start and end, every run: the lean way


class RunEngine:
    """Transport-agnostic: takes a PreparedRun, returns a RunHandle whose event batches a transport frames."""

    def __init__(
        self,
        store: ThreadStore,
        agents: Agents | AgentBackend,
        *,
        interrupt_ttl: float,
        upstream_interrupt_ttl: float | None = None,
        max_runs: int = 0,
        on_busy_change: Callable[[bool], None] | None = None,
        log_policy: LogPolicy | None = None,
        timers: Timers = LOOP_TIMERS,
        max_live_bytes: int = 0,
        max_state_bytes: int = documents.MAX_STATE_BYTES,
        history: HistoryPolicy | None = None,
        multitask: Multitask = "reject",
        max_queued: int = 8,
        max_background_seconds: float = 3600.0,
    ) -> None:
        self.store = store
        self.multitask: Multitask = multitask  # what a busy thread does with a run that names no policy (--multitask)
        self.max_queued = max_queued  # runs that may wait per thread (--max-queued-runs)
        self.max_background_seconds = max_background_seconds  # a run with no client is cancelled after this long
        self.wakes = Wakes()  # queued runs wait on these; a run's end here wakes its thread's
        self.agents = agents if isinstance(agents, Agents) else Agents.one(agents)
        self.agent = self.agents.default  # the default agent (`POST /`, `/invocations`, `/ws`)
        self.max_runs = max_runs  # cap on runs in flight on this process (0: none)
        self.on_busy_change = on_busy_change
        self.accepting = True  # False while draining at shutdown
        retained = None if log_policy is None else RetainedLogs(store.events, log_policy.retained_bytes, log_policy.retention_seconds)
        self.live = LiveBytes(max_live_bytes)  # the memory budget of live runs (--max-live-run-bytes)
        metrics.LIVE_RUN_BYTES.read_from(lambda: self.live.used)
        # One set of run services per agent: a run is made with its agent's (its interrupts' lifetime, its cancels).
        self._services = {
            agent_id: RunServices(
                store,
                agent,
                upstream_interrupt_ttl if upstream_interrupt_ttl is not None and agent.upstream_interrupts else interrupt_ttl,
                functools.partial(self.cancel_backend, agent_id=agent_id),
                self._forget,
                self._settled,
                log_policy,
                retained,
                timers,
                self.live,
                max_state_bytes,
                history,
            )
            for agent_id, agent in self.agents
        }
        self.history = history
        self.threads = Threads(store, self.agents, self.stop)  # the thread API's operations
        self.reattach = log_policy is not None
        self._starting = 0  # admissions in progress, counted against the cap
        self._unsettled = 0  # runs admitted and not yet settled, counted against the cap
        self._queued = 0  # runs waiting for their turn here: each holds its place under the cap from when it queued
        self._runs: dict[str, Run] = {}  # run id -> live run on this process
        self._idle = asyncio.Event()  # set while no run is live (drain waits on it)
        self._idle.set()
        self._by_execution: dict[str, Run] = {}
        self._background: set[asyncio.Task[None]] = set()  # queued runs with no client, waiting for their turn
        self.adopter: Adopter | None = None
        if store.supports_adoption and any(agent.adoptable for _, agent in self.agents) and log_policy is not None:
            self.adopter = Adopter(store, self._adopted, lambda: self.accepting, self.agents.ids)

    def start_adopting(self) -> None:
        """Begin watching for live runs of dead (or draining) replicas to adopt (shared stores, adoptable agents)."""
        if self.adopter is not None:
            self.adopter.start(lambda run_id: run_id in self._runs)

    @property
    def in_flight(self) -> int:
        """Runs admitted and not yet settled (a settled run may still be finishing its event log)."""
        return self._unsettled

    async def start(self, prepared: PreparedRun, caller: Caller = ANONYMOUS, *, retry: bool = False) -> RunHandle:
        """Admit atomically (binding, idempotency, busy, resume-required); raise GatewayError before any event.
        `retry`: the client retries this request to follow its run (it sent `Last-Event-ID`): a run of the same
        request that was admitted but never started (its answer was lost) is admitted again instead of refused.
        A busy thread queues the run when its policy says so: the handle then waits for the run's turn."""
        admitted = await self._start(prepared, caller, retry)
        if isinstance(admitted, Waiting):
            return WaitingHandle(admitted, self.reattach)
        return LiveHandle(admitted, paces=True)

    async def start_background(self, prepared: PreparedRun, caller: Caller = ANONYMOUS) -> None:
        """A run that needs no client (`Prefer: respond-async`): admitted (or queued) now, then it goes on with no
        follower for at most `max_background_seconds`; anyone allowed follows it with a join or an attach."""
        if not self.reattach:
            raise GatewayError(
                ErrorCode.INVALID_INPUT, "Prefer", "A run with no client needs the event log (--max-reattach-grace-seconds above 0)."
            )
        admitted = await self._start(prepared, caller, False)
        if isinstance(admitted, Waiting):
            task = asyncio.get_running_loop().create_task(self._background_turn(admitted))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        else:
            admitted.run_in_background(self.max_background_seconds)

    async def _background_turn(self, waiting: Waiting) -> None:
        try:
            run = await waiting.until_turn()
        except GatewayError as error:
            log.info("queued run %s with no client refused when its turn came: %s", waiting.admission.run_id, error.code.name)
            return
        if run is not None:
            run.run_in_background(self.max_background_seconds)

    async def _start(self, prepared: PreparedRun, caller: Caller, retry: bool) -> Run | Waiting:
        check_user_id(caller, prepared.user_id)
        prepared.agent = prepared.agent or self.agents.default_id
        agent = self.agents.get(prepared.agent)
        if prepared.run.tools and not agent.client_tools:
            raise GatewayError(ErrorCode.INVALID_INPUT, "tools", f"The {agent.name} agent cannot call client tools; send an empty list.")
        self._check_room()
        self._starting += 1
        run_span = tracing.start_run_span(
            "agui.run",
            {
                "agui.thread_id": prepared.run.thread_id,
                "agui.run_id": prepared.run.run_id,
                "agui.transport": prepared.transport,
                "agui.agent": prepared.agent,
            },
        )
        try:
            current = trace.use_span(run_span, end_on_exit=False) if run_span.is_recording() else contextlib.nullcontext()
            with current, tracing.span("agui.admission"):
                scope = list_scope(caller, prepared.user_id if prepared.user_id is not None else caller.user_id)
                return await self._admit(prepared, thread_key(caller, prepared.run.thread_id), run_span, retry, scope)
        except BaseException as exc:
            run_span.set_attribute("agui.outcome", exc.code.name if isinstance(exc, GatewayError) else "error")
            run_span.end()
            raise
        finally:
            self._starting -= 1

    def _check_room(self) -> None:
        """This replica takes one more run (it is not draining, and holds fewer than its cap and its memory budget)."""
        if not self.accepting:
            raise GatewayError(ErrorCode.SHUTTING_DOWN)
        if self.max_runs and self._unsettled + self._starting + self._queued >= self.max_runs:
            raise GatewayError(ErrorCode.SERVICE_QUOTA_EXCEEDED)
        if self.live.full:
            raise GatewayError(
                ErrorCode.SERVICE_QUOTA_EXCEEDED,
                detail=f"The live runs on this replica hold its memory budget of {self.live.limit} bytes (--max-live-run-bytes).",
            )

    async def attach(
        self,
        thread_id: str,
        run_id: str,
        ros_invocation_id: str,
        after: int,
        caller: Caller = ANONYMOUS,
        *,
        digest: str | None = None,
        user_id: str | None = None,
        language: str = "en",
    ) -> RunHandle:
        """Follow a run from position `after`: live from this replica's ring, else from the store's log (an ended
        run, or one another replica runs). Another principal's run, a wrong rosInvocationId, a userId that is not
        the one the run was bound to, or an unknown run is EXECUTION_NOT_FOUND, and each refusal takes the same
        time (no oracle for which runs exist); with `digest` (a retried request), another request's run is
        RUN_ID_CONFLICT. A position past the last one given out is INVALID_INPUT."""
        check_user_id(caller, user_id)
        if not self.reattach:
            raise GatewayError(ErrorCode.EXECUTION_NOT_FOUND, detail="Reattach is turned off on this gateway.")
        asked = time.monotonic()
        try:
            return await self._attach(
                thread_id, run_id, ros_invocation_id, _identities(ros_invocation_id, user_id, caller), after, caller, digest, language
            )
        except GatewayError as error:
            if error.code is ErrorCode.EXECUTION_NOT_FOUND:
                await asyncio.sleep(max(0.0, asked + REFUSAL_SECONDS - time.monotonic()))
            raise

    async def join(
        self,
        thread_id: str,
        after: int,
        caller: Caller = ANONYMOUS,
        *,
        user_id: str | None = None,
        language: str = "en",
        after_run: str | None = None,
        agent: str | None = None,
    ) -> RunHandle | None:
        """Join the thread. One that keeps its conversation starts with it and its state, then follows its active run
        live (hydrate.py); `after` (a position in its newest run, from a client that reconnects) goes on from there
        when the run's log still holds it. A thread without a conversation: its newest run from `after`, replayed,
        then live. None when there is nothing to join. The thread is the caller's (another principal's thread is no
        thread), and a thread bound to a userId is joined with that userId only: a thread that is not there and one
        that is not the caller's answer alike. `after_run`: the run a join's position names (`<runId>:<n>`, `after`
        -1 for `<runId>:end`): a position in an older run than the newest is no place to go on from, so the join
        starts over with the conversation. `agent`: the join names an agent (CopilotKit's connect): a thread of
        another agent is THREAD_BINDING_CONFLICT."""
        check_user_id(caller, user_id)
        wanted = None if agent is None else self.agents.recorded(self.agents.resolve(agent))
        if not self.reattach and self.history is None:
            raise GatewayError(ErrorCode.EXECUTION_NOT_FOUND, detail="Reattach is turned off on this gateway.")
        key = thread_key(caller, thread_id)
        with as_contract_error:
            document = await self.store.read_document(key)
            kept = await self.store.read_history(key) if self.history is not None and document else ThreadHistory()
        latest = latest_run_of(document)
        asker = user_id if user_id is not None else caller.user_id
        if latest is None or (latest.user_id is not None and latest.user_id != asker):
            return None
        if wanted is not None and thread_agent(document) != wanted:
            raise GatewayError(ErrorCode.THREAD_BINDING_CONFLICT, "agentId")
        if after_run is not None and after_run != latest.run_id:
            after = 0  # a newer run began since: the conversation again, then that run
        elif after_run is not None and after < 0:
            return None  # the client has the thread through its newest run's end, and no run began since
        if kept.summary is not None and (after == 0 or not self.reattach):
            return await self._hydrated(thread_id, document or {}, kept, latest, caller, language)
        try:
            handle = await self._attach(thread_id, latest.run_id, "", None, after, caller, None, language, latest)
            handle.names_run = kept.summary is not None and handle.positions
            return handle
        except GatewayError as error:
            if error.code not in (ErrorCode.EXECUTION_NOT_FOUND, ErrorCode.EVENTS_EXPIRED):
                raise
            if kept.summary is not None:  # its log expired: the conversation holds what it said
                return await self._hydrated(thread_id, document or {}, kept, latest, caller, language)
            if error.code is ErrorCode.EVENTS_EXPIRED:
                raise
        return None

    async def _hydrated(
        self, thread_id: str, document: dict[str, Any], kept: ThreadHistory, latest: LatestRun, caller: Caller, language: str
    ) -> RunHandle:
        stored = msgspec.json.decode(kept.conversation) if kept.conversation else {}
        messages, state = list(stored.get("messages") or []), stored.get("state", msgspec.UNSET)
        active = document.get("active")
        if isinstance(active, dict) and self.reattach:
            try:
                inner = await self._attach(thread_id, latest.run_id, "", None, 0, caller, None, language, latest)
            except GatewayError as error:
                if error.code is not ErrorCode.EXECUTION_NOT_FOUND:
                    raise
            else:
                conversation = Conversation(messages)
                conversation.add_new(inner.new_input())  # the user's message of the run in flight
                return HydratedRun(inner, snapshot_events(conversation.messages, state))
        execution = document.get("execution")
        interrupts = []
        if isinstance(execution, dict) and execution.get("status") == "interrupted":
            interrupts = [p.get("wire") for p in execution.get("pending") or [] if isinstance(p, dict)]
        return IdleThread(thread_id, latest.run_id, idle_events(thread_id, latest.run_id, messages, state, interrupts))

    async def _attach(
        self,
        thread_id: str,
        run_id: str,
        ros_invocation_id: str,
        identities: dict[str, str | None] | None,
        after: int,
        caller: Caller,
        digest: str | None,
        language: str,
        joined: LatestRun | None = None,
    ) -> RunHandle:
        """`identities` None (`joined` set): a client joining the thread, whose caller binding was checked."""
        key = thread_key(caller, thread_id)
        run = self._runs.get(run_id)
        # An adopted run's ring starts where its first owner stopped: older positions are read from the log.
        if run is not None and run.lease.thread_id == key and run.writer is not None and after + 1 >= run.stream.first:
            if identities is not None:
                _check_identity(run.ros_digest, identities, run.prepared.digest, digest)
            try:
                handle: RunHandle = LiveHandle(run, after, paces=digest is not None)
            except PositionGone:
                raise GatewayError(ErrorCode.EVENTS_EXPIRED, "lastEventId") from None
            except PositionUnknown:
                raise GatewayError(ErrorCode.INVALID_INPUT, "lastEventId", NEVER_GIVEN_OUT) from None
            except TooManyFollowers as full:
                raise GatewayError(ErrorCode.SERVICE_QUOTA_EXCEEDED, detail=f"A run takes at most {full} followers at once.") from None
            metrics.labelled(metrics.REATTACHES, "live").inc()
            return handle
        ref, events = LogRef(key, run_id), self.store.events
        with as_contract_error:
            read = await events.read(ref, after, READ_LIMIT)
            for _ in range(LOG_APPEAR_TRIES):  # a run started on another replica a moment ago: its log's first write
                if read is not None:
                    break
                await asyncio.sleep(LOG_APPEAR_PAUSE)
                read = await events.read(ref, after, READ_LIMIT)
        if read is None:
            raise GatewayError(ErrorCode.EXECUTION_NOT_FOUND)
        if identities is not None:
            _check_identity(read.meta.ros_digest, identities, read.meta.request_digest, digest)
        if read.head is not None and after > read.head:
            raise GatewayError(ErrorCode.INVALID_INPUT, "lastEventId", NEVER_GIVEN_OUT)
        if after + 1 < read.first:
            raise GatewayError(ErrorCode.EVENTS_EXPIRED, "lastEventId")
        execution_id = read.meta.execution_id

        user_id = identities[read.meta.ros_digest] if identities is not None else joined.user_id if joined else None

        async def cancel() -> None:
            if identities is None:  # a joined stream: a stop of that run by its thread, the right its join checked
                await self.stop(thread_id, run_id, caller, user_id)
                return
            await self.cancel(thread_id, execution_id, ros_invocation_id, caller, user_id)

        metrics.labelled(metrics.REATTACHES, "log").inc()
        return LogHandle(events, ref, thread_id, read, after, language, cancel)

    async def _admit(self, prepared: PreparedRun, key: str, run_span: Span, retry: bool, scope: str) -> Run | Waiting:
        ext = prepared.workspace.extension
        admission = Admission(
            thread_id=key,
            run_id=prepared.run.run_id,
            digest=prepared.digest,
            cwd=prepared.binding_cwd,
            user_id=prepared.user_id,
            ros_invocation_id=ext.ros_invocation_id,
            is_resume=prepared.is_resume,
            new_execution_id=f"exec-{random_hex(16)}",
            owner=self.store.owner_id,
            nonce=random_hex(16),
            restart_unstarted=retry and self.reattach,  # only where every run that starts leaves a log behind
            history_scope=scope if self.history is not None and self.history.keeps(prepared.plain) else None,
            multitask=prepared.multitask or self.multitask,
            max_queued=self.max_queued,
            agent=self.agents.recorded(prepared.agent),
        )
        result = await self._admitted(admission, prepared, key)
        if result.queued:
            metrics.labelled(metrics.RUNS_QUEUED, admission.multitask).inc()
            log.info(
                "run queued thread=%s run=%s place=%d policy=%s",
                prepared.run.thread_id,
                admission.run_id,
                result.queued,
                admission.multitask,
            )
            if result.stop_execution:
                await self._stop_running(key, result.stop_owner, result.stop_execution)
            # Asked again while it waits: no history with each ask (the run reads it when its turn comes).
            waiting_admission = msgspec.structs.replace(admission, waiting=True, history_scope=None)
            self._queued += 1
            return Waiting(prepared, waiting_admission, key, scope, run_span, self._take_turn, self._leave, self.wakes, result.queued)
        return await self._started(prepared, key, result, run_span, scope)

    async def _admitted(self, admission: Admission, prepared: PreparedRun, key: str) -> AdmitResult:
        # A store that answers at once (memory) admits here, with no task, shield or turn of the loop (a call of it
        # that waits after all goes on in a task, shielded as any other).
        admit = self.store.admit(admission)
        admitting = start_eagerly(admit) if self.store.answers_at_once else asyncio.ensure_future(admit)
        try:
            return admitting.result() if admitting.done() else await asyncio.shield(admitting)
        except Rejected as exc:
            if exc.reason is Rejection.DEQUEUED:
                raise Dequeued from None
            raise store_error(exc) from None
        except StoreUnavailable as exc:
            raise store_error(exc) from None
        except asyncio.CancelledError:
            # The caller went away while the store admitted it: release what the store granted, or the thread
            # would stay busy with a lease that no run holds.
            admitting.add_done_callback(lambda done: self._release_orphan(done, prepared, key, admission))
            raise

    async def _started(self, prepared: PreparedRun, key: str, result: AdmitResult, run_span: Span, scope: str) -> Run:
        """The admitted run, made and started (the backend told first of interrupts that expired as it was admitted)."""
        if result.expired is not None:
            await self.cancel_backend(result.expired.execution_id, result.expired.checkpoint, result.expired.agent)
        run = Run(self._services[prepared.agent], prepared, key, result, run_span)
        run.record(scope, result.kept)
        self._register(run)
        run_lines.info(
            "run started thread=%s run=%s execution=%s resume=%s runtime_session=%s agent=%s",
            prepared.run.thread_id,
            run.lease.run_id,
            run.lease.execution_id,
            prepared.is_resume,
            prepared.runtime_session_id,
            prepared.agent,
        )
        return run

    async def _take_turn(self, waiting: Waiting) -> Run | None:
        """Ask the store whether the queued run's turn has come (renewing its place): the run, admitted and started,
        or None while it waits. A draining replica refuses it now (it gives its place up); its room under the cap
        was taken when it queued."""
        if not self.accepting:
            raise GatewayError(ErrorCode.SHUTTING_DOWN)
        try:
            result = await self._admitted(waiting.admission, waiting.prepared, waiting.key)
        except GatewayError as error:
            if error.code is not ErrorCode.STATE_PERSISTENCE_FAILED:
                raise
            log.warning("queued run %s could not ask for its turn; asking again", waiting.admission.run_id)
            return None  # its place lapses if the store stays away that long (QUEUE_TICKET_SECONDS)
        if result.queued:
            waiting.place = result.queued
            return None
        self._queued -= 1  # now a run in flight: counted as one
        return await self._started(waiting.prepared, waiting.key, result, waiting.span, waiting.scope)

    def _leave(self, waiting: Waiting) -> None:
        """The queued run will not run: its place goes (a failure leaves it to lapse, QUEUE_TICKET_SECONDS)."""
        self._queued -= 1
        task = asyncio.get_running_loop().create_task(self.store.leave_queue(waiting.key, waiting.admission.run_id))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        waiting.span.set_attribute("agui.outcome", "dequeued")
        waiting.span.end()

    def _release_orphan(self, admitted: asyncio.Future[AdmitResult], prepared: PreparedRun, key: str, admission: Admission) -> None:
        if admitted.cancelled() or admitted.exception() is not None:
            return
        result = admitted.result()
        if result.queued:
            task = asyncio.get_running_loop().create_task(self.store.leave_queue(key, admission.run_id))
        else:
            execution_id = result.execution.execution_id if result.execution else ""
            lease = Lease(key, prepared.run.run_id, execution_id, result.fence)
            status: ExecutionStatus | None = None if prepared.is_resume else "cancelled"  # a resume keeps its interrupts
            task = asyncio.get_running_loop().create_task(self.store.finish_run(lease, status, Progress(0, {})))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # best effort; the lease expires otherwise
        log.info("admission of run %s completed after its caller left: released", prepared.run.run_id)

    def _adopted(self, prepared: PreparedRun, key: str, admitted: AdmitResult, span: Span, adoption: Adoption) -> None:
        """A run the adopter took over: made and started here, as an admitted one is."""
        prepared.agent = self.agents.resolve(prepared.agent)  # an agent this replica does not declare is not adopted here
        self._register(Run(self._services[prepared.agent], prepared, key, admitted, span, adoption))

    def _register(self, run: Run) -> None:
        metrics.labelled(metrics.RUNS_STARTED, run.prepared.transport, run.prepared.agent).inc()
        metrics.RUNS_IN_FLIGHT.inc()
        self._idle.clear()
        self._unsettled += 1
        self._runs[run.lease.run_id] = run
        if run.lease.execution_id:
            self._by_execution[run.lease.execution_id] = run
        lifecycle.start(run)
        if self._unsettled == 1 and self.on_busy_change:
            self.on_busy_change(True)

    def _settled(self, run: Run) -> None:
        """The run's outcome is recorded and its terminal event sent: it no longer counts as in flight."""
        self._unsettled -= 1
        metrics.RUNS_IN_FLIGHT.dec()
        self.wakes.wake(run.lease.thread_id)  # its end is written: a run queued here behind it goes now
        if self._unsettled == 0 and self.on_busy_change:
            self.on_busy_change(False)

    def _forget(self, run: Run) -> None:
        label, seconds = outcome_label(run.outcome), time.monotonic() - run.started
        metrics.labelled(metrics.RUNS_ENDED, run.prepared.transport, label, run.prepared.agent).inc()
        metrics.labelled(metrics.RUN_DURATION, metrics.outcome_kind(label), run.prepared.agent).observe(seconds)
        self._runs.pop(run.lease.run_id, None)
        if self._by_execution.get(run.lease.execution_id) is run:
            del self._by_execution[run.lease.execution_id]
        reason = failure_reason(run.outcome)
        run_lines.info(
            "run ended thread=%s run=%s outcome=%s seconds=%.3f agent=%s%s",
            run.thread_id,
            run.lease.run_id,
            label,
            seconds,
            run.prepared.agent,
            "" if reason is None else f" reason={reason!r}",
        )
        if not self._runs:
            self._idle.set()

    async def cancel_backend(self, execution_id: str, checkpoint: Any, agent_id: str = "") -> None:
        """`agent_id`: the agent whose task it is (empty: the default's, as an execution records it)."""
        try:
            await self.agents.get(agent_id or self.agents.default_id).cancel_execution(execution_id, checkpoint)
        except Exception:  # best effort; the state already says cancelled
            log.warning("backend could not cancel execution %s", execution_id, exc_info=True)

    async def cancel(
        self, thread_id: str, execution_id: str, ros_invocation_id: str, caller: Caller = ANONYMOUS, user_id: str | None = None
    ) -> CancelStatus:
        """Cancel extension: CANCELLED or ALREADY_TERMINAL; raise EXECUTION_NOT_FOUND / EXECUTION_LOST.
        Another principal's execution, or one on a thread bound to another userId, is not found."""
        check_user_id(caller, user_id)
        key = thread_key(caller, thread_id)
        with as_contract_error:
            result = await self.store.cancel(key, execution_id, ros_invocation_id, user_id)
        if result.status is CancelStatus.NOT_FOUND:
            raise GatewayError(ErrorCode.EXECUTION_NOT_FOUND)
        if result.status is CancelStatus.LOST:
            raise GatewayError(ErrorCode.EXECUTION_LOST, "executionId")
        if result.status is CancelStatus.CANCELLED:
            metrics.labelled(metrics.CANCELS, "extension").inc()
            if result.running_owner is not None or execution_id in self._by_execution:
                await self._stop_running(key, result.running_owner, execution_id)
            elif result.execution is not None and result.execution.status == "interrupted":
                await self.cancel_backend(execution_id, result.execution.checkpoint, result.execution.agent)
        return result.status

    async def stop(self, thread_id: str, run_id: str | None, caller: Caller = ANONYMOUS, user_id: str | None = None) -> CancelStatus:
        """Stop by thread (`POST /threads/{id}/stop`, the mux `cancel` of a joined stream): the thread's active run, or
        with `run_id` that run only (a queued one leaves its queue; one that ended is `already_terminal`, and the run
        after it is never touched); a thread waiting on interrupts ends them. The same right as starting a run on the
        thread: its principal, and its userId where it is bound to one; any other thread is THREAD_NOT_FOUND."""
        check_user_id(caller, user_id)
        key = thread_key(caller, thread_id)
        with as_contract_error:
            result = await self.store.stop(key, run_id, user_id if user_id is not None else caller.user_id)
        if result.status is CancelStatus.NOT_FOUND:
            raise GatewayError(ErrorCode.THREAD_NOT_FOUND, "threadId")
        if result.status is CancelStatus.CANCELLED:
            metrics.labelled(metrics.CANCELS, "stop").inc()
            log.info("run stopped thread=%s run=%s", thread_id, run_id or "(active)")
            if result.execution is not None:  # it waited on interrupts: they ended now, and so does the agent's task
                await self.cancel_backend(result.execution.execution_id, result.execution.checkpoint, result.execution.agent)
            elif result.execution_id:
                await self._stop_running(key, result.running_owner, result.execution_id)
            else:  # a queued run left its queue: its waiter on this replica hears it now
                self.wakes.wake(key)
        return result.status

    async def _stop_running(self, key: str, owner: str | None, execution_id: str) -> None:
        """The store holds the cancel intent: the run stops here if it runs here, else its replica is woken (a lost
        wake-up delays it to that replica's next lease renewal, which reads the intent)."""
        run = self._by_execution.get(execution_id)
        if run is not None and run.lease.thread_id == key:
            run.stop(Cancelled())
        elif owner is not None:
            await self.store.notify_cancel(owner, key, execution_id)

    def cancel_local(self, key: str, execution_id: str) -> None:
        """A cancel wake-up from another replica (`key`: the store's thread key); the durable intent is recorded. No
        execution: the thread's active run ended there, and a run queued here may be next."""
        if not execution_id:
            self.wakes.wake(key)
            return
        run = self._by_execution.get(execution_id)
        if run is not None and run.lease.thread_id == key:
            metrics.labelled(metrics.CANCELS, "remote").inc()
            run.stop(Cancelled())

    async def drain(self, grace_seconds: float) -> None:
        """Stop admitting runs; wait for active ones up to the grace period, then hand the adoptable ones to another
        replica (their agent task goes on) and cancel the rest on purpose."""
        self.accepting = False
        if self.adopter is not None:
            self.adopter.stop()
        try:
            await asyncio.wait_for(self._idle.wait(), grace_seconds)
        except TimeoutError:
            pass
        for run in list(self._runs.values()):
            if await run.hand_off():
                metrics.HANDOFFS.inc()
                log.info("run handed off thread=%s run=%s", run.thread_id, run.lease.run_id)
                continue
            metrics.labelled(metrics.CANCELS, "drain").inc()
            run.stop(Cancelled())
        pending = [run.task for run in self._runs.values() if run.task is not None]
        if pending:
            await asyncio.wait(pending, timeout=5)

    async def shutdown(self) -> None:
        """The process is ending: every run still live is stopped as if its client had gone."""
        if self.adopter is not None:
            self.adopter.stop()
        runs = list(self._runs.values())
        for run in runs:
            run.stop(Disconnected())
        await asyncio.gather(*(run.task for run in runs if run.task is not None), return_exceptions=True)


def _identities(ros_invocation_id: str, user_id: str | None, caller: Caller) -> dict[str, str | None]:
    """The identity digests an attacher may match, each with its userId: the userId it names, else none (or, under
    OAuth, the token's user, which a client need not repeat)."""
    users = [user_id] if user_id is not None else [None, caller.user_id] if caller.user_id is not None else [None]
    return {ros_digest(ros_invocation_id, user): user for user in users}


def _check_identity(ros: str, identities: dict[str, str | None], request: str, asked_request: str | None) -> None:
    if ros not in identities:
        raise GatewayError(ErrorCode.EXECUTION_NOT_FOUND)
    if asked_request is not None and asked_request != request:
        raise GatewayError(ErrorCode.RUN_ID_CONFLICT)
