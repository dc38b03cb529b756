"""The agent seam: a backend turns one run request into an async stream of neutral signals."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, AsyncIterator

from gateway.engine.signals import Signal
from gateway.protocol.input import IacCode


@dataclass(frozen=True, slots=True)
class ResumeAnswer:
    interrupt_id: str
    status: str  # "resolved" or "cancelled"
    payload: Any
    reason: str
    tool_call_id: str | None


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One run as the backend sees it. `extension` may hold request secrets: use them, never keep them."""

    thread_id: str
    run_id: str
    execution_id: str
    cwd: str
    language: str
    extension: IacCode
    user_text: str | None
    image_count: int = 0
    message_id: str | None = None  # the AG-UI id of the user message
    images: tuple[tuple[str, str], ...] = ()  # (mimeType, base64) of the user message's inline images
    resume: tuple[ResumeAnswer, ...] = ()
    checkpoint: Any = None

    def __repr__(self) -> str:
        return f"AgentRequest(thread_id={self.thread_id!r}, run_id={self.run_id!r}, execution_id={self.execution_id!r})"


class AgentBackend(abc.ABC):
    """Backends never build AG-UI events; they yield signals and end with a terminal one."""

    name: str = "agent"

    @abc.abstractmethod
    def run(self, request: AgentRequest) -> AsyncIterator[Signal]:
        """Start a turn, or continue one when `request.resume` is set; the stream ends after a terminal signal."""

    async def cancel_execution(self, execution_id: str, checkpoint: Any) -> None:
        """Cancel work kept for an interrupted execution (expired or cancelled); nothing by default."""
        return None

    async def aclose(self) -> None:
        return None
