"""Adoption: a live run picked up by this replica when its owner stopped renewing its lease (the owner died, or
handed the run off while draining). Only runs whose backend said how to follow them (`Adoptable`) qualify.

Every half second (a third of the lease when that is shorter) the adopter asks the store for adoptable runs whose lease ran out (a time-ordered index, not a
scan), takes each with the next fence, fences the event log against the former owner, rebuilds the translator
from the log, and lets the backend follow the agent's task from the state the first owner recorded."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import msgspec
from opentelemetry.trace import Span

from gateway import metrics, tracing
from gateway.engine.prepare import PreparedRun
from gateway.engine.replay import Replayed, replay
from gateway.protocol import validate
from gateway.protocol.input import decode_run_input
from store import AdmitResult, Adopted, Rejected, StoreUnavailable, ThreadStore
from store.eventlog import READ_LIMIT, LogRef

log = logging.getLogger("agui.engine")
ADOPT_BATCH = 16  # adoptable runs taken per scan
SCAN_SECONDS = 0.5  # longest pause between two scans (one ZRANGEBYSCORE each): adoption within a lease + ~0.5 s


@dataclass(frozen=True, slots=True)
class Adoption:
    """A run this replica adopted: the record its first owner left, its log as replayed, and where the log stands."""

    record: dict[str, Any]
    replayed: Replayed
    head: int  # the last position the log holds
    first: int  # the oldest position the log holds
    opened: bool = True  # False: the first owner died before its log's first write, so the adopter opens it


Take = Callable[[PreparedRun, str, AdmitResult, Span, Adoption], None]  # the engine makes the run (key: the store's)


async def read_log(store: ThreadStore, ref: LogRef) -> tuple[list[bytes], int, int, bool]:
    """Every event the run's log holds, its first and last positions, and whether its first owner opened it at
    all (an owner that died within its first write delay left none: the adopter opens it)."""
    events, after, first, opened = store.events, 0, 0, False
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
    prepared.agent = str(record.get("agent") or "")
    return prepared


async def adoption_of(store: ThreadStore, adopted: Adopted) -> tuple[PreparedRun, str, AdmitResult, Span, Adoption]:
    """What the engine needs to start the adopted run: its log fenced against the former owner first, then read."""
    lease = adopted.lease
    ref = LogRef(lease.thread_id, lease.run_id)
    await store.events.write(ref, [], 1, fence=lease.fence)  # from now on the former owner writes nothing
    data, first, head, opened = await read_log(store, ref)
    prepared = prepared_from(adopted.record, lease.run_id)
    span = tracing.start_run_span("agui.run.adopted", {"agui.thread_id": prepared.run.thread_id, "agui.run_id": lease.run_id})
    admitted = AdmitResult(adopted.execution, [], None, lease.fence)
    return prepared, lease.thread_id, admitted, span, Adoption(adopted.record, replay(data), head, first, opened)


class Adopter:
    """The replica's watch for runs to adopt; `take` hands what it adopted to the engine, which starts the run."""

    def __init__(self, store: ThreadStore, take: Take, accepting: Callable[[], bool], agents: Collection[str] | None = None) -> None:
        self.store = store
        self.take = take
        self.accepting = accepting
        self.agents = agents  # the agents this replica declares: a run of another is left to a replica that does
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
            taken = await self.store.adopt(thread_key, run_id, self.agents)
        except (StoreUnavailable, Rejected) as exc:
            log.info("run %s not adopted now (%s)", run_id, exc)
            return 0
        if taken is None:
            return 0
        try:
            self.take(*await adoption_of(self.store, taken))
        except Exception:
            log.exception("run %s was adopted but could not be started", run_id)
            return 0
        metrics.ADOPTIONS.inc()
        lease = taken.lease
        log.info("run adopted thread=%s run=%s execution=%s fence=%d", lease.thread_id, run_id, lease.execution_id, lease.fence)
        return 1
