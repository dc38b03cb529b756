"""The driver: the run's first events (the lifecycle publishes them as the run is admitted), the resume check, then
the backend's signals fed through the translator into the run's event stream until a terminal signal fixes the
outcome."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any

from gateway import PROTOCOL_VERSION, metrics
from gateway.agents import signals as s
from gateway.agents.base import ResumeAnswer
from gateway.engine.budget import LiveBytes
from gateway.engine.documents import refused
from gateway.engine.faults import STORE_FAILURES, failed_signal_error, store_error
from gateway.engine.machine import RunEvent, RunState
from gateway.engine.outcome import Completed, Failed, Interrupted, Outcome
from gateway.engine.request import agent_request
from gateway.engine.resume import check_resume, unanswerable
from gateway.errors import ErrorCode, GatewayError
from gateway.protocol import events as e

if TYPE_CHECKING:
    from gateway.engine.run import Run

log = logging.getLogger("agui.engine")


# Signals that are no events: the end, or the run's adoptable state. Exact types, as the translator dispatches on:
# one hash lookup an event where isinstance walked the signal's classes against each.
_NOT_SHOWN = frozenset((*s.TERMINAL_SIGNALS, s.Adoptable))


def _started(run: Run) -> list[e.Event]:
    parent = run.prepared.run.parent_run_id
    started = e.RunStarted(
        thread_id=run.thread_id,
        run_id=run.lease.run_id,
        protocol_version=PROTOCOL_VERSION,
        parent_run_id=parent if isinstance(parent, str) else None,
    )
    return [started, *run.translator.reopen_steps()]


def _answers(run: Run) -> tuple[tuple[ResumeAnswer, ...], dict[str, str]]:
    """The resume's answers and their digests; raises the contract's in-stream error (nothing is accepted)."""
    entries = run.prepared.run.resume
    if not isinstance(entries, list) or not entries:
        return (), {}
    ros_invocation_id = run.prepared.workspace.extension.ros_invocation_id
    return check_resume(entries, run.execution, run.history, ros_invocation_id)


async def _accept(run: Run, digests: dict[str, str]) -> Failed | None:
    """The backend produced its first signal: it took the answers. Only now drop the pending state."""
    run.fire(RunEvent.ANSWERS_TAKEN)
    if not digests:
        return None
    try:
        await run.services.store.accept_resume(run.lease, digests)
    except STORE_FAILURES as exc:
        return Failed(store_error(exc))
    return None


async def _terminal(run: Run, signal: s.Signal) -> Outcome:
    if isinstance(signal, s.Failed):
        return Failed(failed_signal_error(signal))
    if isinstance(signal, s.InputRequired):
        # Refused at the source: an interrupt no resume can answer would hold the thread until it expired.
        problem = unanswerable(signal.interrupts)
        if problem is not None:
            metrics.labelled(metrics.SIGNALS_REFUSED, "InputRequired").inc()
            log.warning("run %s: %s", run.lease.run_id, problem)
            return Failed(refused(problem))
        return Interrupted(signal)
    assert isinstance(signal, s.Completed)
    return Completed(signal.result, signal.pending_tool_call_ids)


def announce(run: Run) -> None:
    """RUN_STARTED (and the steps an interrupted execution re-opens): the first events of every run, published as it
    is admitted, before its task's first step, so that the client's first read finds them."""
    run.stream.put_now(_started(run))


async def drive(run: Run) -> Outcome | Coroutine[Any, Any, Outcome]:
    """Start the backend: an outcome when it ends before any signal, else the coroutine that consumes its signals
    to the terminal one, for the run's task to await itself (one frame less on the stack of every run while it
    waits). A stop request arrives as cancellation of either."""
    if run.adoption is not None:
        return await _follow(run)
    try:
        answers, digests = _answers(run)
    except GatewayError as error:
        return Failed(error)
    run.fire(RunEvent.RESUME_SENT if answers else RunEvent.TURN_STARTED)
    checkpoint: Any = run.execution.checkpoint if run.execution is not None else None
    request = agent_request(run.prepared, run.lease, answers, checkpoint, released=run.is_released)
    run.release_input()
    return _consume(run, run.services.agent.run(request), digests)


async def _follow(run: Run) -> Coroutine[Any, Any, Outcome]:
    """An adopted run: no RUN_STARTED (its first owner sent it), the backend follows the agent's task from the
    state the first owner recorded and the text its log shows."""
    assert run.adoption is not None
    run.fire(RunEvent.TURN_STARTED)
    request = agent_request(run.prepared, run.lease, (), None, released=run.is_released)
    run.release_input()
    replayed = run.adoption.replayed
    # The log may be ahead of the recorded state (recorded at each renewal): what it shows is never sent again.
    state = {**(run.adopt_state or {}), "seenEvents": replayed.agent_events}
    state["cursor"] = max(int(state.get("cursor") or 0), replayed.agent_sequence)
    return _consume(run, run.services.agent.follow(request, state, replayed.shown), {})


MAX_HELD = 64  # events of signals a backend had ready at once, published together at most


class _Held(list[bytes]):
    """The events of signals a backend had ready, encoded, not yet published. While some are held, a callback is due on the
    loop: its next turn comes when the backend waits (or the run gives the loop its turn), and the callback publishes
    them in it, ahead of whatever ends that wait (a reply, a stop), so what was ready goes out before the backend
    waits. The driver awaits each step as any coroutine would (a step taken by hand costs a StopIteration per
    signal)."""

    __slots__ = ("due", "failure", "heed", "run")

    def __init__(self, run: Run) -> None:
        super().__init__()
        self.run = run
        self.due = False  # a callback of this list is on the loop
        self.heed = False  # the callback asks the driver, at its next step, to wait for room or to fail
        self.failure: Exception | None = None

    def publish_when_waiting(self) -> None:
        self.due = False
        try:
            if _release(self.run, self):
                self.heed = True
        except asyncio.CancelledError:  # the proof no longer holds: the run is being stopped (check told it)
            pass
        except Exception as exc:  # noqa: BLE001 - a defect of ours: the run fails with it at its next step
            self.failure, self.heed = exc, True
        finally:
            self.clear()


async def _consume(run: Run, signals: AsyncIterator[s.Ready], digests: dict[str, str]) -> Outcome:
    """Feed the backend's signals to the stream. The events of the signals a backend had ready at once (a burst: an
    agent's loop, or one network read of a remote agent's events) are published together, at the backend's next wait
    or every MAX_HELD events, where each publish costs about half a microsecond. What was ready goes out on the loop's
    next turn, ahead of whatever ends the backend's wait, if the lease proof still holds then."""
    # No bound methods cached in locals: an idle run's frame would keep them (two objects) for its whole life.
    not_shown = _NOT_SHOWN
    # The lease proof: None where the store needs none (memory, file). Asked as a burst begins, so a run whose proof
    # ran out while its backend waited translates nothing more, and again before the burst is published (`_release`,
    # the callback), so nothing is shown that the proof does not cover; not before each event of a burst, where it
    # would cost a Python call and a clock read per event and change nothing the client sees.
    keeper = run.keeper
    awaiting = run.state is RunState.AWAITING_ACCEPTANCE
    loop = asyncio.get_running_loop()
    held = _Held(run)
    # The memory budget of live runs, checked once a step of the backend's stream: one comparison while it holds.
    live = run.services.live
    cut_above = live.limit or math.inf
    try:
        while True:
            try:  # an idle run waits with no object of ours between its task and the backend
                ready = await signals.__anext__()
            except StopAsyncIteration:
                break
            except BaseException:  # the backend failed (or the run was stopped): what it had ready is shown first
                _release(run, held)
                raise
            if held.heed:  # the callback published while the backend waited: a follower trails, or it failed
                held.heed = False
                if held.failure is not None:
                    raise held.failure
                await run.stream.room()
            # A list is what the backend had ready at once (one network read's events): one step of its stream for all.
            for signal in ready if isinstance(ready, list) else (ready,):
                if awaiting and not isinstance(signal, s.Failed):
                    awaiting = False
                    not_accepted = await _accept(run, digests)
                    if not_accepted is not None:
                        return not_accepted
                if type(signal) in not_shown:  # one check for the rare signals on the hot path
                    paced = _release(run, held)
                    if isinstance(signal, s.Adoptable):
                        if paced:
                            await run.stream.room()
                        await run.note_adoptable(signal.state)
                        continue
                    return await _terminal(run, signal)
                if keeper is not None and not held.due and not keeper.check():
                    raise asyncio.CancelledError  # the lease is no longer proven: the run was stopped; nothing more is shown
                mark = len(held)
                try:
                    run.translator.translate_into(signal, held)
                except GatewayError as error:  # the backend broke the protocol: none of this signal is shown
                    del held[mark:]
                    _release(run, held)
                    metrics.labelled(metrics.SIGNALS_REFUSED, type(signal).__name__).inc()
                    log.warning("run %s: %s", run.lease.run_id, error.detail)
                    return Failed(error)
                if not held.due and held:
                    held.due = True
                    loop.call_soon(held.publish_when_waiting)
                if len(held) >= MAX_HELD and _release(run, held):
                    await run.stream.room()
            if live.used > cut_above and live.over_share(run.stream.held_bytes):
                return _over_budget(run, held, live)
        _release(run, held)
        return Completed()
    finally:
        # A run that ends by an error of ours (a defect in translating included: part of a signal may be held)
        # shows nothing more; the callback may still be due.
        held.clear()
        await _close(signals)


def _over_budget(run: Run, held: list[bytes], live: LiveBytes) -> Failed:
    """The live runs passed the replica's budget and this one holds more than its share: it ends, never the replica."""
    _release(run, held)
    metrics.RUNS_CUT.inc()
    holds = run.stream.held_bytes
    log.warning("run %s: cut at %d bytes of events, past its share of the live runs' budget (%s)", run.lease.run_id, holds, live.report())
    detail = (
        f"The run held {holds} bytes of events, more than its share of this replica's memory budget for live runs "
        f"({live.limit} bytes among {live.rings}; --max-live-run-bytes)."
    )
    return Failed(GatewayError(ErrorCode.SERVICE_QUOTA_EXCEEDED, detail=detail))


def _release(run: Run, held: list[bytes]) -> bool:
    """Publish the events held; True when the producer must wait for room before it publishes again. The backend's
    own code ran since their burst began, and an event is shown only while the lease proof holds: when it no longer
    does, the run was stopped, and they are dropped with it (CancelledError, as for a burst refused as it begins:
    the run never ends as though they had been shown)."""
    keeper = run.keeper
    if held and keeper is not None and not keeper.check():
        held.clear()
        raise asyncio.CancelledError
    paced = run.stream.publish(held)
    held.clear()
    return paced


async def _close(signals: AsyncIterator[s.Ready]) -> None:
    aclose = getattr(signals, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:  # closing must never mask the run's outcome
        log.debug("backend stream raised on close", exc_info=True)
