"""Settling: the one place where a run's outcome becomes a store write and its terminal event.

| outcome      | store write                                  | terminal events                                 |
|--------------|----------------------------------------------|-------------------------------------------------|
| Completed    | finish: execution completed                  | session, span closes, RUN_FINISHED success      |
| Interrupted  | save the pending interrupts (fails: cancel)  | session, span closes, RUN_FINISHED interrupt    |
| Cancelled    | finish: execution cancelled*                 | session, span closes, RUN_FINISHED cancelled    |
| Failed       | finish: execution failed*                    | RUN_ERROR                                        |
| Disconnected | finish: execution cancelled*                 | as Cancelled (for whoever reattaches later)      |
| HandedOff    | none: the replica that adopts it writes them | none                                             |

* Only when the backend took the run's answers (or it is a new turn): a resume that never reached the
backend leaves its interrupts pending, so the client can answer again.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from gateway.engine.faults import STORE_FAILURES
from gateway.engine.machine import RunEvent, RunState
from gateway.engine.outcome import Cancelled, Completed, Failed, HandedOff, Interrupted, Outcome
from gateway.engine.stream import Entry
from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import message_for
from gateway.logs import with_request_id
from gateway.protocol import events as e
from store import ExecutionStatus, HistoryWrite, PendingInterrupt, Progress, Rejected, Rejection, StoreUnavailable

if TYPE_CHECKING:
    from gateway.engine.run import Run
    from store.eventlog import LogWrite

log = logging.getLogger("agui.engine")
FINISH_RETRY_SECONDS = 10.0


async def settle(run: Run, outcome: Outcome) -> Outcome:
    """Write the outcome to the store, queue the terminal events, end the stream; returns the final outcome
    (an interrupt that cannot be saved becomes a cancel or a failure). A defect of ours while settling still
    ends the stream, with RUN_ERROR INTERNAL_ERROR: no client is left waiting for a terminal event."""
    try:
        return await _settle(run, outcome)
    except Exception:
        log.exception("settling run %s failed", run.lease.run_id)
        failed = Failed(GatewayError(ErrorCode.INTERNAL_ERROR))
        if not run.stream.ended:
            await run.stream.put([_error_event(run, failed.error)])
            await run.stream.close()
        if run.state is RunState.SETTLING:
            run.fire(RunEvent.SETTLED)
        return failed


async def _settle(run: Run, outcome: Outcome) -> Outcome:
    run.fire(RunEvent.OUTCOME_FIXED)
    if not run.services.store.answers_at_once:
        # The run's last events leave with its end, in one write, not in a write of their own just ahead of it. For
        # one store attempt:
        # a failed save or finish lets them go (`stop_holding`), as does the end's publishing or the stream's close.
        run.stream.hold_for_end()
    if isinstance(outcome, Interrupted):
        outcome = await _save_interrupt(run, outcome)  # saving the interrupts releases the lease
    if isinstance(outcome, HandedOff):  # the new owner writes the end; local followers simply stop here
        run.fire(RunEvent.SETTLED)
        await run.stream.close()
        return outcome
    terminal = run.stream.next_entries(_terminal_events(run, outcome))
    if not isinstance(outcome, Interrupted):
        unrecorded = await _finish(run, _status(run, outcome), terminal, await _history(run, outcome))
        if unrecorded is not None and not (isinstance(outcome, Failed) and outcome.error.code is unrecorded.code):
            # No client hears an end the store does not hold: the end it hears is that it could not be recorded.
            outcome = Failed(unrecorded)
            terminal = run.stream.next_entries([_error_event(run, unrecorded)])
    run.stream.stop_holding()  # the end goes out now, with what was held for it
    await run.stream.put_encoded([data for _, data in terminal])
    run.fire(RunEvent.SETTLED)
    await run.stream.close()
    return outcome


def _took_execution(run: Run) -> bool:
    """Whether the backend took this execution: a new turn always, a resume once it took the answers."""
    return run.accepted or not run.prepared.is_resume


def _status(run: Run, outcome: Outcome) -> ExecutionStatus | None:
    if isinstance(outcome, Completed):
        return "completed"
    ending: ExecutionStatus = "failed" if isinstance(outcome, Failed) else "cancelled"
    return ending if _took_execution(run) else None  # a resume whose answers were not taken keeps its interrupts


def _session(run: Run) -> list[e.Event]:
    """The session event, when the backend never named every identity it waits for. A resume whose answers
    were refused sends none: the event says the agent took the execution (IAC_CODE_A2A_WIRE.md §4)."""
    return run.translator.session_event() if _took_execution(run) else []


def _closing(run: Run) -> list[e.Event]:
    return [*_session(run), *run.translator.close_all()]


def _terminal_events(run: Run, outcome: Outcome) -> list[e.Event]:
    thread_id, run_id = run.thread_id, run.lease.run_id
    speaks_1_0 = run.prepared.speaks_1_0  # an older client's schema refuses pendingToolCallIds and `cancelled`
    if isinstance(outcome, Completed):
        pending = list(outcome.pending_tool_call_ids) if speaks_1_0 else None  # it reads calls with no result instead
        finished = e.RunFinished(
            thread_id=thread_id,
            run_id=run_id,
            outcome=e.SuccessOutcome(pending_tool_call_ids=pending or None),
            result=outcome.result,
            usage=run.translator.usage_entries(),
        )
        return [*_closing(run), finished]
    if isinstance(outcome, Interrupted):
        interrupt = e.InterruptOutcome(interrupts=list(outcome.announced))
        return [
            *_closing(run),
            e.RunFinished(thread_id=thread_id, run_id=run_id, outcome=interrupt, usage=run.translator.usage_entries()),
        ]
    if isinstance(outcome, Failed):
        return [*_session(run), _error_event(run, outcome.error)]
    cancelled = e.CancelledOutcome() if speaks_1_0 else None  # a bare RUN_FINISHED: the run ended, nothing pending
    return [*_closing(run), e.RunFinished(thread_id=thread_id, run_id=run_id, outcome=cancelled)]


def _error_event(run: Run, error: GatewayError) -> e.RunError:
    metadata = with_request_id({"threadId": run.thread_id, "runId": run.lease.run_id})  # the run's task inherited it
    usage = run.translator.usage_entries()
    code, message = error.agent_code or error.code.name, error.agent_message or message_for(error, run.prepared.language)
    return e.RunError(code=code, message=message, metadata=metadata, usage=usage)


def _progress(run: Run) -> Progress:
    return Progress(run.translator.sequence, run.translator.identities())


_RECORDED = {Completed: ("completed", "success"), Interrupted: ("interrupted", "interrupt"), Failed: ("failed", "error")}


async def _history(run: Run, outcome: Outcome) -> HistoryWrite | None:
    """The thread's conversation as this run leaves it, for the store to write with the run's end (None: the thread
    keeps none, or it could not be read)."""
    recorder = run.recorder
    if recorder is None:
        return None
    status, ended = _RECORDED.get(type(outcome), ("cancelled", "cancelled"))
    return await recorder.written(run.translator.state, status, ended)


async def _finish(
    run: Run, status: ExecutionStatus | None, terminal: list[Entry], history: HistoryWrite | None = None
) -> GatewayError | None:
    """Record the end, retrying an unreachable or busy store with backoff for as long as the lease would last
    (at most FINISH_RETRY_SECONDS): the write is fenced, so a retry of a write that did land changes nothing.
    The run's event log, `terminal` included, is completed in the same store call where it can be (one round
    trip for both on Redis); a log write that fails there is left to the log writer, which then writes the
    terminal events actually published. None when the end was recorded, else the error the client hears."""
    store, timers, stream = run.services.store, run.services.timers, run.stream
    give_up = timers.now() + min(store.lease_seconds, FINISH_RETRY_SECONDS)
    delay = 0.05
    writer = run.writer
    closing = await writer.closing_write(terminal) if writer is not None else None
    outcome: Exception | None = StoreUnavailable("the end of the run was not recorded")
    try:
        while True:
            try:
                if store.answers_at_once:  # it never waits: no timer to arm and cancel
                    outcome = await _record_end(run, status, closing, history)
                else:
                    async with asyncio.timeout(max(0.05, give_up - timers.now())):  # a hung store never holds the end longer
                        outcome = await _record_end(run, status, closing, history)
                return None
            except Rejected as exc:
                log.warning("the end of run %s was refused (%s): another owner holds the thread", run.lease.run_id, exc.reason.name)
                return GatewayError(ErrorCode.EXECUTION_LOST, "runId", "The run lost its lease before its end was recorded.")
            except (StoreUnavailable, TimeoutError) as exc:
                stream.stop_holding()  # the retries may take seconds: what the run said goes out meanwhile
                if timers.now() + delay > give_up:
                    log.warning("could not record the end of run %s: %s; its lease will expire", run.lease.run_id, exc)
                    return GatewayError(ErrorCode.STATE_PERSISTENCE_FAILED, detail="The end of the run could not be recorded.")
                await timers.sleep(delay)
                delay = min(delay * 2, 1.0)
    finally:
        if writer is not None and closing is not None:
            writer.closed(closing, outcome)  # on any failure the writer writes its log afterwards, from the ring


async def _record_end(run: Run, status: ExecutionStatus | None, closing: LogWrite | None, history: HistoryWrite | None) -> Exception | None:
    """The run's end in the store (with the thread's conversation), with its log's closing write when there is one
    (what that write met)."""
    store, extra = run.services.store, {} if history is None else {"history": history}
    if closing is None:
        await store.finish_run(run.lease, status, _progress(run), **extra)
        logged = None
    else:
        logged = await store.finish_run_and_log(run.lease, status, _progress(run), closing, **extra)
    return logged


def _expiry(now: float, ttl: float) -> tuple[float | None, str | None]:
    if ttl <= 0:
        return None, None
    expires = now + ttl
    text = datetime.fromtimestamp(expires, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return expires, text


def _agents_expiry(text: str) -> tuple[float | None, str]:
    """An agent's own expiresAt: shown as it sent it, and enforced when it reads as an ISO 8601 moment (one without
    a zone is UTC); one that does not read is shown and never enforced."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None, text
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp(), text


async def _save_interrupt(run: Run, outcome: Interrupted) -> Outcome:
    """Nothing is announced as recoverable unless it was persisted first. If it cannot be, the backend's kept work
    is cancelled, and a cancel intent recorded meanwhile wins; anything else is a failure."""
    request = outcome.request
    open_steps = list(run.translator.steps)  # before the terminal events close them
    try:
        ours = _expiry(await run.services.store.now(), run.services.interrupt_ttl)
        expiries = [_agents_expiry(i.expires_at) if i.expires_at is not None else ours for i in request.interrupts]
        wire = [
            e.Interrupt(
                id=i.id,
                reason=i.reason,
                message=i.message,
                tool_call_id=i.tool_call_id,
                response_schema=i.response_schema,
                expires_at=text,
                metadata=i.metadata,
            )
            for i, (_, text) in zip(request.interrupts, expiries, strict=True)
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
            for i, w, (expires, _) in zip(request.interrupts, wire, expiries, strict=True)
        ]
        history = await _history(run, Interrupted(request, tuple(wire)))
        await run.services.store.save_interrupt(
            run.lease, pending, checkpoint=request.checkpoint, open_steps=open_steps, progress=_progress(run), history=history
        )
    except STORE_FAILURES as exc:
        run.stream.stop_holding()  # cancelling the backend may take seconds
        if run.adoptable_elsewhere() and not (isinstance(exc, Rejected) and exc.reason is Rejection.CANCELLED):
            # The task waits for its answers in the agent: whoever adopts the run reads its inputs again and saves
            # them. Cancelling it here could kill another replica's work.
            log.warning("run %s: its interrupts were not saved (%s); another replica takes the run over", run.lease.run_id, exc)
            run.released = True
            return HandedOff()
        await run.services.cancel_backend(run.lease.execution_id, request.checkpoint)
        if isinstance(exc, Rejected) and exc.reason is Rejection.CANCELLED:
            return Cancelled()
        return Failed(GatewayError(ErrorCode.STATE_PERSISTENCE_FAILED))
    return Interrupted(request, tuple(wire))
