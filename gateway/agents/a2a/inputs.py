"""Input envelopes (`iac_code.input`, `pendingPermissions`) as AG-UI interrupts, with the answer schemas of
IAC_CODE_A2A_WIRE.md §4: permission `{decision}`, a selection `{selectedId}` or `{freeText}`, a resource `{value}`."""

from __future__ import annotations

from typing import Any

from gateway.agents import signals as s

DECISIONS = ["allow_once", "deny"]
REASONS = {"permission": "tool_call", "ask_user_question": "question"}
# Envelope fields a client needs to render the request; everything else stays with the agent.
SHOWN_FIELDS = (
    "title",
    "purpose",
    "effect",
    "target",
    "isReadOnly",
    "safeSummary",
    "deploymentSummary",
    "language",
    "toolName",
    "question",
    "freeTextPrompt",
    "selector",
    "scope",
    "subPipelineId",
)


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def options_of(envelope: dict[str, Any]) -> list[dict[str, Any]]:
    """Each option with every field the agent gave (summary, architectureDiagram, costs, action, ...), plus
    `id`, `value` (the same id) and `label`; a bare string option is its own id and label."""
    options: list[dict[str, Any]] = []
    for option in envelope.get("options") or []:
        if isinstance(option, str):
            options.append({"id": option, "value": option, "label": option})
        elif isinstance(option, dict):
            option_id = option.get("id") or option.get("value") or option.get("name") or option.get("label")
            if option_id is not None:
                label = option.get("label") or option.get("name") or option.get("title") or option_id
                options.append({**option, "id": str(option_id), "value": str(option_id), "label": str(label)})
    return options


def is_sideband(envelope: dict[str, Any]) -> bool:
    """A sub-pipeline's input: answered through SendMessage, not the task's stream."""
    return envelope.get("sideband") is True or envelope.get("scope") == "candidate" or isinstance(envelope.get("subPipelineId"), str)


def response_schema(kind: str, envelope: dict[str, Any], options: list[dict[str, Any]]) -> dict[str, Any]:
    if kind == "permission":
        return _object({"decision": {"type": "string", "enum": DECISIONS}}, ["decision"])
    if kind == "cloud_resource_selection":
        properties = {
            "value": {"type": "string", "minLength": 1},
            "label": {"type": "string", "maxLength": 1024},
            "source": {"type": "object"},
        }
        return _object(properties, ["value"])
    ids = [o["id"] for o in options]
    choices: list[dict[str, Any]] = []
    if ids:
        selected: dict[str, Any] = {"selectedId": {"type": "string", "enum": ids}}
        if kind == "deployment_confirmation":
            selected["parameterOverrides"] = {"type": "object"}
        choices.append(_object(selected, ["selectedId"]))
    if not ids or envelope.get("allowFreeText", kind == "ask_user_question") is True:
        choices.append(_object({"freeText": {"type": "string", "minLength": 1}}, ["freeText"]))
    return choices[0] if len(choices) == 1 else {"oneOf": choices}


def interrupt_from_input(
    envelope: dict[str, Any], task_id: str | None, context_id: str | None = None
) -> tuple[s.InterruptRequest, dict[str, Any]]:
    """The interrupt a client sees, and what the answer needs later (kept in the checkpoint: ids, no secrets)."""
    kind = str(envelope.get("kind") or "input")
    input_id = str(envelope["inputId"])
    options = options_of(envelope)
    sideband = is_sideband(envelope)
    meta: dict[str, Any] = {
        "kind": kind,
        "inputId": input_id,
        "requestTaskId": envelope.get("requestTaskId") or task_id,
        "contextId": envelope.get("contextId") or context_id,
        "toolUseId": envelope.get("toolUseId"),
        "sideband": sideband,
        "options": [{k: o[k] for k in ("id", "label", "name", "action") if k in o} for o in options],
    }
    if isinstance(envelope.get("selector"), dict):
        meta["selectorId"] = envelope["selector"].get("id")
    shown: dict[str, Any] = {k: envelope[k] for k in SHOWN_FIELDS if envelope.get(k) is not None}
    shown.update(kind=kind, options=options, sideband=sideband)
    if kind != "permission":
        shown["allowFreeText"] = envelope.get("allowFreeText", kind == "ask_user_question") is True
    default = "Allow this tool call?" if kind == "permission" else "The agent needs input."
    message = envelope.get("prompt") or envelope.get("question") or envelope.get("title") or default
    request = s.InterruptRequest(
        id=input_id,
        reason=REASONS.get(kind, kind),
        message=str(message),
        tool_call_id=envelope.get("toolUseId") if kind == "permission" else None,
        response_schema=response_schema(kind, envelope, options),
        metadata=shown,
    )
    return request, meta
