"""What the gateway sends the agent (IAC_CODE_A2A_WIRE.md §2, §4): a new turn's message and one message per answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.agents.base import AgentRequest, ResumeAnswer

CONFIGURATION = {"acceptedOutputModes": ["text/plain"]}
# A resource selection travels as text after this marker (the runtime's exact prefix is not public) and, in full,
# as `metadata.iac_code.inputResponse`, which is what the runtime parses.
RESOURCE_SELECTION_PREFIX = "[iac-code:cloud_resource_selection] "
_IMAGE_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def iac_metadata(request: AgentRequest) -> dict[str, Any]:
    """The request's options for `metadata.iac_code`: the only place secrets travel. None values are dropped;
    `cleanupOnly`, `rosInvocationId` and `preferredLanguage` are always present."""
    options = request.options
    values: dict[str, Any] = {
        "cwd": request.cwd,
        "iac_code_model": options.model,
        "iac_code_api_key": options.api_key,
        "thinking": options.thinking or None,
        "user_id": options.user_id,
        "channel": options.channel,
        "preferredLanguage": request.language,
        "candidatePresentation": options.candidate_presentation,
        "run_mode": options.run_mode,
        "pipeline_name": options.pipeline_name,
        "cleanupOnly": bool(options.cleanup_only),
        "rosInvocationId": options.invocation_id,
    }
    cloud = options.cloud
    if cloud is not None:
        values.update(
            alibaba_cloud_access_key_id=cloud.access_key_id,
            alibaba_cloud_access_key_secret=cloud.access_key_secret,
            alibaba_cloud_security_token=cloud.security_token,
            alibaba_cloud_region_id=cloud.region_id,
        )
    return {k: v for k, v in values.items() if isinstance(v, (str, bool, int, dict))}


def params(message: dict[str, Any]) -> dict[str, Any]:
    return {"message": message, "configuration": CONFIGURATION}


def new_turn(request: AgentRequest, context_id: str) -> dict[str, Any]:
    """The user's turn: text parts, then each inline image as a JSON data part `{filename, bytes}`; no taskId."""
    parts: list[dict[str, Any]] = [{"text": request.user_text}] if request.user_text else []
    for index, (mime, data) in enumerate(request.images):
        filename = f"image-{index + 1}.{_IMAGE_EXTENSIONS.get(mime, 'bin')}"
        parts.append({"data": {"filename": filename, "bytes": data}, "mediaType": mime})
    return {
        "messageId": request.message_id or f"agui-{request.run_id}",
        "role": "ROLE_USER",
        "contextId": context_id,
        "parts": parts,
        "metadata": {"iac_code": iac_metadata(request)},
    }


@dataclass(frozen=True, slots=True)
class Outbound:
    """One answer as the agent takes it: a message to send (streamed, or sent for a sideband input), or, for a
    dismissed question, no message but a cancel of the task."""

    meta: dict[str, Any]
    message: dict[str, Any] | None
    streamed: bool = True

    @property
    def cancels(self) -> bool:
        return self.message is None


def answers(request: AgentRequest, context_id: str, task_id: str) -> list[Outbound]:
    """One Outbound per answer, in the order the client gave them."""
    inputs: dict[str, Any] = (request.checkpoint or {}).get("inputs", {})
    metas = [(answer, inputs.get(answer.interrupt_id) or {"kind": "input", "inputId": answer.interrupt_id}) for answer in request.resume]
    permissions = [meta for _, meta in metas if meta.get("kind") == "permission"]
    sideband = bool(permissions) and all(meta.get("sideband") for meta in permissions)
    texts = sum(1 for _, meta in metas if meta.get("kind") != "permission")
    iac = iac_metadata(request)
    base: dict[str, Any] = {"role": "ROLE_USER", "contextId": context_id, "taskId": task_id, "metadata": {"iac_code": iac}}
    out: list[Outbound] = []
    for answer, meta in metas:
        if meta.get("kind") == "permission":
            message_id = f"agui-resume-{meta['inputId']}" if sideband else f"agui-resume-{request.run_id}-{meta['inputId']}"
            part = {"data": permission_data(answer, meta, task_id), "mediaType": "application/json"}
            out.append(Outbound(meta, {"messageId": message_id, **base, "parts": [part]}, streamed=not sideband))
            continue
        if answer.status == "cancelled" and meta.get("kind") != "cloud_resource_selection":
            out.append(Outbound(meta, None))
            continue
        message_id = f"agui-resume-{request.run_id}" if texts == 1 else f"agui-resume-{request.run_id}-{meta['inputId']}"
        if meta.get("kind") == "cloud_resource_selection":
            body = resource_selection(answer, meta, context_id, task_id)
            text = RESOURCE_SELECTION_PREFIX + json.dumps(body, ensure_ascii=False, separators=(",", ":"))
            message = {"messageId": message_id, **base, "parts": [{"text": text}], "metadata": {"iac_code": {**iac, "inputResponse": body}}}
        else:
            message = {"messageId": message_id, **base, "parts": [{"text": answer_text(answer, meta)}]}
        out.append(Outbound(meta, message))
    return out


def permission_data(answer: ResumeAnswer, meta: dict[str, Any], task_id: str) -> dict[str, Any]:
    """Exactly the six keys the runtime accepts; a cancelled permission is a `deny`."""
    payload = answer.payload if isinstance(answer.payload, dict) else {}
    decision = payload.get("decision") if answer.status == "resolved" else "deny"
    return {
        "schemaVersion": 1,
        "kind": "permission",
        "requestTaskId": meta.get("requestTaskId") or task_id,
        "inputId": meta["inputId"],
        "toolUseId": meta.get("toolUseId"),
        "decision": decision if decision in ("allow_once", "deny") else "deny",
    }


def answer_text(answer: ResumeAnswer, meta: dict[str, Any]) -> str:
    """The free text; else the chosen option's label, name or id; a deployment confirmation as its JSON action."""
    payload = answer.payload if isinstance(answer.payload, dict) else {}
    if isinstance(payload.get("freeText"), str):
        return payload["freeText"]
    selected = payload.get("selectedId")
    option: dict[str, Any] = next((o for o in meta.get("options", []) if o.get("id") == selected), {})
    if meta.get("kind") == "deployment_confirmation":
        overrides = payload.get("parameterOverrides") if isinstance(payload.get("parameterOverrides"), dict) else {}
        return json.dumps({"action": option.get("action") or selected, "parameter_overrides": overrides}, ensure_ascii=False)
    return str(option.get("label") or option.get("name") or option.get("id") or selected or "")


def resource_selection(answer: ResumeAnswer, meta: dict[str, Any], context_id: str, task_id: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schemaVersion": 1,
        "kind": "cloud_resource_selection",
        "status": "selected" if answer.status == "resolved" else "canceled",
        "requestTaskId": meta.get("requestTaskId") or task_id,
        "contextId": meta.get("contextId") or context_id,
        "inputId": meta["inputId"],
        "toolUseId": meta.get("toolUseId"),
    }
    payload = answer.payload if isinstance(answer.payload, dict) else {}
    if answer.status == "resolved":
        body.update(selectorId=meta.get("selectorId"), value=payload.get("value"), label=payload.get("label") or payload.get("value"))
        if isinstance(payload.get("source"), dict):
            body["source"] = payload["source"]
    return body
