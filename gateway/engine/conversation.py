"""A thread's conversation as an AG-UI client holds it: messages kept in order with their ids, changed by a run's
input and its events exactly as `@ag-ui/client` 1.0 applies them (its `defaultApplyEvents`), so that a client that
joins later ends where a client that stayed connected did."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.engine import patching

Message = dict[str, Any]
_encode = msgspec.json.encode

# The events that change messages (encoded events begin with their type: `{"type":"…"`). Everything else (the run's
# lifecycle, steps, custom and raw events, state: the run's translator holds the state) is passed over undecoded.
EVENT_HEAD = len(b'{"type":"')
CHANGING = (
    b"TEXT_MESSAGE_",
    b"TOOL_CALL_START",
    b"TOOL_CALL_ARGS",
    b"TOOL_CALL_RESULT",
    b"REASONING_MESSAGE_",
    b"REASONING_ENCRYPTED_VALUE",
    b"MESSAGES_SNAPSHOT",
    b"ACTIVITY_",
)
ACTIVITY_PATCH_WORK = 16 * 1024 * 1024  # bytes one activity patch may move while it is applied to the kept copy


class Conversation:
    """Messages in order, found by id. Text and arguments that stream in are kept as pieces until read."""

    __slots__ = ("_by_id", "_pieces", "messages")

    def __init__(self, messages: list[Message] | None = None) -> None:
        self.messages: list[Message] = []
        self._by_id: dict[str, Message] = {}
        self._pieces: dict[int, tuple[dict[str, Any], str, list[str]]] = {}  # id(target) -> (target, field, pieces)
        for message in messages or ():
            self._append(message)

    def _append(self, message: Message) -> None:
        self.messages.append(message)
        message_id = message.get("id")
        if isinstance(message_id, str):
            self._by_id.setdefault(message_id, message)

    def _reindex(self) -> None:
        self._by_id = {}
        for message in self.messages:
            if isinstance(message.get("id"), str):
                self._by_id.setdefault(message["id"], message)

    def holds(self, message_id: str) -> bool:
        return message_id in self._by_id

    def add_new(self, messages: list[Message]) -> list[Message]:
        """Append the messages whose ids the conversation does not hold (as RUN_STARTED's input does); returns them."""
        added = []
        for message in messages:
            if isinstance(message, dict) and isinstance(message.get("id"), str) and message["id"] not in self._by_id:
                self._append(message)
                added.append(message)
        return added

    def settled(self) -> list[Message]:
        """The messages, with every streamed piece joined in."""
        for target, name, pieces in self._pieces.values():
            target[name] = target.get(name, "") + "".join(pieces)
        self._pieces.clear()
        return self.messages

    def _stream(self, target: dict[str, Any], name: str, delta: str) -> None:
        entry = self._pieces.get(id(target))
        if entry is None or entry[0] is not target:
            self._settle_one(target)
            entry = self._pieces[id(target)] = (target, name, [])
        entry[2].append(delta)

    def _settle_one(self, target: dict[str, Any]) -> None:
        entry = self._pieces.pop(id(target), None)
        if entry is not None and entry[0] is target:
            target[entry[1]] = target.get(entry[1], "") + "".join(entry[2])

    def add_text(self, message_id: Any, text: str) -> None:
        """TEXT_MESSAGE_CONTENT (or REASONING_MESSAGE_CONTENT) deltas of one message that came in a row, joined."""
        found = self._by_id.get(message_id) if isinstance(message_id, str) else None
        if found is not None and found.get("role") != "activity":
            if not isinstance(found.get("content"), str):
                found["content"] = ""
            self._stream(found, "content", text)

    def apply(self, event: dict[str, Any]) -> None:
        handler = _HANDLERS.get(event.get("type", ""))
        if handler is not None:
            handler(self, event)

    # -- the handlers, one per event type, as the client applies them ---------------------------------------------

    def _text_start(self, event: dict[str, Any]) -> None:
        message_id = event.get("messageId")
        found = self._by_id.get(message_id) if isinstance(message_id, str) else None
        if found is None and isinstance(message_id, str):
            found = {"id": message_id, "role": event.get("role", "assistant"), "content": ""}
            if event.get("name") is not None:
                found["name"] = event["name"]
            if event.get("subagentRunId") is not None:
                found["subagentRunId"] = event["subagentRunId"]
            self._append(found)
        _merge_metadata(found, event)

    def _content(self, event: dict[str, Any]) -> None:
        found = self._by_id.get(event.get("messageId", ""))
        if found is not None and found.get("role") != "activity":
            if not isinstance(found.get("content"), str):
                found["content"] = ""
            self._stream(found, "content", str(event.get("delta", "")))
            _merge_metadata(found, event)

    def _end(self, event: dict[str, Any]) -> None:
        found = self._by_id.get(event.get("messageId", ""))
        if found is not None and found.get("role") != "activity":
            _merge_metadata(found, event)

    def _reasoning_start(self, event: dict[str, Any]) -> None:
        message_id = event.get("messageId")
        if isinstance(message_id, str) and message_id not in self._by_id:
            message = {"id": message_id, "role": "reasoning", "content": ""}
            if event.get("subagentRunId") is not None:
                message["subagentRunId"] = event["subagentRunId"]
            self._append(message)
        _merge_metadata(self._by_id.get(message_id or ""), event)

    def _tool_call(self, call_id: Any) -> tuple[Message, dict[str, Any]] | None:
        for message in self.messages:
            for call in message.get("toolCalls") or ():
                if isinstance(call, dict) and call.get("id") == call_id:
                    return message, call
        return None

    def _tool_start(self, event: dict[str, Any]) -> None:
        call_id, name = event.get("toolCallId"), event.get("toolCallName")
        known = self._tool_call(call_id)
        if known is not None:
            known[1].setdefault("function", {})["name"] = name
            _merge_metadata(known[1], event)
            return
        parent_id = event.get("parentMessageId")
        parent = self._by_id.get(parent_id) if isinstance(parent_id, str) else None
        if parent is None or parent.get("role") != "assistant":
            new_id = call_id if parent is not None or not isinstance(parent_id, str) else parent_id
            parent = {"id": new_id, "role": "assistant", "toolCalls": []}
            if event.get("subagentRunId") is not None:
                parent["subagentRunId"] = event["subagentRunId"]
            self._append(parent)
        call: dict[str, Any] = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        calls = parent.get("toolCalls")
        if not isinstance(calls, list):
            calls = parent["toolCalls"] = []
        calls.append(call)
        _merge_metadata(call, event)

    def _tool_args(self, event: dict[str, Any]) -> None:
        known = self._tool_call(event.get("toolCallId"))
        if known is not None:
            function = known[1].setdefault("function", {})
            self._stream(function, "arguments", str(event.get("delta", "")))
            _merge_metadata(known[1], event)

    def _tool_end(self, event: dict[str, Any]) -> None:
        known = self._tool_call(event.get("toolCallId"))
        if known is not None:
            _merge_metadata(known[1], event)

    def _tool_result(self, event: dict[str, Any]) -> None:
        call_id = event.get("toolCallId")
        result: Message = {
            "id": event.get("messageId"),
            "toolCallId": call_id,
            "role": event.get("role") or "tool",
            "content": event.get("content"),
        }
        if event.get("subagentRunId") is not None:
            result["subagentRunId"] = event["subagentRunId"]
        _merge_metadata(result, event)
        where = next(
            (
                index
                for index, message in enumerate(self.messages)
                if message.get("role") == "assistant"
                and any(isinstance(c, dict) and c.get("id") == call_id for c in message.get("toolCalls") or ())
            ),
            -1,
        )
        if where == -1:
            self._append(result)
            return
        where += 1
        while where < len(self.messages) and self.messages[where].get("role") == "tool":
            where += 1
        self.messages.insert(where, result)
        if isinstance(result["id"], str):
            self._by_id.setdefault(result["id"], result)

    def _encrypted(self, event: dict[str, Any]) -> None:
        entity, value = event.get("entityId"), event.get("encryptedValue")
        if event.get("subtype") == "tool-call":
            known = self._tool_call(entity)
            if known is not None and known[0].get("role") == "assistant":
                known[1]["encryptedValue"] = value
            return
        found = self._by_id.get(entity) if isinstance(entity, str) else None
        if found is not None and found.get("role") != "activity":
            found["encryptedValue"] = value

    def _messages_snapshot(self, event: dict[str, Any]) -> None:
        sent = [m for m in event.get("messages") or () if isinstance(m, dict)]
        for message in sent:
            if "subagentRunId" in message and message["subagentRunId"] is None:
                del message["subagentRunId"]
        self.settled()
        by_id = {m.get("id"): m for m in sent}
        kinds = _authoritative(event)
        has_activity = any(m.get("role") == "activity" for m in sent)
        has_reasoning = any(m.get("role") == "reasoning" for m in sent)

        def kept(message: Message) -> bool:
            if message.get("role") == "activity":
                return (message.get("activityType") not in kinds) if isinstance(kinds, list) else (kinds is not None and not has_activity)
            return message.get("role") == "reasoning" and not has_reasoning

        self.messages = [by_id.get(m.get("id"), m) for m in self.messages if m.get("id") in by_id or kept(m)]
        present = {m.get("id") for m in self.messages}
        self.messages.extend(m for m in sent if m.get("id") not in present)
        self._reindex()

    def _activity_snapshot(self, event: dict[str, Any]) -> None:
        message_id = event.get("messageId")
        index = next((i for i, m in enumerate(self.messages) if m.get("id") == message_id), -1)
        fresh: Message = {"id": message_id, "role": "activity", "activityType": event.get("activityType"), "content": event.get("content")}
        if event.get("subagentRunId") is not None:
            fresh["subagentRunId"] = event["subagentRunId"]
        replace = event.get("replace", True)
        if index == -1:
            self._append(fresh)
            target = fresh
        elif self.messages[index].get("role") == "activity":
            target = self.messages[index]
            if replace:
                target.update(activityType=fresh["activityType"], content=fresh["content"])
                if event.get("subagentRunId") is None:
                    target.pop("subagentRunId", None)
                else:
                    target["subagentRunId"] = event["subagentRunId"]
        else:
            target = self.messages[index]
            if replace:
                self.messages[index] = target = fresh
                self._reindex()
        _merge_metadata(target, event)

    def _activity_delta(self, event: dict[str, Any]) -> None:
        found = self._by_id.get(event.get("messageId", ""))
        if found is None or found.get("role") != "activity":
            return
        _merge_metadata(found, event)
        try:
            content = patching.apply(found.get("content") or {}, event.get("patch") or [], ACTIVITY_PATCH_WORK, ACTIVITY_PATCH_WORK)
        except (patching.PatchRefused, TypeError, msgspec.EncodeError):
            return  # the client warns and keeps the activity as it was
        found["content"] = content
        found["activityType"] = event.get("activityType")


def _authoritative(event: dict[str, Any]) -> list[str] | bool | None:
    """`@ag-ui/client`'s authoritative activity types of a messages snapshot: a list, None (all), or False (unset)."""
    metadata = event.get("metadata")
    if not isinstance(metadata, dict) or "@ag-ui/client" not in metadata:
        return False
    value = metadata["@ag-ui/client"]
    if not isinstance(value, dict):
        return []
    if "authoritativeActivityTypes" not in value:
        return False
    kinds = value["authoritativeActivityTypes"]
    if kinds is None:
        return None
    return kinds if isinstance(kinds, list) and all(isinstance(k, str) for k in kinds) else []


def _merge_metadata(target: dict[str, Any] | None, event: dict[str, Any]) -> None:
    """An event's `metadata` merged into what it changes (keys of the event win)."""
    metadata = event.get("metadata")
    if target is None or not isinstance(metadata, dict):
        return
    merged = dict(target["metadata"]) if isinstance(target.get("metadata"), dict) else {}
    merged.update(metadata)
    target["metadata"] = merged


_HANDLERS = {
    "TEXT_MESSAGE_START": Conversation._text_start,
    "TEXT_MESSAGE_CONTENT": Conversation._content,
    "TEXT_MESSAGE_END": Conversation._end,
    "REASONING_MESSAGE_START": Conversation._reasoning_start,
    "REASONING_MESSAGE_CONTENT": Conversation._content,
    "REASONING_MESSAGE_END": Conversation._end,
    "TOOL_CALL_START": Conversation._tool_start,
    "TOOL_CALL_ARGS": Conversation._tool_args,
    "TOOL_CALL_END": Conversation._tool_end,
    "TOOL_CALL_RESULT": Conversation._tool_result,
    "REASONING_ENCRYPTED_VALUE": Conversation._encrypted,
    "MESSAGES_SNAPSHOT": Conversation._messages_snapshot,
    "ACTIVITY_SNAPSHOT": Conversation._activity_snapshot,
    "ACTIVITY_DELTA": Conversation._activity_delta,
}


def encode(value: Any) -> bytes:
    return _encode(value)
