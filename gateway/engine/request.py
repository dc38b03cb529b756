"""The engine's edge to the agent seam: the iac-code wire extension becomes neutral `AgentOptions`, and a
prepared run becomes an `AgentRequest`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from gateway.agents.base import AgentOptions, AgentRequest, CloudCredentials, ResumeAnswer
from gateway.engine.prepare import PreparedRun
from gateway.protocol import validate
from gateway.protocol.input import AlibabaCloud, IacCode, Thinking
from store import Lease


def _set(value: Any) -> Any:
    return None if value is msgspec.UNSET else value


def _cloud(cloud: AlibabaCloud | msgspec.UnsetType) -> CloudCredentials | None:
    if not isinstance(cloud, AlibabaCloud):
        return None
    return CloudCredentials(
        access_key_id=_set(cloud.access_key_id),
        access_key_secret=_set(cloud.access_key_secret),
        security_token=_set(cloud.security_token),
        region_id=_set(cloud.region_id),
    )


def agent_options(ext: IacCode) -> AgentOptions:
    thinking = msgspec.to_builtins(ext.thinking) if isinstance(ext.thinking, Thinking) else None
    return AgentOptions(
        invocation_id=ext.ros_invocation_id,
        model=_set(ext.model),
        api_key=_set(ext.llm_api_key),
        thinking=thinking or None,
        user_id=_set(ext.user_id),
        channel=_set(ext.channel),
        candidate_presentation=_set(ext.candidate_presentation),
        run_mode=_set(ext.run_mode),
        pipeline_name=_set(ext.pipeline_name),
        cleanup_only=_set(ext.cleanup_only),
        cloud=_cloud(ext.alibaba_cloud),
    )


def agent_request(
    prepared: PreparedRun,
    lease: Lease,
    answers: tuple[ResumeAnswer, ...],
    checkpoint: Any,
    *,
    released: Callable[[], bool] | None = None,
) -> AgentRequest:
    """`thread_id` is the store's key: the client's threadId, scoped to its principal when authenticated, so two
    principals' threads never share a backend context."""
    run = prepared.run
    message = validate.last_user_message(run)
    plain = prepared.plain  # the whole request goes to the backend; with the extension, only the seed contract's part
    as_sent = prepared.as_sent if plain else None
    parent = run.parent_run_id
    return AgentRequest(
        thread_id=lease.thread_id,
        run_id=run.run_id,
        execution_id=lease.execution_id,
        cwd=prepared.workspace.cwd,
        language=prepared.language,
        options=agent_options(prepared.workspace.extension),
        user_text=prepared.user_text,
        image_count=prepared.image_count,
        message_id=message.id if message is not None and isinstance(message.id, str) else None,
        images=validate.inline_images(message) if prepared.image_count else (),
        plain=plain,
        messages=tuple(as_sent.messages) if as_sent is not None else (),
        tools=tuple(tool for tool in run.tools if isinstance(tool, dict)) if plain else (),
        state=run.state if plain else None,
        context=tuple(run.context) if plain else (),
        forwarded_props=as_sent.forwardedProps if as_sent is not None else None,
        protocol_version=as_sent.protocolVersion if as_sent is not None and isinstance(as_sent.protocolVersion, str) else None,
        parent_run_id=parent if plain and isinstance(parent, str) else None,
        resume=answers,
        checkpoint=checkpoint if answers else None,
        **({"released": released} if released is not None else {}),
    )
