"""A run's life in one place: the engine starts its task here, which drives the backend and settles the outcome."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine

from opentelemetry import context as otel_context
from opentelemetry import trace

from gateway.engine.driver import announce, drive
from gateway.engine.faults import backend_error
from gateway.engine.outcome import Disconnected, Failed, HandedOff, Outcome
from gateway.engine.run import Run
from gateway.engine.settle import settle

log = logging.getLogger("agui.engine")


def start(run: Run) -> None:
    """Announce the admitted (or adopted) run and give it its task: nothing more of it runs before the caller's next
    await. An adopted run is announced only if its first owner had not (its log shows no RUN_STARTED)."""
    if run.adoption is None or not run.adoption.replayed.started:
        announce(run)
    run.task = asyncio.get_running_loop().create_task(_life(run), name=f"run:{run.lease.run_id}")


async def _take_pending_cancel(task: asyncio.Task[None]) -> None:
    """Forget the stops the run was asked for: the outcome is decided. A stop the run asked of itself, from its own
    task (its lease proof ran out as it was about to publish), is still armed on Python 3.11, where `uncancel()`
    leaves it to cancel the task's next wait: it is taken at this step, not at settle's first store call."""
    try:
        await asyncio.sleep(0)
    except asyncio.CancelledError:
        pass
    while task.cancelling():
        task.uncancel()


async def _life(run: Run) -> None:
    # The task was created during admission: make the run's span current, so its children nest under it
    # (nothing to do when spans are not recorded: the task already carries the caller's trace context).
    if run.span.is_recording():
        otel_context.attach(trace.set_span_in_context(run.span))
    run.running = True
    if run.keeper is not None:
        run.keeper.start()
    try:
        if run.stop_reason is not None:  # stopped before its task ran: the backend never saw it
            outcome: Outcome = run.stop_reason
        else:  # the backend, in this frame: an idle run's task holds one frame fewer
            try:
                started = await drive(run)
                outcome = await started if isinstance(started, Coroutine) else started
            except asyncio.CancelledError:
                outcome = run.stop_reason or Disconnected()
            except Exception as exc:  # a backend that raises is a failed task, never a crashed stream
                log.exception("backend failure in run %s", run.lease.run_id)
                outcome = Failed(backend_error(exc))
            task = run.task
            if task is not None and task.cancelling():  # a stop as the backend finished: its outcome stands
                await _take_pending_cancel(task)
    finally:
        if run.keeper is not None:
            run.keeper.stop()
    try:
        try:
            run.outcome = await settle(run, outcome)
        finally:
            run.services.on_settled(run)
        if run.writer is not None:
            await run.writer.finish(end=not isinstance(run.outcome, HandedOff))
    finally:
        run.closed(outcome)
