"""Turns request bytes into a PreparedRun: decode, validate, resolve the workspace, digest. No I/O."""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from gateway.engine.digest import request_digest
from gateway.errors import GatewayError
from gateway.i18n import negotiate
from gateway.protocol import validate
from gateway.protocol.input import AsSent, RunAgentInput, decode_as_sent, decode_run_input

Multitask = Literal["reject", "enqueue", "interrupt", "rollback"]
MULTITASK: tuple[Multitask, ...] = ("reject", "enqueue", "interrupt", "rollback")


class PreparedRun(msgspec.Struct):
    run: RunAgentInput
    workspace: validate.Workspace
    digest: str
    user_text: str | None
    image_count: int
    language: str
    runtime_session_id: str | None = None  # AgentCore's X-Amzn-Bedrock-AgentCore-Runtime-Session-Id, when sent
    transport: str = "sse"  # which transport carries the run: a metrics label (sse, invocations, ws)
    grace_seconds: float = 0.0  # reattach grace window the client asked for (the engine caps it)
    as_sent: AsSent | None = None  # a plain request's messages, forwardedProps and protocolVersion as sent, for its backend
    # The client reads AG-UI 1.0's outcomes (`pendingToolCallIds`, `cancelled`): a plain request that declared
    # protocolVersion 1.0 or newer, or one with the iacCode extension, whose contract is 1.0. Fixed per run.
    speaks_1_0: bool = True
    multitask: Multitask | None = None  # what a busy thread does with this run (None: the gateway's --multitask)
    agent: str = ""  # the agent that runs it (empty: the default; the engine names it once admitted)

    @property
    def user_id(self) -> str | None:
        """The `userId` the client sent (the thread's caller binding), if any."""
        user_id = self.workspace.extension.user_id
        return user_id if isinstance(user_id, str) else None

    @property
    def plain(self) -> bool:
        """A plain AG-UI request (no iacCode extension): the whole protocol, both ways (CONTRACT §2.2)."""
        return self.run.forwarded_props.iacCode is msgspec.UNSET

    @property
    def binding_cwd(self) -> str:
        """The workspace the thread is bound to: a plain request's agent is sent none, so it binds none ("")."""
        return "" if self.plain else self.workspace.cwd

    @property
    def is_resume(self) -> bool:
        return bool(self.run.resume)

    def release_input(self) -> None:
        """Once the backend's request is built, the conversation (messages, tools, context, state) is the backend's: the
        run keeps the input's identities and settings only, not the whole decoded input (a long conversation's
        history, all of it) for as long as it is idle."""
        none: list[Any] = []  # one empty list for the three (nothing adds to a released input)
        self.run = msgspec.structs.replace(self.run, state=None, messages=none, tools=none, context=none)
        self.as_sent = None


def prepare(
    body: bytes,
    *,
    allowed_roots: tuple[str, ...],
    default_cwd: str | None,
    accept_language: str | None,
    runtime_session_id: str | None = None,
    transport: str = "sse",
) -> PreparedRun:
    """Raise GatewayError(INVALID_INPUT) naming the field; the error's `language` is set when known."""
    validate.check_depth(body)
    try:
        run = decode_run_input(body)
    except msgspec.MsgspecError as exc:
        raise validate.error_from_msgspec(exc) from None
    ext = run.forwarded_props.iacCode
    preferred = ext.preferred_language if ext is not msgspec.UNSET and isinstance(ext.preferred_language, str) else None
    language = negotiate(preferred, accept_language)
    try:
        validate.check_tools(run)
        workspace = validate.resolve_workspace(run, allowed_roots, default_cwd)
        images = validate.check_images(run)
        text = validate.last_user_text(run)
        if text is None and not run.resume and not validate.continues_with_tool_results(run):
            raise validate.invalid("messages", "A new run needs a user message.")
    except GatewayError as exc:
        exc.language = language
        raise
    as_sent = decode_as_sent(body) if run.forwarded_props.iacCode is msgspec.UNSET else None
    speaks = as_sent is None or declares_1_0(as_sent.protocolVersion)
    try:
        multitask = multitask_of(run.forwarded_props.multitask or None, "forwardedProps.multitask")
    except GatewayError as exc:
        exc.language = language
        raise
    return PreparedRun(
        run,
        workspace,
        request_digest(body),
        text,
        images,
        language,
        runtime_session_id,
        transport,
        as_sent=as_sent,
        speaks_1_0=speaks,
        multitask=multitask,
    )


def multitask_of(value: Any, field: str) -> Multitask | None:
    """A busy-thread policy a client named (`AGUI-Multitask`, `forwardedProps.multitask`); None when it named none."""
    if value is None or value == "":
        return None
    if value not in MULTITASK:
        raise validate.invalid(field, "One of reject, enqueue, interrupt, rollback.")
    return value  # type: ignore[no-any-return]


_VERSION = re.compile(r"(\d+)\.(\d+)")


def declares_1_0(version: str | msgspec.UnsetType) -> bool:
    """A `protocolVersion` of 1.0 or newer; none is a client from before the protocol carried a version (@ag-ui/core
    0.0.x, as CopilotKit 1.75 ships it), whose schema refuses 1.0's `pendingToolCallIds` and `cancelled` outcome."""
    if not isinstance(version, str):
        return False
    match = _VERSION.fullmatch(version)
    return match is None or (int(match[1]), int(match[2])) >= (1, 0)
