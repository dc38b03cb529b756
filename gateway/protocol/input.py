"""RunAgentInput, its messages and content parts, the strict `forwardedProps.iacCode` extension and resume entries."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

NonEmpty = Annotated[str, Meta(min_length=1)]
MAX_ID_LENGTH = 256  # every identifier a client sends (thread, run, message, tool call, stream ids)
Identifier = Annotated[str, Meta(min_length=1, max_length=MAX_ID_LENGTH)]
OptionalId = Annotated[str, Meta(max_length=MAX_ID_LENGTH)]


class Thinking(Struct, forbid_unknown_fields=True):
    enabled: bool | UnsetType = UNSET
    effort: str | UnsetType = UNSET
    budget: Annotated[int, Meta(gt=0)] | UnsetType = UNSET


class AlibabaCloud(Struct, forbid_unknown_fields=True, rename="camel"):
    access_key_id: str | UnsetType = UNSET
    access_key_secret: str | UnsetType = UNSET
    security_token: str | UnsetType = UNSET
    region_id: str | UnsetType = UNSET

    def __repr__(self) -> str:  # secrets never reach a log line through repr()
        return f"AlibabaCloud(region_id={self.region_id!r}, <secrets redacted>)"


class IacCode(Struct, forbid_unknown_fields=True, rename="camel"):
    """The strict `forwardedProps.iacCode` extension (CONTRACT §2.1): unknown fields are rejected."""

    schema_version: Literal[1]
    ros_invocation_id: Annotated[str, Meta(min_length=1, max_length=256)]
    cwd: str
    model: str | UnsetType = UNSET
    llm_api_key: str | UnsetType = UNSET
    thinking: Thinking | UnsetType = UNSET
    user_id: str | UnsetType = UNSET
    channel: str | UnsetType = UNSET
    preferred_language: str | UnsetType = UNSET
    candidate_presentation: Literal["standard", "rich"] | UnsetType = UNSET
    run_mode: Literal["normal", "pipeline"] | UnsetType = UNSET
    pipeline_name: str | UnsetType = UNSET
    cleanup_only: bool | UnsetType = UNSET
    alibaba_cloud: AlibabaCloud | UnsetType = UNSET

    def __repr__(self) -> str:
        return f"IacCode(ros_invocation_id={self.ros_invocation_id!r}, cwd={self.cwd!r}, <other fields redacted>)"


class ForwardedProps(Struct):
    """Other keys of forwardedProps are ignored; `iacCode` is read strictly, and `multitask` (what a busy thread does
    with the run), whose value prepare checks."""

    iacCode: IacCode | UnsetType = UNSET
    multitask: Any = UNSET


class DataSource(Struct, tag_field="type", tag="data", rename="camel"):
    value: str
    mime_type: str


class TextPart(Struct, tag_field="type", tag="text"):
    text: str


class ImagePart(Struct, tag_field="type", tag="image"):
    """Only inline data sources are accepted; a `url` source fails decoding with a path to the field."""

    source: DataSource
    metadata: Any = None


UserContent = str | list[TextPart | ImagePart]


class _Message(Struct, tag_field="role", kw_only=True):
    id: OptionalId | UnsetType = UNSET
    name: str | UnsetType = UNSET


class UserMessage(_Message, tag="user"):
    content: UserContent


class AssistantMessage(_Message, tag="assistant"):
    content: Any = None
    toolCalls: Any = None


class SystemMessage(_Message, tag="system"):
    content: Any = None


class DeveloperMessage(_Message, tag="developer"):
    content: Any = None


class ToolMessage(_Message, tag="tool"):
    content: Any = None
    toolCallId: OptionalId | None = None


class ActivityMessage(_Message, tag="activity"):
    content: Any = None


class ReasoningMessage(_Message, tag="reasoning"):
    content: Any = None


Message = UserMessage | AssistantMessage | SystemMessage | DeveloperMessage | ToolMessage | ActivityMessage | ReasoningMessage


class ResumeEntry(Struct, rename="camel"):
    interrupt_id: Identifier
    status: Literal["resolved", "cancelled"]
    payload: Any = UNSET
    metadata: Any = UNSET


class RunAgentInput(Struct, rename="camel"):
    """AG-UI RunAgentInput as the contract requires it (§2); unknown top-level fields are ignored."""

    thread_id: Identifier
    run_id: Identifier
    state: Any
    messages: list[Message]
    tools: list[Any]
    context: list[Any]
    forwarded_props: ForwardedProps
    parent_run_id: OptionalId | UnsetType = UNSET
    resume: list[ResumeEntry] | UnsetType = UNSET


class AsSent(Struct):
    """What a plain request's backend is handed as the client wrote it (the input decoded once more, generically):
    every message with every field it carried and none added, the whole forwardedProps, the client's protocolVersion."""

    messages: list[Any] = []
    forwardedProps: dict[str, Any] = {}
    protocolVersion: str | UnsetType = UNSET


_decoder = msgspec.json.Decoder(RunAgentInput)
_as_sent_decoder = msgspec.json.Decoder(AsSent)


def decode_run_input(body: bytes) -> RunAgentInput:
    """Decode and type-check a request body; raises msgspec.ValidationError / DecodeError."""
    return _decoder.decode(body)


def decode_as_sent(body: bytes) -> AsSent:
    """The messages, forwardedProps and protocolVersion as sent, from a body `decode_run_input` has already accepted
    (RunAgentInput reads only `iacCode` of forwardedProps, and its typed messages would add fields the client left
    out and drop the ones AG-UI added since); the rest of the body is skipped, not built."""
    return _as_sent_decoder.decode(body)
