"""Interrupts, resume rules, expiry and restart survival (CONTRACT §4) against real servers."""

from __future__ import annotations

import json

import pytest

from gateway.settings import Settings
from server.app import create_app
from store.file import FileStore
from tests.support import InProcessGateway, assert_well_formed_run, ext, pending_interrupt, post_sse, run_body, thread_state
from tests.unit.clock import FakeClock


def start_tool(client, url, args='{"stack":"vpc"}', **kw):
    body = run_body(f"/tool deploy {args}", **kw)
    result = post_sse(client, url + "/", body)
    assert_well_formed_run(result.events)
    return body, result


def resume(client, url, thread, entries, *, path="/", iac=None):
    body = run_body(None, thread=thread, resume=entries, iac=iac)
    result = post_sse(client, url + path, body)
    assert result.status == 200, result.raw
    assert_well_formed_run(result.events)
    return result


def answer(interrupt_id, payload=None, status="resolved"):
    entry = {"interruptId": interrupt_id, "status": status}
    if payload is not None:
        entry["payload"] = payload
    return entry


def text_of(result):
    return "".join(e["delta"] for e in result.of("TEXT_MESSAGE_CONTENT"))


def test_permission_interrupt_has_every_contract_field(gateway, client):
    _, result = start_tool(client, gateway.url)
    interrupt = pending_interrupt(result)
    assert interrupt["reason"] == "tool_call"
    assert interrupt["message"] and interrupt["id"]
    tool_start = result.of("TOOL_CALL_START")[0]
    assert interrupt["toolCallId"] == tool_start["toolCallId"]
    assert interrupt["responseSchema"]["properties"]["decision"]["enum"] == ["allow_once", "deny"]
    assert interrupt["expiresAt"].endswith("Z")
    assert set(interrupt["metadata"]) >= {"title", "purpose", "safeSummary", "options", "toolName"}
    assert interrupt["metadata"]["toolName"] == "deploy"
    # Every span closed before the interrupt ended the run.
    assert result.types()[-2] == "TOOL_CALL_END"
    assert "".join(e["delta"] for e in result.of("TOOL_CALL_ARGS")) == '{"stack":"vpc"}'


@pytest.mark.parametrize("path", ["/", "/invocations"])
def test_allow_once_runs_the_tool(gateway, client, path):
    body, first = start_tool(client, gateway.url)
    interrupt = pending_interrupt(first)
    result = resume(client, gateway.url, body["threadId"], [answer(interrupt["id"], {"decision": "allow_once"})], path=path)
    assert result.terminal["outcome"] == {"type": "success"}
    tool_result = result.of("TOOL_CALL_RESULT")[0]
    assert tool_result["toolCallId"] == interrupt["toolCallId"]
    assert json.loads(tool_result["content"])["ok"] is True
    assert "ran successfully" in text_of(result)


@pytest.mark.parametrize("decision", [{"status": "resolved", "payload": {"decision": "deny"}}, {"status": "cancelled"}])
def test_deny_or_cancelled_does_not_run_the_tool(gateway, client, decision):
    body, first = start_tool(client, gateway.url)
    interrupt = pending_interrupt(first)
    result = resume(client, gateway.url, body["threadId"], [{"interruptId": interrupt["id"], **decision}])
    assert result.terminal["outcome"] == {"type": "success"}
    assert not result.of("TOOL_CALL_RESULT")
    assert "was not run" in text_of(result)


def test_repeated_answer_is_already_applied_and_never_runs_twice(gateway, client):
    body, first = start_tool(client, gateway.url)
    interrupt = pending_interrupt(first)
    entries = [answer(interrupt["id"], {"decision": "allow_once"})]
    ran = resume(client, gateway.url, body["threadId"], entries)
    assert len(ran.of("TOOL_CALL_RESULT")) == 1
    again = resume(client, gateway.url, body["threadId"], entries)
    assert again.terminal["type"] == "RUN_ERROR" and again.terminal["code"] == "RESUME_ALREADY_APPLIED"
    assert not again.of("TOOL_CALL_RESULT")
    other = resume(client, gateway.url, body["threadId"], [answer(interrupt["id"], {"decision": "deny"})])
    assert other.terminal["code"] == "RESUME_ALREADY_APPLIED"
    inv = resume(client, gateway.url, body["threadId"], entries, path="/invocations")
    assert inv.terminal["code"] == "SESSION_BUSY" and inv.terminal["metadata"]["gatewayCode"] == "RESUME_ALREADY_APPLIED"


def test_invalid_payload_keeps_the_interrupt_for_another_try(gateway, client):
    body, first = start_tool(client, gateway.url)
    interrupt = pending_interrupt(first)
    for bad in (
        answer(interrupt["id"]),
        answer(interrupt["id"], {"decision": "maybe"}),
        answer(interrupt["id"], {"decision": "deny", "x": 1}),
    ):
        result = resume(client, gateway.url, body["threadId"], [bad])
        assert result.terminal["code"] == "RESUME_PAYLOAD_INVALID", result.terminal
        assert "resume[0].payload" in result.terminal["message"]
    good = resume(client, gateway.url, body["threadId"], [answer(interrupt["id"], {"decision": "allow_once"})])
    assert good.terminal["outcome"]["type"] == "success" and good.of("TOOL_CALL_RESULT")


def test_resume_must_answer_every_interrupt_exactly_once(gateway, client):
    body = run_body("/tools alpha beta")
    first = post_sse(client, gateway.url + "/", body)
    interrupts = first.terminal["outcome"]["interrupts"]
    assert len(interrupts) == 2
    ids = [i["id"] for i in interrupts]
    missing = resume(client, gateway.url, body["threadId"], [answer(ids[0], {"decision": "deny"})])
    assert missing.terminal["code"] == "INCOMPLETE_RESUME"
    duplicate = resume(
        client, gateway.url, body["threadId"], [answer(ids[0], {"decision": "deny"})] * 2 + [answer(ids[1], {"decision": "deny"})]
    )
    assert duplicate.terminal["code"] == "INCOMPLETE_RESUME"
    unknown = resume(client, gateway.url, body["threadId"], [answer("nope", {"decision": "deny"}), answer(ids[1], {"decision": "deny"})])
    assert unknown.terminal["code"] == "UNKNOWN_INTERRUPT"
    both = resume(client, gateway.url, body["threadId"], [answer(ids[0], {"decision": "allow_once"}), answer(ids[1], {"decision": "deny"})])
    assert both.terminal["outcome"]["type"] == "success"
    assert len(both.of("TOOL_CALL_RESULT")) == 1
    assert "alpha ran successfully" in text_of(both) and "beta was not run" in text_of(both)


def test_resume_needs_the_same_ros_invocation_id(gateway, client):
    body, first = start_tool(client, gateway.url)
    interrupt = pending_interrupt(first)
    wrong = resume(
        client, gateway.url, body["threadId"], [answer(interrupt["id"], {"decision": "allow_once"})], iac=ext(rosInvocationId="other")
    )
    assert wrong.terminal["code"] == "EXECUTION_LOST"
    right = resume(client, gateway.url, body["threadId"], [answer(interrupt["id"], {"decision": "allow_once"})])
    assert right.terminal["outcome"]["type"] == "success"


def test_resume_on_a_thread_with_nothing_pending_is_unknown(gateway, client):
    result = resume(client, gateway.url, "thread-never-interrupted", [answer("perm-x", {"decision": "deny"})])
    assert result.terminal["code"] == "UNKNOWN_INTERRUPT"


def test_question_interrupt_takes_an_option_or_free_text(gateway, client):
    for reply in ("yes", "something else entirely"):
        body = run_body("/ask Shall I proceed?")
        first = post_sse(client, gateway.url + "/", body)
        interrupt = pending_interrupt(first)
        assert interrupt["reason"] == "question" and interrupt["message"] == "Shall I proceed?"
        assert [o["value"] for o in interrupt["metadata"]["options"]] == ["yes", "no", "later"]
        empty = resume(client, gateway.url, body["threadId"], [answer(interrupt["id"], {"answer": ""})])
        assert empty.terminal["code"] == "RESUME_PAYLOAD_INVALID"
        result = resume(client, gateway.url, body["threadId"], [answer(interrupt["id"], {"answer": reply})])
        assert text_of(result) == f"You answered: {reply}"


def test_pipeline_reopens_open_steps_and_never_repeats_custom_events(gateway, client):
    body = run_body("/pipeline selling")
    first = post_sse(client, gateway.url + "/", body)
    assert_well_formed_run(first.events)
    interrupt = pending_interrupt(first)
    assert interrupt["reason"] == "candidate_selection"
    closed_at_interrupt = [e["stepName"] for e in first.of("STEP_FINISHED")][-2:]
    assert closed_at_interrupt == ["candidates", "pipeline"]
    second = resume(client, gateway.url, body["threadId"], [answer(interrupt["id"], {"candidateId": "cand-b"})])
    # The steps open at the interrupt re-open right after RUN_STARTED, outermost first.
    assert second.types()[:3] == ["RUN_STARTED", "STEP_STARTED", "STEP_STARTED"]
    assert [e["stepName"] for e in second.events[1:3]] == ["pipeline", "candidates"]
    assert second.terminal["outcome"]["type"] == "success"
    names = {"iac-code.pipeline.v1", "iac-code.artifact.v1", "iac-code.tool-progress.v1"}
    customs = [(e["name"], e["value"]) for r in (first, second) for e in r.of("CUSTOM") if e["name"] in names]
    assert {n for n, _ in customs} == names
    ids = [(n, v["eventId"]) for n, v in customs]
    assert len(ids) == len(set(ids)), "no custom event is repeated across the two runs"
    sequences = [v["sequence"] for _, v in customs]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    kinds = [v["eventType"] for n, v in customs if n == "iac-code.pipeline.v1"]
    assert kinds[0] == "pipeline_started" and "candidate_selected" in kinds and kinds[-1] == "pipeline_completed"
    assert len(first.custom("iac-code.session.v1")) == 1 and len(second.custom("iac-code.session.v1")) == 1


def test_expired_interrupt_is_rejected_then_the_thread_moves_on(tmp_path, client):
    clock = FakeClock()
    settings = Settings(state_dir=str(tmp_path), allowed_cwd=("/tmp",), interrupt_ttl=60)
    with InProcessGateway(create_app(settings, store=FileStore(str(tmp_path / "state"), 3600, clock=clock))) as server:
        body, first = start_tool(client, server.url)
        interrupt = pending_interrupt(first)
        clock.advance(61)
        expired = resume(client, server.url, body["threadId"], [answer(interrupt["id"], {"decision": "allow_once"})])
        assert expired.terminal["code"] == "EXECUTION_EXPIRED"
        assert not expired.of("TOOL_CALL_RESULT")
        again = resume(client, server.url, body["threadId"], [answer(interrupt["id"], {"decision": "allow_once"})])
        assert again.terminal["code"] == "EXECUTION_EXPIRED"
        normal = post_sse(client, server.url + "/", run_body("next", thread=body["threadId"]))
        assert normal.status == 200 and normal.terminal["outcome"]["type"] == "success"


def test_interrupt_ttl_zero_never_expires(start_gateway, client):
    server = start_gateway("--interrupt-ttl", "0")
    _, first = start_tool(client, server.url)
    assert "expiresAt" not in pending_interrupt(first)


def test_resume_survives_a_gateway_restart(start_gateway, client):
    server = start_gateway()
    body, first = start_tool(client, server.url)
    interrupt = pending_interrupt(first)
    server.stop()
    restarted = start_gateway("--state-dir", server.state_dir)
    result = resume(client, restarted.url, body["threadId"], [answer(interrupt["id"], {"decision": "allow_once"})])
    assert result.terminal["outcome"]["type"] == "success" and result.of("TOOL_CALL_RESULT")


def test_state_file_stays_bounded_and_holds_no_text(start_gateway, client):
    server = start_gateway()
    thread = "bounded-thread"
    for index in range(300):
        assert post_sse(client, server.url + "/", run_body(f"turn-text-{index}", thread=thread)).status == 200
    state = thread_state(server.state_dir, thread)
    assert len(state["runs"]) == 256
    assert len(state["history"]) <= 16
    assert "turn-text" not in json.dumps(state)
