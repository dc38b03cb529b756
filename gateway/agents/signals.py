"""The neutral vocabulary agent backends speak; only the translator turns these into AG-UI events."""

from __future__ import annotations

from typing import Any

from msgspec import Struct


class Signal(Struct, kw_only=True):
    pass


class TextDelta(Signal):
    """Assistant text. Deltas with one `message_id` form one message; messages with different ids may interleave.
    The message's `role` and `name`, and the sub-agent it belongs to, are read from its first delta."""

    text: str
    message_id: str | None = None  # the agent's own id, kept as the AG-UI message id; None: the gateway picks one
    role: str = "assistant"  # assistant, developer, system or user
    name: str | None = None
    subagent_run_id: str | None = None


class TextStart(Signal):
    """A message opens before any text (an AG-UI upstream's TEXT_MESSAGE_START): it is shown even if it stays empty,
    as the parent of the tool calls that follow it."""

    message_id: str
    role: str = "assistant"
    name: str | None = None
    subagent_run_id: str | None = None


class TextEnd(Signal):
    """The message `message_id` is complete; None completes every open message (the next TextDelta opens a new one)."""

    message_id: str | None = None


class ReasoningStart(Signal):
    """A reasoning span opens under the agent's id (it may hold an encrypted value and no text)."""

    message_id: str


class ReasoningMessageStart(Signal):
    """The span's reasoning message opens under the agent's id before any text."""

    message_id: str


class ReasoningDelta(Signal):
    text: str
    message_id: str | None = None  # the agent's id for the span; None: the gateway picks one


class ReasoningMessageEnd(Signal):
    """The reasoning message ends; the span stays open (its encrypted value may follow)."""


class ReasoningEnd(Signal):
    pass


class ToolStart(Signal):
    tool_call_id: str
    name: str
    parent_message_id: str | None = None
    subagent_run_id: str | None = None


class ToolArgs(Signal):
    tool_call_id: str
    delta: str


class ToolEnd(Signal):
    tool_call_id: str


class ToolResult(Signal):
    tool_call_id: str
    content: str
    message_id: str | None = None  # the agent's id for the tool message; None: the gateway picks one
    role: str | None = None  # as an AG-UI upstream sent it ("tool")


class ToolProgress(Signal):
    tool_call_id: str
    data: dict[str, Any]


class StepStart(Signal):
    name: str


class StepFinish(Signal):
    name: str


class PipelineEvent(Signal):
    """A pipeline fact with no standard event. `envelope`, when the agent sent one, is the CUSTOM value as it came."""

    event_type: str
    data: dict[str, Any]
    event_id: str | None = None
    envelope: dict[str, Any] | None = None


class Artifact(Signal):
    data: dict[str, Any]


class ActivitySnapshot(Signal):
    activity_type: str
    content: dict[str, Any]
    message_id: str | None = None  # a stable id makes a later snapshot replace this one
    replace: bool | None = None


class ActivityDelta(Signal):
    """An RFC 6902 patch to the activity `message_id` a snapshot opened."""

    message_id: str
    activity_type: str
    patch: list[dict[str, Any]]


class StateSnapshot(Signal):
    """The run's whole shared state (a JSON value; AG-UI apps use an object)."""

    snapshot: Any


class StateDelta(Signal):
    """An RFC 6902 JSON Patch to the run's current state: refused at the source when it does not apply."""

    patch: list[dict[str, Any]]


class MessagesSnapshot(Signal):
    """The whole conversation as AG-UI messages (each a JSON object with `id` and `role`)."""

    messages: list[dict[str, Any]]


class Raw(Signal):
    """An event of the agent's own framework, passed through as it came."""

    event: Any
    source: str | None = None


class CustomEvent(Signal):
    """A CUSTOM event under the agent's own name (the iac-code names are the gateway's: see PipelineEvent etc.)."""

    name: str
    value: Any


class ReasoningEncrypted(Signal):
    """An encrypted reasoning value for a message or a tool call, which the client keeps and sends back."""

    subtype: str  # "message" or "tool-call"
    entity_id: str
    encrypted_value: str


class SubagentStart(Signal):
    subagent_run_id: str
    name: str
    description: str | None = None
    parent_tool_call_id: str | None = None
    parent_message_id: str | None = None


class SubagentFinish(Signal):
    subagent_run_id: str
    result: Any = None


class SubagentError(Signal):
    subagent_run_id: str
    message: str
    code: str | None = None


class Usage(Signal):
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None  # when the agent reports its own total, it is summed instead of input + output
    cached_input_tokens: int | None = None
    model: str | None = None
    provider: str | None = None


class SessionInfo(Signal):
    context_id: str | None = None
    task_id: str | None = None
    session_id: str | None = None


class Accepted(Signal):
    """The backend took a resume's answers. Any other non-failure signal says the same; this one is for a backend
    whose first word after taking the answers is a failure (an answer that cancels the task)."""


class Adoptable(Signal):
    """How another replica can pick this run up if this one dies (identities, cursors: never secrets). Backends
    that can be adopted say it as soon as they know, and again whenever it changes; the engine keeps the latest."""

    state: dict[str, Any]


class InterruptRequest(Struct, kw_only=True):
    id: str
    reason: str
    message: str | None = None  # None: the agent gave none, and none is shown
    response_schema: dict[str, Any] | None = None  # None: any answer is accepted, and no schema is shown
    tool_call_id: str | None = None
    metadata: dict[str, Any] | None = None
    expires_at: str | None = None  # the agent's own expiry, as it sent it (ISO 8601); None: the gateway's rule


class InputRequired(Signal):
    """The backend needs answers; `checkpoint` is what it needs to resume (no secrets, no message text)."""

    interrupts: list[InterruptRequest]
    checkpoint: Any = None


class Completed(Signal):
    result: Any = None
    # Client tools the agent called and the client is to run: the next run carries their `tool` messages.
    pending_tool_call_ids: tuple[str, ...] = ()


class Failed(Signal):
    message: str
    code: str = "A2A_EXECUTION_FAILED"
    # The agent's own RUN_ERROR (an AG-UI upstream): its code and message reach the client as they came.
    as_sent: bool = False


class Stamped(Signal):
    """`signal`, read from an AG-UI agent's event that carried a `timestamp` or `rawEvent`: the event the signal
    becomes carries them on. A wrapper, so that the signals of every other backend, and their hot path, stay as they
    were. Never a terminal signal (the run's end is the gateway's own)."""

    signal: Signal
    timestamp: int | float | None = None
    raw_event: Any = None


TERMINAL_SIGNALS = (InputRequired, Completed, Failed)

# What a backend's stream yields at each step: a signal, or a list of the signals it had ready at once (the events
# of one network read, or of a loop that does not wait), which the gateway takes in one step of the stream. A step
# of an async generator costs about as much as translating the signal it brings.
Ready = Signal | list[Signal]
