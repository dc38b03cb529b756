"""The A2A backend against a real A2A 1.0 agent (a2a-sdk) on loopback: every mapping, interrupts, ends, cancel."""

from __future__ import annotations

import json
import os

import pytest

from tests.a2a_agent import A2AAgentServer
from tests.support import assert_well_formed_run, pending_interrupt, post_sse, run_body, session_of
from tests.test_websocket import verify_with_node

pytestmark = pytest.mark.a2a


@pytest.fixture(scope="module")
def agent():
    server = A2AAgentServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway_a2a(agent, tmp_path_factory):
    from tests.support import Gateway

    server = Gateway(
        tmp_path_factory.mktemp("a2a"),
        "--agent",
        "a2a+" + agent.url,
        "--agent-token",
        "agent-secret-token",
        "--allowed-cwd",
        "/tmp",
        "--heartbeat-seconds",
        "0.5",
        "--a2a-follow-idle-seconds",
        "1",
    ).start()
    yield server
    server.stop()


def run(client, server, text, **kw):
    result = post_sse(client, server.url + "/", run_body(text, **kw))
    assert result.status == 200, result.raw
    assert_well_formed_run(result.events)
    verify_with_node([result.events])
    return result


def text_of(result):
    return "".join(e["delta"] for e in result.of("TEXT_MESSAGE_CONTENT"))


def last_message(agent):
    return [c for c in agent.calls if c["method"] == "SendStreamingMessage"][-1]["message"]


def test_plain_requests_need_a_default_workspace_and_the_error_names_the_flag(gateway_a2a, client):
    """A real backend works on real files: without --default-cwd the operator has chosen no workspace for plain
    AG-UI clients, and the refusal says how to choose one."""
    body = run_body("plain")
    body["forwardedProps"] = {}
    refused = client.post(gateway_a2a.url + "/", json=body)
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["code"] == "INVALID_INPUT" and error["field"] == "forwardedProps.iacCode"
    assert "--default-cwd" in error["message"] and "AGUI_GATEWAY_DEFAULT_CWD" in error["message"]


def test_a_plain_request_with_client_tools_is_refused_naming_the_agent(agent, client, tmp_path):
    """The A2A runtime takes no client tools: a plain request that declares some is refused before it starts,
    rather than run with its tools unused in silence."""
    from tests.support import Gateway

    server = Gateway(tmp_path, "--agent", "a2a+" + agent.url, "--default-cwd", "/tmp").start()
    calls = len(agent.calls)
    try:
        body = run_body("plain")
        body["forwardedProps"] = {}
        body["tools"] = [{"name": "confirm", "description": "Ask", "parameters": {"type": "object"}}]
        refused = client.post(server.url + "/", json=body)
        error = refused.json()["error"]
        assert refused.status_code == 400 and error["code"] == "INVALID_INPUT" and error["field"] == "tools"
        assert "a2a agent cannot call client tools" in error["message"], error
        assert len(agent.calls) == calls, "nothing reached the agent"
    finally:
        server.stop()


def test_plain_text_agent(gateway_a2a, agent, client):
    body = run_body("plain")
    calls_before = len(agent.rpc_headers)
    result = post_sse(client, gateway_a2a.url + "/", body)
    # What the agent received (the wire, not the client's defaults): every JSON-RPC call of the run carried the A2A
    # version and the operator's token.
    received = agent.rpc_headers[calls_before:]
    assert received and all(h == {"a2a-version": "1.0", "authorization": "Bearer agent-secret-token"} for h in received), received
    assert_well_formed_run(result.events)
    assert text_of(result) == "Hello from A2A" and result.terminal["outcome"] == {"type": "success"}
    assert len(result.of("TEXT_MESSAGE_START")) == 1, "deltas of one agent message form one AG-UI message"
    session = result.custom("iac-code.session.v1")[0]
    assert session["contextId"].startswith("agui-") and len(session["contextId"]) == 45 and session["taskId"]
    sent = last_message(agent)
    assert sent["role"] == "ROLE_USER" and sent["contextId"] == session["contextId"]
    assert sent["messageId"] == body["messages"][0]["id"]
    assert sent["metadata"]["iac_code"]["cwd"] == "/tmp/agui-tests/ws"
    verify_with_node([result.events])


def test_rich_runtime_signals(gateway_a2a, client):
    result = run(client, gateway_a2a, "rich")
    assert result.of("REASONING_START") and "Thinking about it." in "".join(e["delta"] for e in result.of("REASONING_MESSAGE_CONTENT"))
    assert [e["toolCallName"] for e in result.of("TOOL_CALL_START")] == ["ros_validate"]
    assert json.loads("".join(e["delta"] for e in result.of("TOOL_CALL_ARGS"))) == {"template": "vpc"}
    assert len(result.of("TOOL_CALL_RESULT")) == 1, "one result per call"
    progress = result.custom("iac-code.tool-progress.v1")
    assert progress and progress[0]["toolCallId"] == "tu-1" and progress[0]["progress"] == 0.5 and progress[0]["schemaVersion"] == 1
    assert result.terminal["outcome"] == {"type": "success"}, "input-required without a required input ends the turn"
    session = result.custom("iac-code.session.v1")
    assert len(session) == 1 and session[0]["sessionId"] == "sess-1"


def test_the_final_text_repeat_is_not_shown_twice(gateway_a2a, client):
    """The runtime's last WORKING status repeats the whole answer (assistantFinal, id `<task>-working`)."""
    result = run(client, gateway_a2a, "rich")
    assert text_of(result) == "Let me check. All good."
    task_id = session_of(result.events)["taskId"]
    assert {e["messageId"] for e in result.of("TEXT_MESSAGE_START")} <= {f"{task_id}-message", f"{task_id}-message.2"}
    only_final = run(client, gateway_a2a, "final-only")
    assert text_of(only_final) == "Only at the end.", "a final text with nothing streamed before is the answer"


def test_usage_is_summed_with_reported_totals_and_cached_tokens(gateway_a2a, client):
    result = run(client, gateway_a2a, "rich")
    assert result.terminal["usage"] == [
        {"provider": "dashscope", "model": "qwen", "inputTokens": 11, "outputTokens": 7, "totalTokens": 23, "cachedInputTokens": 4}
    ]
    failed = run(client, gateway_a2a, "usage-fail")
    assert failed.terminal["type"] == "RUN_ERROR" and failed.terminal["usage"] == [
        {"model": "qwen", "inputTokens": 5, "outputTokens": 1, "totalTokens": 6}
    ]


def test_artifacts_keep_every_field(gateway_a2a, client):
    artifact = run(client, gateway_a2a, "rich").custom("iac-code.artifact.v1")[0]
    assert artifact["schemaVersion"] == 1 and artifact["artifactId"] == "art-1" and artifact["name"] == "template.yaml"
    assert artifact["metadata"] == {
        "uri": "file:///ws/template.yaml",
        "mediaType": "text/yaml",
        "byteSize": 42,
        "sha256": "ab" * 32,
        "sourcePath": "template.yaml",
    }
    assert artifact["parts"][0]["url"] == "file:///ws/template.yaml" and artifact["parts"][0]["filename"] == "template.yaml"


def test_pipeline_steps_candidates_tools_and_customs(gateway_a2a, client):
    result = run(client, gateway_a2a, "pipeline")
    steps = [(e["type"], e["stepName"]) for e in result.events if e["type"].startswith("STEP_")]
    assert steps == [
        ("STEP_STARTED", "step:plan"),
        ("STEP_STARTED", "candidate:cand-a:generate"),
        ("STEP_STARTED", "candidate:cand-b:generate"),
        ("STEP_FINISHED", "candidate:cand-a:generate"),
        ("STEP_FINISHED", "candidate:cand-b:generate"),
        ("STEP_FINISHED", "step:plan"),
    ]
    texts = {}
    for event in result.of("TEXT_MESSAGE_CONTENT"):
        texts.setdefault(event["messageId"], []).append(event["delta"])
    assert {k: "".join(v) for k, v in texts.items()} == {
        "pipeline-message:prun-1:candidate_step:crun-a:cs-1": "A says hi. A is done.",
        "pipeline-message:prun-1:candidate_step:crun-b:cs-1": "B says hi. ",
    }, "two candidates write two messages, and an old sequence is dropped"
    assert [e["toolCallName"] for e in result.of("TOOL_CALL_START")] == ["bash"]
    assert json.loads(result.of("TOOL_CALL_ARGS")[0]["delta"]) == {"command": "pwd"}
    assert result.of("TOOL_CALL_RESULT")[0]["content"] == "/ws"
    assert "Weighing them." in "".join(e["delta"] for e in result.of("REASONING_MESSAGE_CONTENT"))
    customs = result.custom("iac-code.pipeline.v1")
    assert [v["eventType"] for v in customs] == ["pipeline_started", "candidate_started", "candidate_step_failed", "pipeline_completed"]
    started = customs[0]
    for key in ("schemaVersion", "pipelineRunId", "createdAt", "status", "sequence", "eventId"):
        assert key in started, key
    assert (started["sequence"], started["eventId"], started["schemaVersion"]) == (1, "evt-1", "1.0")
    assert customs[1]["taskId"] == session_of(result.events)["taskId"]
    assert session_of(result.events)["sessionId"] == "sess-p", "the session id is read from pipeline envelopes"
    assert result.terminal["usage"] == [{"provider": "dashscope", "model": "qwen", "inputTokens": 7, "outputTokens": 3, "totalTokens": 10}]


def test_text_from_a_task_snapshots_history(gateway_a2a, client):
    result = run(client, gateway_a2a, "history")
    assert text_of(result) == "From the history. Still history." and result.terminal["outcome"] == {"type": "success"}


def test_bare_results_without_a_wrapper_key(gateway_a2a, client):
    result = run(client, gateway_a2a, "bare")
    assert text_of(result) == "Hello from A2A" and result.terminal["outcome"] == {"type": "success"}


def test_a_stream_that_ends_early_is_followed_with_subscribe(gateway_a2a, agent, client):
    agent.rpc_methods.clear()
    result = run(client, gateway_a2a, "early")
    assert text_of(result) == "One, two, three." and result.terminal["outcome"] == {"type": "success"}
    assert agent.rpc_methods[:2] == ["SendStreamingMessage", "SubscribeToTask"]
    assert "CancelTask" not in agent.rpc_methods


def test_nothing_is_read_after_completed(gateway_a2a, client):
    import time

    started = time.monotonic()
    result = run(client, gateway_a2a, "after-completed")
    assert result.terminal["outcome"] == {"type": "success"} and text_of(result) == "Done.", "the late frame is not read"
    assert time.monotonic() - started < 8, "the gateway closes the reply at COMPLETED instead of waiting for its end"


def test_new_turn_requests_carry_the_runtime_fields(gateway_a2a, agent, client):
    import base64

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()
    body = run_body("plain")
    body["messages"][0]["content"] = [
        {"type": "text", "text": "plain"},
        {"type": "image", "source": {"type": "data", "value": png, "mimeType": "image/png"}},
    ]
    run(client, gateway_a2a, None, messages=body["messages"], thread=body["threadId"])
    request = [r for r in agent.requests if r["method"] == "SendStreamingMessage"][-1]
    assert request["params"]["configuration"] == {"acceptedOutputModes": ["text/plain"]}
    message = request["params"]["message"]
    assert "taskId" not in message and message["role"] == "ROLE_USER"
    assert message["parts"][1] == {"data": {"filename": "image-1.png", "bytes": png}, "mediaType": "image/png"}
    iac = message["metadata"]["iac_code"]
    assert iac["cleanupOnly"] is False and iac["rosInvocationId"] == "inv-1" and iac["preferredLanguage"] == "en"
    assert None not in iac.values()


def test_permission_interrupt_and_allow(gateway_a2a, agent, client):
    body = run_body("permission")
    first = post_sse(client, gateway_a2a.url + "/", body)
    assert_well_formed_run(first.events)
    interrupt = pending_interrupt(first)
    assert interrupt["id"] == "in-perm-1" and interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == "tu-9"
    assert interrupt["message"] == "Allow deploy?" and interrupt["metadata"]["toolName"] == "deploy"
    assert interrupt["metadata"]["title"] == "Deploy the stack" and interrupt["metadata"]["effect"] == "cloud_write"
    assert interrupt["responseSchema"]["properties"]["decision"]["enum"] == ["allow_once", "deny"]
    task_id = first.custom("iac-code.session.v1")[0]["taskId"]
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    resume = run_body(None, thread=body["threadId"], resume=entry)
    second = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry, run=resume["runId"])
    sent = last_message(agent)
    assert sent["taskId"] == task_id and sent["messageId"] == f"agui-resume-{resume['runId']}-in-perm-1"
    assert sent["parts"] == [
        {
            "data": {
                "schemaVersion": 1.0,
                "kind": "permission",
                "requestTaskId": task_id,
                "inputId": "in-perm-1",
                "toolUseId": "tu-9",
                "decision": "allow_once",
            },
            "mediaType": "application/json",
        }
    ]
    assert second.of("TOOL_CALL_RESULT")[0]["content"] == "deployed" and text_of(second) == "Deployed."
    assert second.terminal["outcome"] == {"type": "success"}, "the runtime repeating the answered inputId is no new interrupt"
    assert not [c for c in agent.calls if c["method"] == "invalid-answer"]
    again = post_sse(client, gateway_a2a.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert again.terminal["code"] == "RESUME_ALREADY_APPLIED"


def test_permission_cancelled_means_deny(gateway_a2a, agent, client):
    body = run_body("permission")
    post_sse(client, gateway_a2a.url + "/", body)
    result = run(client, gateway_a2a, None, thread=body["threadId"], resume=[{"interruptId": "in-perm-1", "status": "cancelled"}])
    assert last_message(agent)["parts"][0]["data"]["decision"] == "deny"
    assert text_of(result) == "Not deployed."


def test_an_answer_stream_that_ends_after_input_received_is_followed(gateway_a2a, agent, client):
    body = run_body("permission-early")
    post_sse(client, gateway_a2a.url + "/", body)
    agent.rpc_methods.clear()
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    result = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    assert result.terminal["outcome"] == {"type": "success"} and text_of(result) == "Deployed."
    assert agent.rpc_methods == ["GetTask", "SendStreamingMessage", "SubscribeToTask"]
    assert len(result.of("TOOL_CALL_RESULT")) == 1


def test_two_pending_permissions_are_answered_one_message_each(gateway_a2a, agent, client):
    body = run_body("two-permissions")
    first = post_sse(client, gateway_a2a.url + "/", body)
    interrupts = first.terminal["outcome"]["interrupts"]
    assert [i["id"] for i in interrupts] == ["perm-a", "perm-b"] and all(i["metadata"]["sideband"] for i in interrupts)
    agent.rpc_methods.clear()
    entries = [
        {"interruptId": "perm-a", "status": "resolved", "payload": {"decision": "allow_once"}},
        {"interruptId": "perm-b", "status": "cancelled"},
    ]
    result = run(client, gateway_a2a, None, thread=body["threadId"], resume=entries)
    assert result.terminal["outcome"] == {"type": "success"}, result.terminal
    assert text_of(result) == "Decisions: perm-a=allow_once, perm-b=deny."
    sent = [c["message"] for c in agent.calls if c["method"] == "SendMessage"][-2:]
    assert [m["messageId"] for m in sent] == ["agui-resume-perm-a", "agui-resume-perm-b"]
    assert all(len(m["parts"]) == 1 for m in sent), "one part per message, as the runtime requires"
    assert agent.rpc_methods[:3] == ["GetTask", "SendMessage", "SendMessage"] and "GetTask" in agent.rpc_methods[3:]
    assert not [c for c in agent.calls if c["method"] == "invalid-answer"]


def test_after_sideband_answers_the_events_no_stream_carried_are_recovered(gateway_a2a, agent, client):
    """SendMessage only acknowledges; the task's event from before the ack reaches the gateway through a second
    pipeline recovery from the cursor the answers were sent at (IAC_CODE_A2A_WIRE.md §4)."""
    body = run_body("two-permissions")
    post_sse(client, gateway_a2a.url + "/", body)
    agent.pipeline_state = "live"
    entries = [{"interruptId": i, "status": "resolved", "payload": {"decision": "allow_once"}} for i in ("perm-a", "perm-b")]
    try:
        result = run(client, gateway_a2a, None, thread=body["threadId"], resume=entries)
    finally:
        agent.pipeline_state = None
    assert result.terminal["outcome"] == {"type": "success"}, result.terminal
    recovered = [v for v in result.custom("iac-code.pipeline.v1") if v.get("data") == {"after": "answers"}]
    assert len(recovered) == 1, result.custom("iac-code.pipeline.v1")
    recoveries = [c["params"] for c in agent.calls if c["method"] == "pipeline-state"][-2:]
    assert recoveries[0]["afterSequence"] == recoveries[1]["afterSequence"] == "0", recoveries
    assert text_of(result) == "Decisions: perm-a=allow_once, perm-b=allow_once."


@pytest.mark.parametrize(
    "script, interrupt_id, payload, sent_text",
    [
        ("question", "ask-tu-q", {"selectedId": "cn-beijing"}, "Beijing"),
        ("question", "ask-tu-q", {"selectedId": "cn-shanghai"}, "cn-shanghai"),
        ("question", "ask-tu-q", {"freeText": "somewhere else"}, "somewhere else"),
        ("candidates", "in-c-1", {"selectedId": "c2"}, "Large"),
        (
            "confirm",
            "confirm-1",
            {"selectedId": "tweak", "parameterOverrides": {"Size": "xl"}},
            '{"action": "adjust", "parameter_overrides": {"Size": "xl"}}',
        ),
    ],
)
def test_question_selection_and_confirmation_answers_are_text(gateway_a2a, agent, client, script, interrupt_id, payload, sent_text):
    body = run_body(script)
    interrupt = pending_interrupt(post_sse(client, gateway_a2a.url + "/", body))
    assert interrupt["id"] == interrupt_id
    resume = run_body(None, thread=body["threadId"])
    entry = [{"interruptId": interrupt_id, "status": "resolved", "payload": payload}]
    result = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry, run=resume["runId"])
    sent = last_message(agent)
    assert sent["parts"] == [{"text": sent_text}] and sent["messageId"] == f"agui-resume-{resume['runId']}"
    assert text_of(result) == f"You chose: {sent_text}"


def test_selection_schemas_and_candidate_fields(gateway_a2a, client):
    question = pending_interrupt(post_sse(client, gateway_a2a.url + "/", run_body("question")))
    assert question["reason"] == "question" and question["metadata"]["allowFreeText"] is True
    assert {tuple(sorted(choice["properties"])) for choice in question["responseSchema"]["oneOf"]} == {("selectedId",), ("freeText",)}
    candidates = pending_interrupt(post_sse(client, gateway_a2a.url + "/", run_body("candidates")))
    assert list(candidates["responseSchema"]["properties"]) == ["selectedId"], "no free text unless the agent allows it"
    small = candidates["metadata"]["options"][0]
    assert (
        small["architectureDiagram"] == "graph TD; a-->b"
        and small["totalMonthlyCost"] == 10
        and small["costItems"] == [{"name": "ecs", "cost": 10}]
    )
    confirm = pending_interrupt(post_sse(client, gateway_a2a.url + "/", run_body("confirm")))
    assert [o["action"] for o in confirm["metadata"]["options"]] == ["deploy", "adjust"]


def test_a_cloud_resource_selection_answer(gateway_a2a, agent, client):
    body = run_body("resource")
    interrupt = pending_interrupt(post_sse(client, gateway_a2a.url + "/", body))
    assert interrupt["metadata"]["selector"]["id"] == "vpc"
    entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"value": "vpc-123", "label": "main"}}]
    run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    sent = last_message(agent)
    response = sent["metadata"]["iac_code"]["inputResponse"]
    assert response["status"] == "selected" and response["selectorId"] == "vpc" and response["value"] == "vpc-123"
    assert response["inputId"] == interrupt["id"] and response["requestTaskId"] == sent["taskId"]
    prefix, _, encoded = sent["parts"][0]["text"].partition(" ")
    assert prefix == "[iac-code:cloud_resource_selection]" and json.loads(encoded) == response


def test_a_dismissed_question_cancels_the_task(gateway_a2a, agent, client):
    body = run_body("question")
    first = post_sse(client, gateway_a2a.url + "/", body)
    task_id = session_of(first.events)["taskId"]
    result = run(client, gateway_a2a, None, thread=body["threadId"], resume=[{"interruptId": "ask-tu-q", "status": "cancelled"}])
    assert result.terminal["type"] == "RUN_ERROR" and result.terminal["code"] == "CANCELLED"
    assert {"method": "CancelTask", "taskId": task_id} in agent.calls
    assert not [r for r in agent.requests if (r["params"].get("message") or {}).get("taskId") == task_id], "no answer is sent"
    turn = post_sse(client, gateway_a2a.url + "/", run_body("plain", thread=body["threadId"]))
    assert turn.terminal["outcome"] == {"type": "success"}, "the dismissed interrupt no longer blocks the thread"


def test_pending_permissions_on_the_task(gateway_a2a, client):
    interrupt = pending_interrupt(post_sse(client, gateway_a2a.url + "/", run_body("pending")))
    assert interrupt["id"] == "in-p-2" and interrupt["toolCallId"] == "tu-2" and interrupt["message"] == "Delete?"


@pytest.mark.parametrize(
    "script, code",
    [
        ("fail", "A2A_EXECUTION_FAILED"),
        ("reject", "A2A_EXECUTION_FAILED"),
        ("auth", "A2A_EXECUTION_FAILED"),
        ("stuck", "A2A_EXECUTION_FAILED"),
        ("canceled", "CANCELLED"),
        ("foreign", "A2A_PROTOCOL_ERROR"),
    ],
)
def test_terminal_states_and_identity_violations(gateway_a2a, client, script, code):
    result = run(client, gateway_a2a, script)
    assert result.terminal["type"] == "RUN_ERROR" and result.terminal["code"] == code


def test_unreachable_agent(start_gateway, client):
    from tests.support import free_port

    server = start_gateway("--agent", f"a2a+http://127.0.0.1:{free_port()}/")
    result = run(client, server, "plain")
    assert result.terminal["code"] == "A2A_UNAVAILABLE"


def test_cancel_reaches_the_agent(gateway_a2a, agent, client):
    from tests.test_cancel_and_disconnect import CANCEL, open_stream, read_until

    body = run_body("slow")
    http, response, records = open_stream(gateway_a2a.url, body)
    head = read_until(records, "TEXT_MESSAGE_CONTENT")
    session = session_of(head)
    answer = client.post(
        gateway_a2a.url + CANCEL.format(session["executionId"]), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"}
    )
    assert answer.json()["status"] == "cancelled"
    events = head + list(records)
    assert events[-1]["outcome"] == {"type": "cancelled"}
    http.close()
    assert {"method": "CancelTask", "taskId": session["taskId"]} in agent.calls


def test_rejected_answer_stays_pending_and_survives_a_restart(agent, start_gateway, client):
    server = start_gateway("--agent", "a2a+" + agent.url)
    body = run_body("permission")
    post_sse(client, server.url + "/", body)
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    agent.agent.refuse_next_answer = 1
    refused = post_sse(client, server.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert refused.terminal["type"] == "RUN_ERROR" and refused.terminal["code"] == "A2A_UNAVAILABLE"
    assert agent.calls[-1]["method"] == "refused"
    # The interrupt is still pending: a normal turn is refused.
    assert (
        json.loads(post_sse(client, server.url + "/", run_body("new turn", thread=body["threadId"])).raw)["error"]["code"]
        == "RESUME_REQUIRED"
    )
    server.stop()
    restarted = start_gateway("--agent", "a2a+" + agent.url, "--state-dir", server.state_dir)
    accepted = post_sse(client, restarted.url + "/", run_body(None, thread=body["threadId"], resume=entry))
    assert accepted.terminal["outcome"] == {"type": "success"} and text_of(accepted) == "Deployed."


def test_secrets_reach_the_agent_for_that_request_only(gateway_a2a, agent, client):
    from tests.test_secrets import SECRETS, secret_ext

    run(client, gateway_a2a, "permission", iac=secret_ext())
    sent = last_message(agent)["metadata"]["iac_code"]
    assert sent["iac_code_api_key"] == SECRETS["llmApiKey"]
    assert sent["alibaba_cloud_access_key_secret"] == SECRETS["accessKeySecret"]
    assert sent["alibaba_cloud_region_id"] == "cn-hangzhou"
    for directory, _, files in os.walk(gateway_a2a.state_dir):
        for name in files:
            data = open(os.path.join(directory, name), "rb").read()
            assert not any(secret.encode() in data for secret in SECRETS.values())
    assert "agent-secret-token" not in gateway_a2a.logs()


async def test_a2a_over_websocket(gateway_a2a):
    import websockets

    from tests.test_websocket import run_over, ws_url

    async with websockets.connect(ws_url(gateway_a2a)) as ws:
        events = await run_over(ws, run_body("rich"))
    assert_well_formed_run(events)
    assert events[-1]["outcome"] == {"type": "success"}


def test_a_dropped_connection_is_unavailable(gateway_a2a, agent, client):
    agent.agent.refuse_next_answer = 1  # arms the proxy that drops the next stream
    result = run(client, gateway_a2a, "drop")
    assert result.terminal["code"] == "A2A_UNAVAILABLE"
    agent.agent.refuse_next_answer = 0


@pytest.fixture
def restore(agent):
    yield agent
    agent.restore_mode = "absent"
    agent.pipeline_state = None


def test_session_restore_before_a_resume(gateway_a2a, restore, client):
    agent = restore
    body = run_body("permission-session")
    first = post_sse(client, gateway_a2a.url + "/", body)
    task_id = first.custom("iac-code.session.v1")[0]["taskId"]
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    for mode, code in (("retryable", "A2A_UNAVAILABLE"), ("backup", "SESSION_BACKUP_NOT_READY"), ("unavailable", "A2A_UNAVAILABLE")):
        agent.restore_mode = mode
        refused = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
        assert refused.terminal["code"] == code, (mode, refused.terminal)
        assert "retry" in refused.terminal["message"].lower() or code == "A2A_UNAVAILABLE"
        agent.restore_mode = mode  # each mode answers once, then is ready: set it again for the next round
    restored = [c for c in agent.calls if c["method"] == "ensure-restored"][-1]["body"]
    assert restored == {"cwd": "/tmp/agui-tests/ws", "sessionId": "sess-r", "taskId": task_id}
    agent.restore_mode = "ready"
    ok = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)  # still pending after every refusal
    assert ok.terminal["outcome"] == {"type": "success"} and text_of(ok) == "Deployed."
    body = run_body("permission-session")
    post_sse(client, gateway_a2a.url + "/", body)
    agent.restore_mode = "missing"
    lost = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    assert lost.terminal["code"] == "EXECUTION_LOST"


def test_no_session_restore_without_a_session_id(gateway_a2a, restore, client):
    agent = restore
    agent.restore_mode = "missing"
    body = run_body("permission")
    post_sse(client, gateway_a2a.url + "/", body)
    before = len([c for c in agent.calls if c["method"] == "ensure-restored"])
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "deny"}}]
    result = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    assert result.terminal["outcome"] == {"type": "success"}
    assert len([c for c in agent.calls if c["method"] == "ensure-restored"]) == before, "never called with sessionId null"


def test_a_session_backup_not_ready_refusal_of_the_answer_is_retryable(gateway_a2a, agent, client):
    body = run_body("permission")
    post_sse(client, gateway_a2a.url + "/", body)
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    agent.agent.refuse_next_answer, agent.agent.refusal_data = 1, {"code": "SESSION_BACKUP_NOT_READY", "retryable": True}
    try:
        refused = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    finally:
        agent.agent.refusal_data = None
    assert refused.terminal["code"] == "SESSION_BACKUP_NOT_READY"
    assert run(client, gateway_a2a, None, thread=body["threadId"], resume=entry).terminal["outcome"] == {"type": "success"}


def test_pipeline_recovery_replays_missed_events_once(gateway_a2a, restore, client):
    agent = restore
    body = run_body("pipeline-ask")
    first = run(client, gateway_a2a, None, messages=body["messages"], thread=body["threadId"])
    assert pending_interrupt(first)["id"] == "in-pa-1"
    agent.pipeline_state = {
        "snapshot": {"schemaVersion": "1.1", "pipelineRunId": "prun-1", "status": "waiting_input", "lastSequence": 4},
        "events": [
            {"eventId": "pa-0", "sequence": 2, "eventType": "pipeline_warning"},  # at or below the cursor: shown before
            {"eventId": "pa-3", "sequence": 3, "eventType": "candidate_started", "candidate": {"id": "c1"}},
            {"eventId": "pa-3", "sequence": 3, "eventType": "candidate_started", "candidate": {"id": "c1"}},  # twice: once
            {"eventId": "pa-4", "sequence": 4, "eventType": "stack_progress", "data": {"percent": 40}},
        ],
    }
    entry = [{"interruptId": "in-pa-1", "status": "resolved", "payload": {"selectedId": "c1"}}]
    second = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    types = second.types()
    snapshot = second.of("ACTIVITY_SNAPSHOT")[0]
    assert snapshot["activityType"] == "iac-code.pipeline.v1" and snapshot["messageId"] == "pipeline:prun-1" and snapshot["replace"] is True
    assert snapshot["content"] == {"schemaVersion": 1, "pipelineRunId": "prun-1", "snapshot": agent.pipeline_state["snapshot"]}
    assert [v["eventId"] for v in second.custom("iac-code.pipeline.v1")] == ["pa-3", "pa-4"]
    assert types.index("ACTIVITY_SNAPSHOT") < types.index("TEXT_MESSAGE_START")
    params = [c for c in agent.calls if c["method"] == "pipeline-state"][-1]["params"]
    assert params["afterSequence"] == "2"
    assert text_of(second) == "You chose: Small"


def test_resume_preflight_checks_the_task_still_exists(gateway_a2a, agent, client):
    body = run_body("permission")
    post_sse(client, gateway_a2a.url + "/", body)
    agent.rpc_methods.clear()
    agent.task_store._impl.tasks.clear()  # the agent forgot its tasks (e.g. it restarted without persistence)
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    lost = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    assert lost.terminal["code"] == "EXECUTION_LOST"
    assert agent.rpc_methods == ["GetTask"], "no answer is sent for a task the agent no longer has"


def test_an_agent_frame_nested_too_deeply_is_a_protocol_error(gateway_a2a, client):
    result = post_sse(client, gateway_a2a.url + "/", run_body("deep-frame"))
    assert result.status == 200 and result.terminal["type"] == "RUN_ERROR"
    assert result.terminal["code"] == "A2A_PROTOCOL_ERROR" and "128" in result.terminal["message"]


def test_an_answer_refused_before_its_stream_as_plain_json_keeps_its_session_backup_code(gateway_a2a, agent, client):
    """a2a-sdk answers an error raised before a stream's first event as one plain JSON-RPC error body: the
    gateway reads it as the refusal it is (the data's code kept), not as a stream that ended before its first frame."""
    body = run_body("permission")
    post_sse(client, gateway_a2a.url + "/", body)
    entry = [{"interruptId": "in-perm-1", "status": "resolved", "payload": {"decision": "allow_once"}}]
    agent.handler.raise_before_stream = {"code": "SESSION_BACKUP_NOT_READY", "retryable": True}
    refused = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    assert agent.handler.raise_before_stream is None, "the real a2a-sdk handler raised"
    assert refused.terminal["code"] == "SESSION_BACKUP_NOT_READY", refused.terminal
    assert refused.custom("iac-code.session.v1") == [], "the session event says the agent took the answer: it did not"
    accepted = run(client, gateway_a2a, None, thread=body["threadId"], resume=entry)
    assert accepted.terminal["outcome"] == {"type": "success"} and len(accepted.custom("iac-code.session.v1")) == 1


def test_subscribe_to_an_unknown_task_answered_as_plain_json_keeps_the_agents_message(gateway_a2a, agent, client):
    """The stream ends early and SubscribeToTask finds no task: a2a-sdk's TaskNotFoundError (-32001) comes as
    plain JSON. It is read once (no retries for nothing), and the run fails with the agent's own message."""
    agent.rpc_methods.clear()
    agent.handler.forget_on_subscribe = True
    try:
        result = run(client, gateway_a2a, "early")
    finally:
        agent.handler.forget_on_subscribe = False
    assert agent.rpc_methods.count("SubscribeToTask") == 1, agent.rpc_methods
    assert result.terminal["type"] == "RUN_ERROR" and result.terminal["code"] == "A2A_EXECUTION_FAILED", result.terminal
    assert "not found" in result.terminal["message"].lower(), result.terminal["message"]
