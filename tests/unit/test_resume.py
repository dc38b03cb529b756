"""The resume rules (CONTRACT §4) alone, on hand-built executions."""

from __future__ import annotations

import pytest

from gateway.engine.resume import check_resume
from gateway.errors import ErrorCode, GatewayError
from gateway.protocol.input import ResumeEntry
from store.records import Execution, PendingInterrupt

SCHEMA = {"type": "object", "properties": {"decision": {"enum": ["allow_once", "deny"]}}, "required": ["decision"]}


def execution(status="interrupted", pending=("i1", "i2"), **fields) -> Execution:
    items = [PendingInterrupt(id=i, reason="tool_call", wire={}, response_schema=SCHEMA, tool_call_id=f"c-{i}") for i in pending]
    return Execution(execution_id="e1", ros_invocation_id="inv", status=status, created_at=0, updated_at=0, pending=items, **fields)


def entry(interrupt_id: str, status: str = "resolved", payload=None) -> ResumeEntry:
    return ResumeEntry(interrupt_id=interrupt_id, status=status, payload={"decision": "allow_once"} if payload is None else payload)


def code_of(entries, current, history=(), invocation="inv") -> tuple[ErrorCode, str | None]:
    with pytest.raises(GatewayError) as caught:
        check_resume(entries, current, list(history), invocation)
    return caught.value.code, caught.value.field


def test_complete_valid_answers_are_returned_with_digests():
    answers, digests = check_resume([entry("i1"), entry("i2", "cancelled")], execution(), [], "inv")
    assert [(a.interrupt_id, a.status, a.tool_call_id) for a in answers] == [("i1", "resolved", "c-i1"), ("i2", "cancelled", "c-i2")]
    assert set(digests) == {"i1", "i2"} and digests["i1"] != digests["i2"]


def test_each_rule_has_its_code_and_field():
    assert code_of([entry("i1"), entry("i1")], execution()) == (ErrorCode.INCOMPLETE_RESUME, "resume[1].interruptId")
    assert code_of([entry("i1")], execution()) == (ErrorCode.INCOMPLETE_RESUME, "resume")
    assert code_of([entry("nope")], execution()) == (ErrorCode.UNKNOWN_INTERRUPT, "resume[0].interruptId")
    assert code_of([entry("i1"), entry("i2")], execution(), invocation="other")[0] is ErrorCode.EXECUTION_LOST
    bad = code_of([entry("i1", payload={"decision": "maybe"}), entry("i2")], execution())
    assert bad == (ErrorCode.RESUME_PAYLOAD_INVALID, "resume[0].payload.decision")
    missing = ResumeEntry(interrupt_id="i1", status="resolved")
    assert code_of([missing, entry("i2")], execution())[0] is ErrorCode.RESUME_PAYLOAD_INVALID


def test_answers_to_finished_executions_say_why():
    applied = execution(status="completed", pending=(), applied={"i1": "d"})
    assert code_of([entry("i1")], None, [applied])[0] is ErrorCode.RESUME_ALREADY_APPLIED
    expired = execution(status="expired", pending=(), answered_ids=["i1"])
    assert code_of([entry("i1")], None, [expired])[0] is ErrorCode.EXECUTION_EXPIRED
    lost = execution(status="lost", pending=(), answered_ids=["i1"])
    assert code_of([entry("i1")], None, [lost])[0] is ErrorCode.EXECUTION_LOST
    cancelled = execution(status="cancelled", pending=(), answered_ids=["i1"])
    assert code_of([entry("i1")], None, [cancelled])[0] is ErrorCode.UNKNOWN_INTERRUPT
