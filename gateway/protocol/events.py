"""Every AG-UI 1.0 event the gateway emits, as msgspec Structs, and their one-shot encoders (SSE record, bare JSON)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import Struct


class Event(Struct, tag_field="type", rename="camel", omit_defaults=True, kw_only=True):
    """Base of all events: optional fields default to None and are omitted, never sent as null."""

    metadata: dict[str, Any] | None = None
    subagent_run_id: str | None = None  # the sub-agent an event belongs to (AG-UI 1.0)
    timestamp: int | float | None = None  # an agent's own, passed on as it sent it
    raw_event: Any = None  # likewise: the event in the agent's own terms


class RunStarted(Event, tag="RUN_STARTED"):
    thread_id: str
    run_id: str
    protocol_version: str  # required, so omit_defaults never drops it
    parent_run_id: str | None = None


class TokenUsage(Struct, rename="camel", omit_defaults=True):
    provider: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None


class Interrupt(Struct, rename="camel", omit_defaults=True):
    id: str
    reason: str
    message: str | None = None
    tool_call_id: str | None = None
    response_schema: dict[str, Any] | None = None
    expires_at: str | None = None
    metadata: dict[str, Any] | None = None


class SuccessOutcome(Struct, tag_field="type", tag="success", omit_defaults=True, rename="camel"):
    pending_tool_call_ids: list[str] | None = None


class InterruptOutcome(Struct, tag_field="type", tag="interrupt"):
    interrupts: list[Interrupt]


class CancelledOutcome(Struct, tag_field="type", tag="cancelled"):
    pass


class RunFinished(Event, tag="RUN_FINISHED"):
    thread_id: str
    run_id: str
    outcome: SuccessOutcome | InterruptOutcome | CancelledOutcome | None = None
    result: Any = None
    usage: list[TokenUsage] | None = None


class RunError(Event, tag="RUN_ERROR"):
    message: str
    code: str | None = None
    usage: list[TokenUsage] | None = None  # what the run consumed before it failed (the schema allows extra fields)


class TextMessageStart(Event, tag="TEXT_MESSAGE_START"):
    message_id: str
    role: str  # always sent (omit_defaults would drop a default): the TypeScript schema requires it
    name: str | None = None


class TextMessageContent(Event, tag="TEXT_MESSAGE_CONTENT"):
    message_id: str
    delta: str


class TextMessageEnd(Event, tag="TEXT_MESSAGE_END"):
    message_id: str


class ReasoningStart(Event, tag="REASONING_START"):
    message_id: str


class ReasoningMessageStart(Event, tag="REASONING_MESSAGE_START"):
    message_id: str
    role: str  # always sent: the TypeScript schema requires it


class ReasoningMessageContent(Event, tag="REASONING_MESSAGE_CONTENT"):
    message_id: str
    delta: str


class ReasoningMessageEnd(Event, tag="REASONING_MESSAGE_END"):
    message_id: str


class ReasoningEnd(Event, tag="REASONING_END"):
    message_id: str


class ToolCallStart(Event, tag="TOOL_CALL_START"):
    tool_call_id: str
    tool_call_name: str
    parent_message_id: str | None = None


class ToolCallArgs(Event, tag="TOOL_CALL_ARGS"):
    tool_call_id: str
    delta: str


class ToolCallEnd(Event, tag="TOOL_CALL_END"):
    tool_call_id: str


class ToolCallResult(Event, tag="TOOL_CALL_RESULT"):
    message_id: str
    tool_call_id: str
    content: str
    role: str | None = None  # "tool" when the agent said so (AG-UI makes it optional)


class StepStarted(Event, tag="STEP_STARTED"):
    step_name: str


class StepFinished(Event, tag="STEP_FINISHED"):
    step_name: str


class ActivitySnapshot(Event, tag="ACTIVITY_SNAPSHOT"):
    message_id: str
    activity_type: str
    content: dict[str, Any]
    replace: bool | None = None


class ActivityDelta(Event, tag="ACTIVITY_DELTA"):
    message_id: str
    activity_type: str
    patch: list[dict[str, Any]]


class StateSnapshot(Event, tag="STATE_SNAPSHOT"):
    snapshot: Any


class StateDelta(Event, tag="STATE_DELTA"):
    delta: list[dict[str, Any]]


class MessagesSnapshot(Event, tag="MESSAGES_SNAPSHOT"):
    messages: list[dict[str, Any]]


class Raw(Event, tag="RAW"):
    event: Any
    source: str | None = None


class ReasoningEncryptedValue(Event, tag="REASONING_ENCRYPTED_VALUE"):
    subtype: str
    entity_id: str
    encrypted_value: str


class SubagentFinishedOutcome(Struct, tag_field="type", tag="success"):
    pass


class SubagentStarted(Event, tag="SUBAGENT_STARTED"):
    subagent_run_id: str  # required here: the event names the sub-agent it starts
    name: str
    description: str | None = None
    parent_tool_call_id: str | None = None
    parent_message_id: str | None = None


class SubagentFinished(Event, tag="SUBAGENT_FINISHED"):
    subagent_run_id: str
    outcome: SubagentFinishedOutcome | None = None
    result: Any = None


class SubagentError(Event, tag="SUBAGENT_ERROR"):
    subagent_run_id: str
    message: str
    code: str | None = None


class Custom(Event, tag="CUSTOM"):
    name: str
    value: Any


_encoder = msgspec.json.Encoder()
# The event as bare JSON (one WebSocket text frame, an SSE record's data): the encoder's own method, called for
# every event, so no Python frame of ours is between the two.
encode_json: Callable[[Event], bytes] = _encoder.encode
encode_string: Callable[[str], bytes] = _encoder.encode  # a JSON string: a text delta in its frame (below)


_EMPTY_DELTA = b'"delta":""'


def text_content_frame(message_id: str, subagent_run_id: str | None) -> tuple[bytes, bytes]:
    """TEXT_MESSAGE_CONTENT of this message encoded around its delta: the prefix, the delta's JSON string
    (`encode_string`) and the suffix are byte for byte the event's own encoding. A delta of an open message, most of a
    run's events, is then encoded without an event object of its own (about half its cost). The empty delta is found
    only where the field is: inside a JSON string every `"` is escaped."""
    whole = _encoder.encode(TextMessageContent(message_id=message_id, delta="", subagent_run_id=subagent_run_id))
    at = whole.index(_EMPTY_DELTA) + len(b'"delta":')
    return whole[:at], whole[at + len(b'""') :]


def encode_sse(event: Event) -> bytes:
    """The event as one SSE record: `data: <json>` and a blank line, LF only."""
    return b"data: " + _encoder.encode(event) + b"\n\n"


HEARTBEAT_SSE = b": heartbeat\n\n"
