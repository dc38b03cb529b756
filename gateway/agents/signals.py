"""The neutral vocabulary agent backends speak; only the translator turns these into AG-UI events."""

from __future__ import annotations

from typing import Any

from msgspec import Struct


class Signal(Struct, kw_only=True):
    pass


class TextDelta(Signal):
    text: str


class TextEnd(Signal):
    """The current assistant message is complete (the next TextDelta opens a new one)."""


class ReasoningDelta(Signal):
    text: str


class ReasoningEnd(Signal):
    pass


class ToolStart(Signal):
    tool_call_id: str
    name: str


class ToolArgs(Signal):
    tool_call_id: str
    delta: str


class ToolEnd(Signal):
    tool_call_id: str


class ToolResult(Signal):
    tool_call_id: str
    content: str


class ToolProgress(Signal):
    tool_call_id: str
    data: dict[str, Any]


class StepStart(Signal):
    name: str


class StepFinish(Signal):
    name: str


class PipelineEvent(Signal):
    event_type: str
    data: dict[str, Any]
    event_id: str | None = None


class Artifact(Signal):
    data: dict[str, Any]


class ActivitySnapshot(Signal):
    activity_type: str
    content: dict[str, Any]


class Usage(Signal):
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    model: str | None = None
    provider: str | None = None


class SessionInfo(Signal):
    context_id: str | None = None
    task_id: str | None = None
    session_id: str | None = None


class InterruptRequest(Struct, kw_only=True):
    id: str
    reason: str
    message: str
    response_schema: dict[str, Any]
    tool_call_id: str | None = None
    metadata: dict[str, Any] | None = None


class InputRequired(Signal):
    """The backend needs answers; `checkpoint` is what it needs to resume (no secrets, no message text)."""

    interrupts: list[InterruptRequest]
    checkpoint: Any = None


class Completed(Signal):
    result: Any = None


class Failed(Signal):
    message: str
    code: str = "A2A_EXECUTION_FAILED"


TERMINAL_SIGNALS = (InputRequired, Completed, Failed)
