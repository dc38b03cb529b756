"""The agent seam: a backend turns one run request into an async stream of neutral signals, alone or in lists.

The request and answer types here are backend-neutral: the engine maps the iac-code wire extension to
`AgentOptions` at its edge, so no backend sees a wire type of the AG-UI protocol.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar, Literal

import msgspec

from gateway.agents.signals import Ready


def _never() -> bool:
    return False


class CloudCredentials(msgspec.Struct, frozen=True):
    """Short-lived cloud credentials of the caller: a secret, used for this run only and never kept."""

    access_key_id: str | None = None
    access_key_secret: str | None = None
    security_token: str | None = None
    region_id: str | None = None

    def __repr__(self) -> str:
        return f"CloudCredentials(region_id={self.region_id!r}, <secrets redacted>)"


class AgentOptions(msgspec.Struct, frozen=True):
    """What the caller asked of the agent for this run. `api_key` and `cloud` are secrets: use, never keep."""

    invocation_id: str
    model: str | None = None
    api_key: str | None = None
    thinking: dict[str, Any] | None = None
    user_id: str | None = None
    channel: str | None = None
    candidate_presentation: str | None = None
    run_mode: str | None = None
    pipeline_name: str | None = None
    cleanup_only: bool | None = None
    cloud: CloudCredentials | None = None

    @property
    def thinking_enabled(self) -> bool:
        return bool(self.thinking and self.thinking.get("enabled"))

    def __repr__(self) -> str:
        return f"AgentOptions(invocation_id={self.invocation_id!r}, <other fields redacted>)"


class ResumeAnswer(msgspec.Struct, frozen=True):
    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any
    reason: str
    tool_call_id: str | None


class AgentRequest(msgspec.Struct, frozen=True):
    """One run as the backend sees it. `options` may hold request secrets: use them, never keep them."""

    thread_id: str
    run_id: str
    execution_id: str
    cwd: str
    language: str
    options: AgentOptions
    user_text: str | None
    image_count: int = 0
    message_id: str | None = None  # the AG-UI id of the user message
    images: tuple[tuple[str, str], ...] = ()  # (mimeType, base64) of the user message's inline images
    # A plain AG-UI request (no iacCode extension) hands over the whole of it, as JSON: every message of the
    # conversation as the client wrote it (no field added, none dropped), the client's tools, its state, context and
    # forwardedProps, and the run it follows. With the extension, none of these (the seed contract).
    plain: bool = False
    messages: tuple[dict[str, Any], ...] = ()
    tools: tuple[dict[str, Any], ...] = ()
    state: Any = None
    context: tuple[Any, ...] = ()
    forwarded_props: dict[str, Any] | None = None
    parent_run_id: str | None = None
    protocol_version: str | None = None  # the AG-UI version the client declared (`protocolVersion`), if it did
    resume: tuple[ResumeAnswer, ...] = ()
    checkpoint: Any = None
    # True once the run was handed to another replica (drain, or a newer owner): leave the agent's task running.
    released: Callable[[], bool] = _never

    def __repr__(self) -> str:
        return f"AgentRequest(thread_id={self.thread_id!r}, run_id={self.run_id!r}, execution_id={self.execution_id!r})"


class AgentBackend(abc.ABC):
    """Backends never build AG-UI events; they yield signals and end with a terminal one."""

    name: str = "agent"
    # Whether plain AG-UI requests (no iacCode) may run in a workspace the gateway creates under its state
    # directory when the operator chose none. Real backends work on real files: they need the operator's choice.
    plain_workspace: bool = False
    # Whether the backend can call tools the client declares (a plain request's `tools`); a backend that cannot
    # refuses a non-empty list before the run starts rather than leave the client's tools unused in silence.
    client_tools: bool = False
    # What the backend itself is known to do, as parts of AG-UI's AgentCapabilities (`tools`, `state`, `reasoning`,
    # `humanInTheLoop`, ...); the gateway adds what it does itself (gateway/agents/discovery.py). None known: {}.
    capabilities: ClassVar[dict[str, Any]] = {}

    @abc.abstractmethod
    def run(self, request: AgentRequest) -> AsyncIterator[Ready]:
        """Start a turn, or continue one when `request.resume` is set; the stream ends after a terminal signal.
        Each step is a signal or a list of them (`Ready`): hand over at once what is ready at once."""

    # The identities (`iac-code.session.v1` keys) the session event waits for; none: it precedes the first event.
    session_keys: tuple[str, ...] = ()

    # Whether a live run can be picked up by another replica (the agent's task lives outside this process).
    adoptable: bool = False

    # Whether its interrupts are an AG-UI agent's own, passed on as sent: they expire when the agent says (their
    # expiresAt) or after --upstream-interrupt-ttl (none by default), never after the gateway's --interrupt-ttl.
    upstream_interrupts: bool = False

    def follow(self, request: AgentRequest, state: dict[str, Any], shown: dict[str, str]) -> AsyncIterator[Ready]:
        """Go on with a run another replica started: `state` is its last `Adoptable` state, `shown` the text each
        agent message id already showed. The stream ends after a terminal signal, as `run`'s does."""
        raise NotImplementedError

    async def cancel_execution(self, execution_id: str, checkpoint: Any) -> None:
        """Cancel work kept for an interrupted execution (expired or cancelled); nothing by default."""
        return

    async def aclose(self) -> None:
        return None
