"""Adoption: a live run picked up by this replica when its owner stopped renewing its lease (the owner died, or
handed the run off while draining). Only runs whose backend said how to follow them (`Adoptable`) qualify.

Every half second (a third of the lease when that is shorter) the adopter asks the store for adoptable runs whose lease ran out (a time-ordered index, not a
scan), takes each with the next fence, fences the event log against the former owner, rebuilds the translator
from the log, and lets the backend follow the agent's task from the state the first owner recorded."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any

import msgspec

from gateway import metrics, tracing
from gateway.engine.follow import READ_LIMIT
from gateway.engine.prepare import PreparedRun
from gateway.engine.replay import replay
from gateway.engine.run import Adoption, Run, RunServices
from gateway.protocol import validate
from gateway.protocol.input import decode_run_input
from store import AdmitResult, Adopted, Rejected, StoreUnavailable, ThreadStore
from store.eventlog import LogRef

log = logging.getLogger("agui.engine")
ADOPT_BATCH = 16  # adoptable runs taken per scan
SCAN_SECONDS = 0.5  # longest pause between two scans (one ZRANGEBYSCORE each): adoption within a lease + ~0.5 s


async def read_log(services: RunServices, ref: LogRef) -> tuple[list[bytes], int, int, bool]:
    """Every event the run's log holds, its first and last positions, and whether its first owner opened it at
    all (an owner that died within its first write delay left none: the adopter opens it)."""
    events, after, first, opened = services.store.events, 0, 0, False
    data: list[bytes] = []
    while True:
        read = await events.read(ref, after, READ_LIMIT)
        opened = opened or (read is not None and bool(read.meta.ros_digest))
        if read is None or not read.entries:
            return data, first or after + 1, after, opened
        first = first or read.first
        data.extend(entry for _, entry in read.entries)
        after = read.entries[-1][0]


def prepared_from(record: dict[str, Any], run_id: str) -> PreparedRun:
    """The run as its first owner admitted it, from the record it left (no message text, no secrets)."""
    ext: dict[str, Any] = {"schemaVersion": 1, "rosInvocationId": record["ros"], "cwd": record["cwd"]}
    if isinstance(record.get("userId"), str):
        ext["userId"] = record["userId"]
    body = {"threadId": record["thread"], "runId": run_id, "state": {}, "messages": [], "tools": [], "context": []}
    run = decode_run_input(msgspec.json.encode({**body, "forwardedProps": {"iacCode": ext}}))
    assert not isinstance(run.forwarded_props.iacCode, msgspec.UnsetType)
    workspace = validate.Workspace(extension=run.forwarded_props.iacCode, cwd=record["cwd"])
    language = str(record.get("language") or "en")
    prepared = PreparedRun(run, workspace, str(record.get("digest") or ""), None, 0, language, None, str(record.get("transport") or "sse"))
    prepared.grace_seconds = float(record.get("grace") or 0.0)
    return prepared


async def adopted_run(services: RunServices, adopted: Adopted) -> Run:
    """The adopted run, started: its log fenced against the former owner first, then read back."""
    lease = adopted.lease
    ref = LogRef(lease.thread_id, lease.run_id)
    await services.store.events.write(ref, [], 1, fence=lease.fence)  # from now on the former owner writes nothing
    data, first, head, opened = await read_log(services, ref)
    prepared = prepared_from(adopted.record, lease.run_id)
    span = tracing.start_run_span("agui.run.adopted", {"agui.thread_id": prepared.run.thread_id, "agui.run_id": lease.run_id})
    admitted = AdmitResult(adopted.execution, [], None, lease.fence)
    adoption = Adoption(adopted.record, replay(data), head, first, opened)
    return Run(services, prepared, lease.thread_id, admitted, span, adoption)


class Adopter:
    """The replica's watch for runs to adopt; `take` registers a run it adopted with the engine."""

    def __init__(self, store: ThreadStore, services: RunServices, take: Callable[[Run], None], accepting: Callable[[], bool]) -> None:
        self.store = store
        self.services = services
        self.take = take
        self.accepting = accepting
        self.local: Callable[[str], bool] = lambda run_id: False  # runs already live here
        self._task: asyncio.Task[None] | None = None

    def start(self, local: Callable[[str], bool]) -> None:
        self.local = local
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="adopter")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _watch(self) -> None:
        interval = min(SCAN_SECONDS, self.store.lease_seconds / 3)
        while True:
            await asyncio.sleep(interval * random.uniform(0.8, 1.2))  # replicas do not scan in step
            if not self.accepting():
                continue
            try:
                await self.scan()
            except Exception:
                log.warning("adoption scan failed", exc_info=True)

    async def scan(self) -> int:
        """Adopt what is due now; returns how many runs were adopted."""
        try:
            candidates = await self.store.adoption_candidates(ADOPT_BATCH)
        except StoreUnavailable:
            return 0
        adopted = 0
        for thread_key, run_id in candidates:
            if self.local(run_id) or not self.accepting():
                continue
            adopted += await self._adopt(thread_key, run_id)
        return adopted

    async def _adopt(self, thread_key: str, run_id: str) -> int:
        try:
            taken = await self.store.adopt(thread_key, run_id)
        except (StoreUnavailable, Rejected) as exc:
            log.info("run %s not adopted now (%s)", run_id, exc)
            return 0
        if taken is None:
            return 0
        try:
            run = await adopted_run(self.services, taken)
        except Exception:
            log.exception("run %s was adopted but could not be started", run_id)
            return 0
        metrics.ADOPTIONS.inc()
        log.info("run adopted thread=%s run=%s execution=%s fence=%d", run.thread_id, run_id, run.lease.execution_id, run.lease.fence)
        self.take(run)
        return 1
