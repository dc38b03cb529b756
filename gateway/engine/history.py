"""What a run adds to its thread's conversation: the stored conversation (read as the run starts), the run's input
messages it does not hold yet, then the run's events as they are published; at the run's end, the conversation,
the state and the summary the store writes with the end, bounded per thread."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from gateway.engine.conversation import CHANGING, EVENT_HEAD, Conversation, Message
from gateway.engine.eager import start_eagerly
from store import HistoryWrite, StoreUnavailable, ThreadHistory, ThreadStore

log = logging.getLogger("agui.threads")
HistoryMode = Literal["off", "plain", "all"]
TITLE_CHARS = 80
MAX_RUNS_KEPT = 100  # runs a summary lists, newest last
FLUSH_EVENTS = 512  # events a run keeps undecoded before it applies them (and at its end)
_decode = msgspec.json.decode
_encode = msgspec.json.encode
UNSET: Any = msgspec.UNSET
TEXT_DELTAS = frozenset({"TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"})


class _Head(msgspec.Struct):
    """What the recorder reads of every event first (the rest of an event is skipped, not built)."""

    type: str
    messageId: Any = None  # noqa: N815 - the wire's name
    delta: Any = None
    metadata: Any = msgspec.UNSET


_heads = msgspec.json.Decoder(list[_Head]).decode


@dataclass(frozen=True, slots=True)
class HistoryPolicy:
    """Which threads keep their conversation (`--thread-history`) and how much of it (`--thread-history-bytes`)."""

    mode: HistoryMode = "plain"
    max_bytes: int = 8 * 1024 * 1024

    def keeps(self, plain: bool) -> bool:
        return self.mode == "all" or (self.mode == "plain" and plain)


def title_of(messages: Sequence[Message]) -> str | None:
    """The first user message's text, cut at TITLE_CHARS characters."""
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if isinstance(content, str) and content.strip():
            text = " ".join(content.split())
            return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"
    return None


def bounded(messages: list[Message], limit: int) -> tuple[list[Message], int, bytes]:
    """The newest whole messages within `limit` bytes of JSON (a tool result never outlives the call it answers), how
    many older ones were dropped, and the JSON of what is kept."""
    encoded = _encode(messages)
    if len(encoded) <= limit:
        return messages, 0, encoded
    sizes = [len(_encode(m)) + 1 for m in messages]
    total, start = sum(sizes) + 1, 0
    while start < len(messages) and total > limit:
        total -= sizes[start]
        start += 1
    while start < len(messages) and messages[start].get("role") == "tool":  # its call went: so does its result
        total -= sizes[start]
        start += 1
    kept = messages[start:]
    return kept, start, _encode(kept)


class RunRecorder:
    """One run's part of its thread's conversation. `take` is on the stream's publish path: until the stored
    conversation is read, the events that change messages wait in a list; after, each is applied as it comes."""

    __slots__ = ("_conversation", "_input", "_load", "_pending", "_stored", "policy", "run_id", "scope", "started_at", "thread_id")

    def new_input(self) -> list[Message]:
        """The run's input messages its thread's conversation did not hold (before that is known: all of them)."""
        return self._input

    def fresh_input(self) -> list[Message]:
        """What a run's log carries for a client joining mid-run on another replica: of `new_input`, the messages after
        its last assistant message (what a client adds to a turn: its message, its tools' results), never a history
        a client seeded a new thread with."""
        last = max((i for i, m in enumerate(self._input) if m.get("role") == "assistant"), default=-1)
        return self._input[last + 1 :]

    def __init__(self, policy: HistoryPolicy, scope: str, thread_id: str, run_id: str, messages: list[Message]) -> None:
        self.policy = policy
        self.scope = scope
        self.thread_id = thread_id  # the client's
        self.run_id = run_id
        self.started_at = time.time()
        self._input = messages
        self._pending: list[bytes] = []
        self._conversation: Conversation | None = None
        self._stored: dict[str, Any] = {}  # the stored conversation document and summary, as read
        self._load: asyncio.Future[None] | None = None

    def start(self, store: ThreadStore, key: str, kept: ThreadHistory | None = None) -> None:
        """Take the thread's history the admission brought (`kept`), or read it in the background (the run's first
        events do not wait for it); a store that answers at once is read in this step, with no task."""
        if kept is not None:
            self._opened(kept)
            return
        reading = self._read(store, key)
        self._load = start_eagerly(reading) if store.answers_at_once else asyncio.get_running_loop().create_task(reading)

    async def _read(self, store: ThreadStore, key: str) -> None:
        try:
            found = await store.open_history(key, self.scope, self.started_at)
        except StoreUnavailable as exc:
            # Written from this run's part alone, the conversation would lose every earlier turn: it is left as it is.
            log.warning("run %s: the conversation could not be read (%s); this run adds nothing to it", self.run_id, exc)
            self._pending = []
            return
        self._opened(found)

    def _opened(self, found: ThreadHistory) -> None:
        document = _decode(found.conversation) if found.conversation else {}
        summary = _decode(found.summary) if found.summary else None
        self._stored = {"document": document, "summary": summary, "raw": found.conversation}
        conversation = Conversation(document.get("messages") or [])
        self._input = [dict(m) for m in conversation.add_new(self._input)]  # copies: the events change the originals
        self._conversation = conversation

    def take(self, encoded: list[bytes]) -> None:
        if self._load is not None and self._load.done() and self._conversation is None:
            return  # the conversation could not be read: nothing of this run is kept
        pending = self._pending
        pending += [data for data in encoded if data.startswith(CHANGING, EVENT_HEAD)]
        if len(pending) >= FLUSH_EVENTS and self._conversation is not None:
            self._flush(self._conversation)

    def _flush(self, conversation: Conversation) -> None:
        """Apply the events kept so far. Their heads are decoded in one call (as one JSON array); the text deltas of a
        message that came in a row, most of a run's events, are applied as one, and only the other events are
        decoded whole."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        heads = _heads(b"[" + b",".join(pending) + b"]")
        index, count = 0, len(heads)
        while index < count:
            head = heads[index]
            if head.type in TEXT_DELTAS and head.metadata is UNSET:
                end = index + 1
                while (
                    end < count and heads[end].type == head.type and heads[end].messageId == head.messageId and heads[end].metadata is UNSET
                ):
                    end += 1
                conversation.add_text(head.messageId, "".join([h.delta if isinstance(h.delta, str) else "" for h in heads[index:end]]))
                index = end
            else:
                conversation.apply(_decode(pending[index]))
                index += 1

    async def written(self, state: Any, status: str, outcome: str) -> HistoryWrite | None:
        """What the store writes with the run's end: None when the stored conversation could not be read in time."""
        if self._load is not None:
            try:
                await asyncio.shield(self._load)
            except Exception:
                log.exception("run %s: reading the conversation failed", self.run_id)
                return None
        conversation = self._conversation
        if conversation is None:
            return None
        self._flush(conversation)
        document, summary = self._stored.get("document") or {}, self._stored.get("summary") or {}
        messages, dropped, encoded_messages = bounded(conversation.settled(), self.policy.max_bytes)
        dropped += int(document.get("droppedMessages", 0) or 0)
        if state is UNSET:
            state = document.get("state", UNSET)
        body: dict[str, Any] = {"droppedMessages": dropped}
        if state is not UNSET:
            body["state"] = state
        conversation_json = b'{"messages":' + encoded_messages + b"," + _encode(body)[1:]
        now = time.time()
        ran = {"runId": self.run_id, "status": status, "outcome": outcome, "startedAt": self.started_at, "endedAt": now}
        written = HistoryWrite(conversation_json, _encode(self._summary(summary, messages, dropped, ran, now)), self.scope)
        if status != "cancelled":
            return written
        # Cancelled by a `rollback` run, the thread is left as it was before this run (the store decides which).
        before = document.get("messages") or []
        raw = self._stored.get("raw") or b'{"messages":[],"droppedMessages":0}'
        kept = int(document.get("droppedMessages", 0) or 0)
        rolled = self._summary(summary, before, kept, {**ran, "rolledBack": True}, now)
        return msgspec.structs.replace(written, rollback=(raw, _encode(rolled)))

    def _summary(self, summary: dict[str, Any], messages: list[Message], dropped: int, ran: dict[str, Any], now: float) -> dict[str, Any]:
        runs = [r for r in summary.get("runs") or [] if isinstance(r, dict) and r.get("runId") != self.run_id]
        runs.append(ran)  # times in Unix seconds: the thread API shows them as ISO 8601 moments
        return {
            "threadId": self.thread_id,
            "title": summary.get("title") or title_of(messages),
            "createdAt": summary.get("createdAt") or self.started_at,
            "updatedAt": now,
            "messageCount": len(messages),
            "droppedMessages": dropped,
            "runs": runs[-MAX_RUNS_KEPT:],
        }

    def close(self) -> None:
        if self._load is not None and not self._load.done():
            self._load.cancel()
