"""An upstream AG-UI agent's events, read back into the gateway's signals (pure: no I/O).

The gateway speaks for the run: its own RUN_STARTED and terminal event, its positions and its span balancing
(the translator). What the upstream says is checked as it comes: its RUN_STARTED must name the run it was
asked for and come first, every event must be one AG-UI 1.0 defines with the fields it requires, and its
stream must end with RUN_FINISHED or RUN_ERROR. Anything else is an UpstreamViolation, which ends the run
with AGENT_PROTOCOL_ERROR."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.agents import signals as s

MAX_USAGE_REPORTS = 1024  # entries of one RUN_FINISHED's usage


class UpstreamViolation(Exception):
    """The upstream broke AG-UI: the run ends AGENT_PROTOCOL_ERROR with this reason."""


def _text(event: dict[str, Any], name: str, required: bool = True) -> str | None:
    value = event.get(name)
    if isinstance(value, str) and value:
        return value
    if required:
        raise UpstreamViolation(f"{event.get('type')} without its {name}")
    return None


def _or(mapping: dict[str, Any], name: str, default: str) -> str:
    """`mapping[name]` when it is a non-empty string, else `default`."""
    value = mapping.get(name)
    return value if isinstance(value, str) and value else default


def _list(event: dict[str, Any], name: str) -> list[Any]:
    value = event.get(name)
    if not isinstance(value, list):
        raise UpstreamViolation(f"{event.get('type')} without its {name} list")
    return value


def _dict(event: dict[str, Any], name: str) -> dict[str, Any]:
    value = event.get(name)
    if not isinstance(value, dict):
        raise UpstreamViolation(f"{event.get('type')} without its {name} object")
    return value


class EventReader:
    """One upstream run. `read(event)` gives its signals; `ended` once its terminal event was read."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.started = False
        self.ended = False
        self.roles: dict[str, str] = {}  # open text messages: id -> role

    def read(self, event: Any) -> list[s.Signal]:
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise UpstreamViolation("an event that is not an object with a type")
        kind = event["type"]
        if self.ended:
            raise UpstreamViolation(f"{kind} after the run's terminal event")
        if kind == "RUN_STARTED":
            return self._started(event)
        if not self.started:
            raise UpstreamViolation(f"{kind} before RUN_STARTED")
        handler = _HANDLERS.get(kind)
        if handler is None:
            raise UpstreamViolation(f"an event type AG-UI 1.0 does not define ({kind[:60]!r})")
        signals = handler(self, event)
        stamp, raw = event.get("timestamp"), event.get("rawEvent")
        if signals and (stamp is not None or raw is not None) and not isinstance(signals[-1], s.TERMINAL_SIGNALS):
            # Kept on the signal the event became (its last), for the event that signal becomes.
            stamp = stamp if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else None
            signals[-1] = s.Stamped(signal=signals[-1], timestamp=stamp, raw_event=raw)
        return signals

    def _started(self, event: dict[str, Any]) -> list[s.Signal]:
        if self.started:
            raise UpstreamViolation("a second RUN_STARTED")
        if event.get("threadId") != self.thread_id or event.get("runId") != self.run_id:
            raise UpstreamViolation("RUN_STARTED for another run than the one asked for")
        self.started = True
        return []

    # -- text and reasoning --------------------------------------------------------------------
    def _text_start(self, event: dict[str, Any]) -> list[s.Signal]:
        message_id = _text(event, "messageId")
        assert message_id is not None
        role = self.roles[message_id] = _or(event, "role", "assistant")
        name = event.get("name") if isinstance(event.get("name"), str) else None
        # Shown now, even if it stays empty: Pydantic AI opens and closes an empty message as its tool calls' parent.
        return [s.TextStart(message_id=message_id, role=role, name=name, subagent_run_id=_text(event, "subagentRunId", False))]

    def _text_content(self, event: dict[str, Any]) -> list[s.Signal]:
        message_id = _text(event, "messageId")
        delta = event.get("delta")
        if not isinstance(delta, str):
            raise UpstreamViolation("TEXT_MESSAGE_CONTENT without its delta")
        assert message_id is not None
        role = self.roles.get(message_id, "assistant")
        name = event.get("name") if isinstance(event.get("name"), str) else None
        return [s.TextDelta(text=delta, message_id=message_id, role=role, name=name, subagent_run_id=_text(event, "subagentRunId", False))]

    def _text_end(self, event: dict[str, Any]) -> list[s.Signal]:
        message_id = _text(event, "messageId")
        self.roles.pop(message_id or "", None)
        return [s.TextEnd(message_id=message_id)]

    def _text_chunk(self, event: dict[str, Any]) -> list[s.Signal]:
        message_id = _text(event, "messageId", False) or f"{self.run_id}-text"
        if message_id not in self.roles:
            self.roles[message_id] = _or(event, "role", "assistant")
        delta = event.get("delta")
        return self._text_content({**event, "messageId": message_id, "delta": delta}) if isinstance(delta, str) and delta else []

    def _reasoning_start(self, event: dict[str, Any]) -> list[s.Signal]:
        message_id = _text(event, "messageId")
        assert message_id is not None
        return [s.ReasoningStart(message_id=message_id)]

    def _reasoning_message_start(self, event: dict[str, Any]) -> list[s.Signal]:
        message_id = _text(event, "messageId")
        assert message_id is not None
        return [s.ReasoningMessageStart(message_id=message_id)]

    def _reasoning(self, event: dict[str, Any]) -> list[s.Signal]:
        delta = event.get("delta")
        message_id = _text(event, "messageId", False)
        return [s.ReasoningDelta(text=delta, message_id=message_id)] if isinstance(delta, str) and delta else []

    def _reasoning_message_end(self, event: dict[str, Any]) -> list[s.Signal]:
        return [s.ReasoningMessageEnd()]

    def _reasoning_end(self, event: dict[str, Any]) -> list[s.Signal]:
        return [s.ReasoningEnd()]

    def _encrypted(self, event: dict[str, Any]) -> list[s.Signal]:
        subtype, entity, value = _text(event, "subtype"), _text(event, "entityId"), _text(event, "encryptedValue")
        assert subtype is not None and entity is not None and value is not None
        return [s.ReasoningEncrypted(subtype=subtype, entity_id=entity, encrypted_value=value)]

    # -- tools and steps -----------------------------------------------------------------------
    def _tool_start(self, event: dict[str, Any]) -> list[s.Signal]:
        call_id, name = _text(event, "toolCallId"), _text(event, "toolCallName")
        assert call_id is not None and name is not None
        parent = _text(event, "parentMessageId", False)
        return [
            s.ToolStart(tool_call_id=call_id, name=name, parent_message_id=parent, subagent_run_id=_text(event, "subagentRunId", False))
        ]

    def _tool_args(self, event: dict[str, Any]) -> list[s.Signal]:
        call_id, delta = _text(event, "toolCallId"), event.get("delta")
        if not isinstance(delta, str):
            raise UpstreamViolation("TOOL_CALL_ARGS without its delta")
        assert call_id is not None
        return [s.ToolArgs(tool_call_id=call_id, delta=delta)]

    def _tool_end(self, event: dict[str, Any]) -> list[s.Signal]:
        call_id = _text(event, "toolCallId")
        assert call_id is not None
        return [s.ToolEnd(tool_call_id=call_id)]

    def _tool_chunk(self, event: dict[str, Any]) -> list[s.Signal]:
        call_id = _text(event, "toolCallId")
        assert call_id is not None
        out: list[s.Signal] = []
        name = _text(event, "toolCallName", False)
        if name is not None:
            out.append(s.ToolStart(tool_call_id=call_id, name=name, parent_message_id=_text(event, "parentMessageId", False)))
        if isinstance(event.get("delta"), str) and event["delta"]:
            out.append(s.ToolArgs(tool_call_id=call_id, delta=event["delta"]))
        return out

    def _tool_result(self, event: dict[str, Any]) -> list[s.Signal]:
        call_id, content = _text(event, "toolCallId"), event.get("content")
        if not isinstance(content, str):
            raise UpstreamViolation("TOOL_CALL_RESULT without its content")
        assert call_id is not None
        role = event.get("role") if isinstance(event.get("role"), str) else None
        return [s.ToolResult(tool_call_id=call_id, content=content, message_id=_text(event, "messageId", False), role=role)]

    def _step_start(self, event: dict[str, Any]) -> list[s.Signal]:
        name = _text(event, "stepName")
        assert name is not None
        return [s.StepStart(name=name)]

    def _step_finish(self, event: dict[str, Any]) -> list[s.Signal]:
        name = _text(event, "stepName")
        assert name is not None
        return [s.StepFinish(name=name)]

    # -- documents -----------------------------------------------------------------------------
    def _state_snapshot(self, event: dict[str, Any]) -> list[s.Signal]:
        if "snapshot" not in event:
            raise UpstreamViolation("STATE_SNAPSHOT without its snapshot")
        return [s.StateSnapshot(snapshot=event["snapshot"])]

    def _state_delta(self, event: dict[str, Any]) -> list[s.Signal]:
        return [s.StateDelta(patch=_list(event, "delta"))]

    def _messages_snapshot(self, event: dict[str, Any]) -> list[s.Signal]:
        return [s.MessagesSnapshot(messages=_list(event, "messages"))]

    def _activity_snapshot(self, event: dict[str, Any]) -> list[s.Signal]:
        kind = _text(event, "activityType")
        assert kind is not None
        replace = event.get("replace") if isinstance(event.get("replace"), bool) else None
        return [
            s.ActivitySnapshot(activity_type=kind, content=_dict(event, "content"), message_id=_text(event, "messageId"), replace=replace)
        ]

    def _activity_delta(self, event: dict[str, Any]) -> list[s.Signal]:
        message_id, kind = _text(event, "messageId"), _text(event, "activityType")
        assert message_id is not None and kind is not None
        return [s.ActivityDelta(message_id=message_id, activity_type=kind, patch=_list(event, "patch"))]

    def _raw(self, event: dict[str, Any]) -> list[s.Signal]:
        return [s.Raw(event=event.get("event"), source=_text(event, "source", False))]

    def _custom(self, event: dict[str, Any]) -> list[s.Signal]:
        name = _text(event, "name")
        assert name is not None
        return [s.CustomEvent(name=name, value=event.get("value"))]

    # -- sub-agents ----------------------------------------------------------------------------
    def _subagent_start(self, event: dict[str, Any]) -> list[s.Signal]:
        run_id, name = _text(event, "subagentRunId"), _text(event, "name")
        assert run_id is not None and name is not None
        return [
            s.SubagentStart(
                subagent_run_id=run_id,
                name=name,
                description=_text(event, "description", False),
                parent_tool_call_id=_text(event, "parentToolCallId", False),
                parent_message_id=_text(event, "parentMessageId", False),
            )
        ]

    def _subagent_finish(self, event: dict[str, Any]) -> list[s.Signal]:
        run_id = _text(event, "subagentRunId")
        assert run_id is not None
        return [s.SubagentFinish(subagent_run_id=run_id, result=event.get("result"))]

    def _subagent_error(self, event: dict[str, Any]) -> list[s.Signal]:
        run_id, message = _text(event, "subagentRunId"), _text(event, "message")
        assert run_id is not None and message is not None
        return [s.SubagentError(subagent_run_id=run_id, message=message, code=_text(event, "code", False))]

    # -- the end -------------------------------------------------------------------------------
    def _finished(self, event: dict[str, Any]) -> list[s.Signal]:
        if event.get("threadId") != self.thread_id or event.get("runId") != self.run_id:
            raise UpstreamViolation("RUN_FINISHED for another run than the one asked for")
        self.ended = True
        reports = event.get("usage") or []
        if not isinstance(reports, list) or len(reports) > MAX_USAGE_REPORTS:
            raise UpstreamViolation(f"RUN_FINISHED's usage is not a list of at most {MAX_USAGE_REPORTS} entries")
        out: list[s.Signal] = [_usage(entry) for entry in reports if isinstance(entry, dict)]
        given = event.get("outcome")
        outcome: dict[str, Any] = given if isinstance(given, dict) else {"type": "success"}
        kind = outcome.get("type")
        if kind == "interrupt":
            interrupts = [_interrupt(item) for item in outcome.get("interrupts") or []]
            if not interrupts:
                raise UpstreamViolation("an interrupt outcome with no interrupt")
            out.append(s.InputRequired(interrupts=interrupts, checkpoint={"upstream": "agui"}))
        elif kind == "cancelled":
            out.append(s.Failed(message="The agent cancelled the run.", code="CANCELLED"))
        elif kind == "success":
            pending = outcome.get("pendingToolCallIds") or []
            if not isinstance(pending, list) or not all(isinstance(item, str) for item in pending):
                raise UpstreamViolation("pendingToolCallIds that are not a list of ids")
            out.append(s.Completed(result=event.get("result"), pending_tool_call_ids=tuple(pending)))
        else:
            raise UpstreamViolation(f"a RUN_FINISHED outcome AG-UI 1.0 does not define ({str(kind)[:40]!r})")
        return out

    def _error(self, event: dict[str, Any]) -> list[s.Signal]:
        self.ended = True
        message = _or(event, "message", "The agent's run failed.")
        code = _or(event, "code", "AGENT_ERROR")
        return [s.Failed(message=message, code=code, as_sent=True)]


def _usage(entry: dict[str, Any]) -> s.Usage:
    def number(name: str) -> int | None:
        value = entry.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return s.Usage(
        input_tokens=number("inputTokens"),
        output_tokens=number("outputTokens"),
        reasoning_tokens=number("reasoningTokens"),
        total_tokens=number("totalTokens"),
        cached_input_tokens=number("cachedInputTokens"),
        model=entry.get("model") if isinstance(entry.get("model"), str) else None,
        provider=entry.get("provider") if isinstance(entry.get("provider"), str) else None,
    )


def _interrupt(item: Any) -> s.InterruptRequest:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
        raise UpstreamViolation("an interrupt without its id")
    schema, message, expires = item.get("responseSchema"), item.get("message"), item.get("expiresAt")
    return s.InterruptRequest(  # as the agent sent it: no message, schema or expiry of ours where it gave none
        id=item["id"],
        reason=_or(item, "reason", "input"),
        message=message if isinstance(message, str) else None,
        response_schema=schema if isinstance(schema, dict) else None,
        tool_call_id=item.get("toolCallId") if isinstance(item.get("toolCallId"), str) else None,
        metadata=item.get("metadata") if isinstance(item.get("metadata"), dict) else None,
        expires_at=expires if isinstance(expires, str) else None,
    )


_HANDLERS: dict[str, Callable[[EventReader, dict[str, Any]], list[s.Signal]]] = {
    "TEXT_MESSAGE_START": EventReader._text_start,
    "TEXT_MESSAGE_CONTENT": EventReader._text_content,
    "TEXT_MESSAGE_END": EventReader._text_end,
    "TEXT_MESSAGE_CHUNK": EventReader._text_chunk,
    "REASONING_START": EventReader._reasoning_start,
    "REASONING_MESSAGE_START": EventReader._reasoning_message_start,
    "REASONING_MESSAGE_CONTENT": EventReader._reasoning,
    "REASONING_MESSAGE_CHUNK": EventReader._reasoning,
    "REASONING_MESSAGE_END": EventReader._reasoning_message_end,
    "REASONING_END": EventReader._reasoning_end,
    "REASONING_ENCRYPTED_VALUE": EventReader._encrypted,
    "TOOL_CALL_START": EventReader._tool_start,
    "TOOL_CALL_ARGS": EventReader._tool_args,
    "TOOL_CALL_END": EventReader._tool_end,
    "TOOL_CALL_CHUNK": EventReader._tool_chunk,
    "TOOL_CALL_RESULT": EventReader._tool_result,
    "STEP_STARTED": EventReader._step_start,
    "STEP_FINISHED": EventReader._step_finish,
    "STATE_SNAPSHOT": EventReader._state_snapshot,
    "STATE_DELTA": EventReader._state_delta,
    "MESSAGES_SNAPSHOT": EventReader._messages_snapshot,
    "ACTIVITY_SNAPSHOT": EventReader._activity_snapshot,
    "ACTIVITY_DELTA": EventReader._activity_delta,
    "RAW": EventReader._raw,
    "CUSTOM": EventReader._custom,
    "SUBAGENT_STARTED": EventReader._subagent_start,
    "SUBAGENT_FINISHED": EventReader._subagent_finish,
    "SUBAGENT_ERROR": EventReader._subagent_error,
    "RUN_FINISHED": EventReader._finished,
    "RUN_ERROR": EventReader._error,
}
