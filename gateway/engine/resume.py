"""Checks a resume against the execution's pending interrupts (CONTRACT §4), errors reported in the stream; and, at the
source, that interrupts a backend asks for can be answered by a resume this check accepts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonschema
from msgspec import UNSET

from gateway.agents.base import ResumeAnswer
from gateway.agents.signals import InterruptRequest
from gateway.engine.digest import answer_digest
from gateway.errors import ErrorCode, GatewayError
from gateway.protocol.input import MAX_ID_LENGTH, ResumeEntry
from store.records import Execution


def _validator(schema: dict[str, Any]) -> Any:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


MAX_INTERRUPTS = 100  # interrupts one run may leave for a resume to answer


def unanswerable(interrupts: Sequence[InterruptRequest]) -> str | None:
    """Why no client could answer these interrupts (the clause of the run's AGENT_PROTOCOL_ERROR), or None: each id
    must be one a resume may name (1 to MAX_ID_LENGTH characters, once), each schema a valid JSON Schema."""
    if not 0 < len(interrupts) <= MAX_INTERRUPTS:
        return f"the agent asked for {len(interrupts)} interrupts, where a run may leave 1 to {MAX_INTERRUPTS}"
    seen: set[str] = set()
    for index, interrupt in enumerate(interrupts):
        if not isinstance(interrupt.id, str) or not 0 < len(interrupt.id) <= MAX_ID_LENGTH:
            return f"interrupt {index}'s id is not 1 to {MAX_ID_LENGTH} characters, as a resume's interruptId must be"
        if interrupt.id in seen:
            return f"interrupt {index}'s id {interrupt.id!r} names an earlier interrupt of the run too"
        seen.add(interrupt.id)
        if interrupt.tool_call_id is not None and len(interrupt.tool_call_id) > MAX_ID_LENGTH:
            return f"interrupt {index}'s toolCallId is longer than {MAX_ID_LENGTH} characters"
        if interrupt.response_schema:
            try:
                _validator(interrupt.response_schema).check_schema(interrupt.response_schema)
            except jsonschema.exceptions.SchemaError as exc:
                return f"interrupt {index}'s responseSchema is not a JSON Schema ({exc.message[:200]})"
    return None


def check_resume(
    entries: list[ResumeEntry], execution: Execution | None, history: Sequence[Execution], ros_invocation_id: str
) -> tuple[tuple[ResumeAnswer, ...], dict[str, str]]:
    """Return the answers for the backend and their digests, or raise the contract's in-stream error."""
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.interrupt_id in seen:
            raise GatewayError(ErrorCode.INCOMPLETE_RESUME, f"resume[{index}].interruptId", "Duplicate interrupt id.")
        seen.add(entry.interrupt_id)
    pending = {p.id: p for p in execution.pending} if execution and execution.status == "interrupted" else {}
    for index, entry in enumerate(entries):
        if entry.interrupt_id in pending:
            continue
        field = f"resume[{index}].interruptId"
        for past in [*([execution] if execution else []), *reversed(history)]:
            if entry.interrupt_id in past.applied:
                raise GatewayError(ErrorCode.RESUME_ALREADY_APPLIED, field)
            if entry.interrupt_id in past.answered_ids:
                if past.status == "expired":
                    raise GatewayError(ErrorCode.EXECUTION_EXPIRED, field)
                if past.status == "lost":
                    raise GatewayError(ErrorCode.EXECUTION_LOST, field)
                raise GatewayError(ErrorCode.UNKNOWN_INTERRUPT, field, f"The execution was {past.status}.")
        raise GatewayError(ErrorCode.UNKNOWN_INTERRUPT, field)
    missing = [pid for pid in pending if pid not in seen]
    if missing:
        raise GatewayError(ErrorCode.INCOMPLETE_RESUME, "resume", f"Missing answers for: {', '.join(missing)}.")
    assert execution is not None
    if execution.ros_invocation_id != ros_invocation_id:
        raise GatewayError(
            ErrorCode.EXECUTION_LOST,
            "forwardedProps.iacCode.rosInvocationId",
            "A resume must use the rosInvocationId of the execution it continues.",
        )
    answers: list[ResumeAnswer] = []
    digests: dict[str, str] = {}
    for index, entry in enumerate(entries):
        interrupt = pending[entry.interrupt_id]
        payload = None if entry.payload is UNSET else entry.payload
        if entry.status == "resolved":
            if entry.payload is UNSET:
                raise GatewayError(ErrorCode.RESUME_PAYLOAD_INVALID, f"resume[{index}].payload", "A resolved answer needs a payload.")
            if interrupt.response_schema:
                error = jsonschema.exceptions.best_match(_validator(interrupt.response_schema).iter_errors(payload))
                if error is not None:
                    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
                    raise GatewayError(ErrorCode.RESUME_PAYLOAD_INVALID, f"resume[{index}].payload{where}", error.message[:300])
        answers.append(ResumeAnswer(entry.interrupt_id, entry.status, payload, interrupt.reason, interrupt.tool_call_id))
        digests[entry.interrupt_id] = answer_digest(entry.status, payload)
    return tuple(answers), digests
