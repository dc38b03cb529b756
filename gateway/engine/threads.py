"""The thread API's operations: a caller's threads listed newest first, one thread read whole, renamed, tagged,
archived, erased, and its runs. A thread is the caller's when its key is the caller's (its principal) and its
userId binding is the one the caller names; any other thread, and one that does not exist, is THREAD_NOT_FOUND
after the same reads."""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from gateway.engine.caller import Caller, check_user_id, list_scope, thread_key
from gateway.engine.faults import as_contract_error
from gateway.errors import ErrorCode, GatewayError
from store import CancelStatus, ThreadHistory, ThreadStore
from store.base import latest_run_of, thread_agent

if TYPE_CHECKING:
    from gateway.agents.catalog import Agents

# The engine's stop by thread: (threadId, runId or None, caller, userId) -> its status.
StopRun = Callable[[str, str | None, Caller, str | None], Awaitable[CancelStatus]]

MAX_META_BYTES = 16 * 1024  # a thread's metadata, as JSON
MAX_TITLE_CHARS = 200
NEWEST_RUNS = 20  # runs a thread's read shows
STOP_WAIT_SECONDS = 5.0  # how long an erase waits for the thread's active run to end before it erases anyway
_decode = msgspec.json.decode
_encode = msgspec.json.encode


class ThreadPatch(msgspec.Struct, forbid_unknown_fields=True):
    title: str | msgspec.UnsetType | None = msgspec.UNSET
    metadata: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    archived: bool | msgspec.UnsetType = msgspec.UNSET


def encode_cursor(at: float, key: str) -> str:
    return base64.urlsafe_b64encode(_encode([at, key])).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    if not cursor:
        return None
    try:
        at, key = _decode(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return float(at), str(key)
    except (binascii.Error, ValueError, TypeError, msgspec.DecodeError):
        raise GatewayError(ErrorCode.INVALID_INPUT, "cursor", "Pass back the nextCursor of an earlier answer.") from None


def moment(seconds: Any) -> str | None:
    """Unix seconds as the ISO 8601 moment the API shows (UTC, milliseconds)."""
    if not isinstance(seconds, (int, float)):
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _run_view(run: dict[str, Any]) -> dict[str, Any]:
    return {**run, **{name: moment(run[name]) for name in ("startedAt", "endedAt") if name in run}}


def _status(document: dict[str, Any]) -> str:
    if isinstance(document.get("active"), dict):
        return "running"
    execution = document.get("execution")
    return "interrupted" if isinstance(execution, dict) and execution.get("status") == "interrupted" else "idle"


def _client_id(caller: Caller, key: str) -> str:
    return key if caller.owner is None else key.split(":", 1)[1]


class Threads:
    def __init__(self, store: ThreadStore, agents: Agents, stop: StopRun) -> None:
        self._store = store
        self._agents = agents
        self._stop = stop

    async def _read(
        self, caller: Caller, thread_id: str, user_id: str | None, conversation: bool
    ) -> tuple[str, dict[str, Any], ThreadHistory]:
        """The caller's thread (its key, state document, history), or THREAD_NOT_FOUND: both reads are made either way."""
        check_user_id(caller, user_id)
        key = thread_key(caller, thread_id)
        with as_contract_error:
            document, kept = await asyncio.gather(self._store.read_document(key), self._store.read_history(key, conversation=conversation))
        asker = user_id if user_id is not None else caller.user_id
        bound = ((document or {}).get("binding") or {}).get("user_id")  # a thread bound to a userId: that userId only
        if not document or (bound is not None and bound != asker) or latest_run_of(document) is None:
            raise GatewayError(ErrorCode.THREAD_NOT_FOUND, "threadId")
        return key, document, kept

    def _summary(self, thread_id: str, document: dict[str, Any], kept: ThreadHistory) -> dict[str, Any]:
        summary = _decode(kept.summary) if kept.summary else {}
        meta = _decode(kept.meta) if kept.meta else {}
        agent_id = thread_agent(document) or self._agents.default_id
        runs = [_run_view(run) for run in summary.get("runs") or [] if isinstance(run, dict)]
        active = document.get("active")
        if isinstance(active, dict):
            runs = [*runs, {"runId": active.get("run_id"), "status": "running"}]
        return {
            "threadId": thread_id,
            "title": meta["title"] if "title" in meta else summary.get("title"),
            "createdAt": moment(summary.get("createdAt")),
            "updatedAt": moment(summary.get("updatedAt")),
            "status": _status(document),
            "queued": len(document.get("queue") or []),
            "archived": bool(meta.get("archived", False)),
            "metadata": meta.get("metadata") or {},
            "messageCount": summary.get("messageCount", 0),
            "droppedMessages": summary.get("droppedMessages", 0),
            "agentId": agent_id,
            "agent": self._agents.get(agent_id).name if agent_id in self._agents.ids else None,
            "runCount": len(runs),
            "lastRun": runs[-1] if runs else None,
            "_runs": runs,
        }

    def client_id(self, caller: Caller, key: str) -> str:
        return _client_id(caller, key)

    def watch(self, caller: Caller, user_id: str | None, on_change: Callable[[str, bool], None]) -> Callable[[], None]:
        """Call `on_change(thread key, erased)` for each change of the caller's list (this userId's), from any replica."""
        check_user_id(caller, user_id)
        return self._store.watch_threads(list_scope(caller, user_id if user_id is not None else caller.user_id), on_change)

    async def watched(self) -> None:
        """Return once a watch begun by `watch` hears changes from every replica."""
        await self._store.threads_watched()

    async def view_of(self, caller: Caller, key: str) -> dict[str, Any] | None:
        """A changed thread's summary as its list shows it (None: it is gone)."""
        with as_contract_error:
            document, kept = await asyncio.gather(self._store.read_document(key), self._store.read_history(key, conversation=False))
        if not document:
            return None
        view = self._summary(_client_id(caller, key), document, kept)
        view.pop("_runs")
        return view

    async def list(self, caller: Caller, user_id: str | None, limit: int, cursor: str | None, archived: str) -> dict[str, Any]:
        check_user_id(caller, user_id)
        scope = list_scope(caller, user_id if user_id is not None else caller.user_id)
        before, next_cursor = decode_cursor(cursor), None
        found: list[dict[str, Any]] = []
        with as_contract_error:
            while len(found) < limit:
                page = await self._store.list_threads(scope, before, limit)
                if not page:
                    break
                for key, at in page:
                    before = (at, key)
                    document, kept = await asyncio.gather(self._store.read_document(key), self._store.read_history(key, conversation=False))
                    if not document:
                        continue  # removed since it was listed (retention, erased)
                    view = self._summary(_client_id(caller, key), document, kept)
                    if archived == "any" or view["archived"] == (archived == "true"):
                        view.pop("_runs")
                        found.append(view)
                        if len(found) == limit:
                            next_cursor = encode_cursor(at, key)
                            break
                if len(page) < limit:
                    break
        return {"threads": found, "nextCursor": next_cursor}

    async def get(self, caller: Caller, thread_id: str, user_id: str | None, include: set[str]) -> dict[str, Any]:
        _, document, kept = await self._read(caller, thread_id, user_id, "messages" in include or "state" in include)
        view = self._summary(thread_id, document, kept)
        runs = view.pop("_runs")
        stored = _decode(kept.conversation) if kept.conversation else {}
        if "messages" in include:
            view["messages"] = stored.get("messages") or []
        if "state" in include:
            view["state"] = stored.get("state")
        if "runs" in include:
            view["runs"] = list(reversed(runs))[:NEWEST_RUNS]
        if "pendingInterrupts" in include:
            execution = document.get("execution")
            pending = execution.get("pending") if isinstance(execution, dict) and execution.get("status") == "interrupted" else None
            view["pendingInterrupts"] = [p.get("wire") for p in pending or [] if isinstance(p, dict)]
        return view

    async def patch(self, caller: Caller, thread_id: str, user_id: str | None, change: ThreadPatch) -> dict[str, Any]:
        key, _, kept = await self._read(caller, thread_id, user_id, False)
        meta = _decode(kept.meta) if kept.meta else {}
        if change.title is not msgspec.UNSET:
            if change.title is not None and len(change.title) > MAX_TITLE_CHARS:
                raise GatewayError(ErrorCode.INVALID_INPUT, "title", f"At most {MAX_TITLE_CHARS} characters.")
            meta["title"] = change.title
        if change.metadata is not msgspec.UNSET:
            if len(_encode(change.metadata)) > MAX_META_BYTES:
                raise GatewayError(ErrorCode.INVALID_INPUT, "metadata", f"At most {MAX_META_BYTES} bytes of JSON.")
            meta["metadata"] = change.metadata
        if change.archived is not msgspec.UNSET:
            meta["archived"] = change.archived
        asker = user_id if user_id is not None else caller.user_id
        with as_contract_error:
            if not await self._store.write_meta(key, _encode(meta)):
                raise GatewayError(ErrorCode.THREAD_NOT_FOUND, "threadId")
            await self._store.thread_changed(list_scope(caller, asker), key)
        return await self.get(caller, thread_id, user_id, set())

    async def runs(self, caller: Caller, thread_id: str, user_id: str | None, limit: int, cursor: str | None) -> dict[str, Any]:
        _, document, kept = await self._read(caller, thread_id, user_id, False)
        runs = list(reversed(self._summary(thread_id, document, kept)["_runs"]))
        start = 0
        if cursor:
            position = decode_cursor(cursor)
            start = int(position[0]) if position is not None else 0
        page = runs[start : start + limit]
        more = start + limit < len(runs)
        return {"runs": page, "nextCursor": encode_cursor(start + limit, thread_id) if more else None}

    async def delete(self, caller: Caller, thread_id: str, user_id: str | None) -> None:
        """Cancel the active run (and wait, at most STOP_WAIT_SECONDS, for its end to be written), then erase."""
        key, document, kept = await self._read(caller, thread_id, user_id, False)
        asker = user_id if user_id is not None else caller.user_id
        if isinstance(document.get("active"), dict):
            try:
                await self._stop(thread_id, None, caller, user_id)
            except GatewayError:
                pass  # already ended, or gone: erased all the same
            await self._ended(key)
        summary = _decode(kept.summary) if kept.summary else {}
        run_ids = {*((document.get("runs") or {}).keys()), *(r.get("runId") for r in summary.get("runs") or [] if isinstance(r, dict))}
        with as_contract_error:
            await self._store.delete_thread(key, list_scope(caller, asker), sorted(r for r in run_ids if isinstance(r, str)))
            await self._store.thread_changed(list_scope(caller, asker), key, deleted=True)

    async def _ended(self, key: str) -> None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + STOP_WAIT_SECONDS
        while loop.time() < give_up:
            document = await self._store.read_document(key)
            if not document or not isinstance(document.get("active"), dict):
                return
            await asyncio.sleep(0.05)
