"""Cancel extension, client disconnects, and failing persistence at an interrupt (CONTRACT §4, §5)."""

from __future__ import annotations

import json
import threading
import time

import httpx

from gateway.agents.demo import DemoAgent
from gateway.settings import Settings
from server.app import create_app
from store import StoreUnavailable
from store.memory import MemoryStore
from tests.support import InProcessGateway, assert_well_formed_run, pending_interrupt, post_sse, run_body, session_of, thread_state
from tests.unit.clock import FakeClock

CANCEL = "/extensions/iac-code/v1/executions/{}/cancel"


def open_stream(url: str, body: dict):
    """Start a streaming run; return (client, response, iterator over SSE records)."""
    http = httpx.Client(timeout=30)
    response = http.send(http.build_request("POST", url + "/", json=body, headers={"accept": "text/event-stream"}), stream=True)
    assert response.status_code == 200
    records = (r for r in _records(response.iter_bytes()))
    return http, response, records


def _records(chunks):
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n\n" in buffer:
            record, buffer = buffer.split(b"\n\n", 1)
            if record.startswith(b"id: "):
                record = record.split(b"\n", 1)[1]
            if record.startswith(b"data: "):
                yield json.loads(record[6:])


def read_until(records, kind):
    seen = []
    for event in records:
        seen.append(event)
        if event["type"] == kind:
            return seen
    raise AssertionError(f"stream ended before {kind}: {seen}")


def test_cancel_a_running_execution(gateway, client):
    body = run_body("/slow 20")
    http, response, records = open_stream(gateway.url, body)
    head = read_until(records, "TEXT_MESSAGE_CONTENT")
    session = session_of(head)
    execution = session["executionId"]
    started = time.monotonic()
    cancelled = client.post(gateway.url + CANCEL.format(execution), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"})
    assert cancelled.status_code == 200
    assert cancelled.json() == {"executionId": execution, "status": "cancelled"}
    rest = list(records)
    assert time.monotonic() - started < 10, "ended by the cancel, long before the run's own end (20 s)"
    events = head + rest
    assert_well_formed_run(events)  # the text span was closed before the cancelled outcome
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "cancelled"}
    assert events[-2]["type"] == "TEXT_MESSAGE_END"
    http.close()
    again = client.post(gateway.url + CANCEL.format(execution), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"})
    assert again.status_code == 200 and again.json()["status"] == "already_terminal"
    # The thread is free again.
    assert post_sse(client, gateway.url + "/", run_body("after cancel", thread=body["threadId"])).status == 200


def test_cancel_an_execution_waiting_on_interrupts(gateway, client):
    body = run_body("/tool deploy {}")
    first = post_sse(client, gateway.url + "/", body)
    interrupt = pending_interrupt(first)
    execution = first.custom("iac-code.session.v1")[0]["executionId"]
    cancelled = client.post(gateway.url + CANCEL.format(execution), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"})
    assert cancelled.json() == {"executionId": execution, "status": "cancelled"}
    # Pending interrupts are cleared: a resume names an unknown interrupt, a new turn is accepted.
    late = post_sse(
        client,
        gateway.url + "/",
        run_body(
            None,
            thread=body["threadId"],
            resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}],
        ),
    )
    assert late.terminal["code"] == "UNKNOWN_INTERRUPT" and not late.of("TOOL_CALL_RESULT")
    assert post_sse(client, gateway.url + "/", run_body("new turn", thread=body["threadId"])).terminal["outcome"]["type"] == "success"


def test_cancel_with_a_wrong_identity_is_not_found(gateway, client):
    body = run_body("/tool deploy {}")
    first = post_sse(client, gateway.url + "/", body)
    execution = first.custom("iac-code.session.v1")[0]["executionId"]
    for target, payload in (
        (execution, {"threadId": "another-thread", "rosInvocationId": "inv-1"}),
        (execution, {"threadId": body["threadId"], "rosInvocationId": "someone-else"}),
        ("exec-unknown", {"threadId": body["threadId"], "rosInvocationId": "inv-1"}),
    ):
        response = client.post(gateway.url + CANCEL.format(target), json=payload)
        assert response.status_code == 404 and response.json()["error"]["code"] == "EXECUTION_NOT_FOUND"
    bad = client.post(gateway.url + CANCEL.format(execution), json={"threadId": body["threadId"]})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "rosInvocationId"
    wrong_type = client.post(gateway.url + CANCEL.format(execution), content=b"{}", headers={"content-type": "text/plain"})
    assert wrong_type.status_code == 415
    # The execution is still waiting: the failed cancels changed nothing.
    assert (
        client.post(gateway.url + CANCEL.format(execution), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"}).json()[
            "status"
        ]
        == "cancelled"
    )


def test_client_disconnect_cancels_the_backend_task(gateway, client):
    body = run_body("/slow 30")
    http, response, records = open_stream(gateway.url, body)
    read_until(records, "TEXT_MESSAGE_CONTENT")
    response.close()
    http.close()
    deadline = time.monotonic() + 5
    while True:
        retry = post_sse(client, gateway.url + "/", run_body("after disconnect", thread=body["threadId"]))
        if retry.status == 200:
            break
        assert retry.status == 409 and time.monotonic() < deadline
        time.sleep(0.1)
    state = thread_state(gateway.state_dir, body["threadId"])
    assert state["history"][0]["status"] == "cancelled"
    # The backend's task ended with the run, long before /slow 30 would: the run's own line says how long it lasted.
    ended = [line for line in gateway.logs().splitlines() if "run ended" in line and f"run={body['runId']} " in line]
    assert len(ended) == 1 and "outcome=disconnected" in ended[0], ended
    assert float(ended[0].split("seconds=")[1].split()[0]) < 10, ended[0]


def test_disconnect_after_an_interrupt_keeps_the_durable_state(gateway, client):
    body = run_body("/tool deploy {}")
    http, response, records = open_stream(gateway.url, body)
    events = read_until(records, "RUN_FINISHED")
    response.close()
    http.close()
    interrupt = events[-1]["outcome"]["interrupts"][0]
    answer = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
    result = post_sse(client, gateway.url + "/", run_body(None, thread=body["threadId"], resume=answer))
    assert result.terminal["outcome"]["type"] == "success" and result.of("TOOL_CALL_RESULT")


class InterruptWriteFails(MemoryStore):
    async def save_interrupt(self, *args, **kwargs):
        raise StoreUnavailable("disk full (on purpose)")


class RecordingDemo(DemoAgent):
    def __init__(self) -> None:
        super().__init__()
        self.cancelled: list[str] = []

    async def cancel_execution(self, execution_id, checkpoint):
        self.cancelled.append(execution_id)


def test_failed_interrupt_write_ends_the_run_and_cancels_the_backend(tmp_path):
    agent = RecordingDemo()
    settings = Settings(state_dir=str(tmp_path), allowed_cwd=("/tmp",))
    with InProcessGateway(create_app(settings, store=InterruptWriteFails(3600), agent=agent)) as server, httpx.Client() as http:
        body = run_body("/tool deploy {}")
        result = post_sse(http, server.url + "/", body)
        assert result.status == 200
        assert_well_formed_run(result.events)
        assert result.terminal["type"] == "RUN_ERROR" and result.terminal["code"] == "STATE_PERSISTENCE_FAILED"
        assert not result.of("RUN_FINISHED"), "nothing is announced as recoverable"
        execution = result.custom("iac-code.session.v1")[0]["executionId"]
        assert agent.cancelled == [execution]
        # The thread is not stuck and nothing is pending.
        after = post_sse(http, server.url + "/", run_body("hello", thread=body["threadId"]))
        assert after.terminal["outcome"]["type"] == "success"


def test_concurrent_admissions_on_one_thread_admit_exactly_one(gateway):
    body = run_body("/slow 2")
    results: list[int] = []

    def attempt(index: int) -> None:
        with httpx.Client(timeout=30) as http:
            results.append(post_sse(http, gateway.url + "/", {**body, "runId": f"{body['runId']}-{index}"}).status)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200] + [409] * 7


def test_a_killed_process_frees_the_thread_and_reports_the_execution_lost(start_gateway, client):
    server = start_gateway()
    body = run_body("/slow 30")
    http, response, records = open_stream(server.url, body)
    head = read_until(records, "TEXT_MESSAGE_CONTENT")
    execution = session_of(head)["executionId"]
    server.kill()
    http.close()
    restarted = start_gateway("--state-dir", server.state_dir)
    after = post_sse(client, restarted.url + "/", run_body("still there?", thread=body["threadId"]))
    assert after.status == 200 and after.terminal["outcome"]["type"] == "success"
    lost = client.post(restarted.url + CANCEL.format(execution), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"})
    assert lost.status_code == 409 and lost.json()["error"]["code"] == "EXECUTION_LOST"


class RefusesFirstResume(RecordingDemo):
    """A backend that fails before accepting the first answer it is given (as an unreachable agent would)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    async def run(self, request):
        if request.resume and not self.refused:
            self.refused += 1
            raise ConnectionError("agent unreachable (on purpose)")
        async for signal in super().run(request):
            yield signal


def test_pending_state_stays_until_the_backend_accepts_the_answer(tmp_path):
    agent = RefusesFirstResume()
    settings = Settings(state_dir=str(tmp_path), allowed_cwd=("/tmp",))
    with InProcessGateway(create_app(settings, store=MemoryStore(3600), agent=agent)) as server, httpx.Client() as http:
        body = run_body("/tool deploy {}")
        interrupt = pending_interrupt(post_sse(http, server.url + "/", body))
        entry = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "allow_once"}}]
        failed = post_sse(http, server.url + "/", run_body(None, thread=body["threadId"], resume=entry))
        assert failed.terminal["type"] == "RUN_ERROR" and failed.terminal["code"] == "A2A_UNAVAILABLE"
        # The interrupt is still pending: a normal turn is refused, the same answer is accepted now.
        refused = post_sse(http, server.url + "/", run_body("new turn", thread=body["threadId"]))
        assert refused.status == 409 and json.loads(refused.raw)["error"]["code"] == "RESUME_REQUIRED"
        ok = post_sse(http, server.url + "/", run_body(None, thread=body["threadId"], resume=entry))
        assert ok.terminal["outcome"]["type"] == "success" and ok.of("TOOL_CALL_RESULT")


def test_expiry_cancels_the_backend_task(tmp_path):
    agent = RecordingDemo()
    settings = Settings(state_dir=str(tmp_path), allowed_cwd=("/tmp",), interrupt_ttl=60)
    clock = FakeClock()
    with InProcessGateway(create_app(settings, store=MemoryStore(3600, clock=clock), agent=agent)) as server, httpx.Client() as http:
        body = run_body("/tool deploy {}")
        first = post_sse(http, server.url + "/", body)
        execution = first.custom("iac-code.session.v1")[0]["executionId"]
        clock.advance(61)
        expired = post_sse(
            http,
            server.url + "/",
            run_body(None, thread=body["threadId"], resume=[{"interruptId": pending_interrupt(first)["id"], "status": "cancelled"}]),
        )
        assert expired.terminal["code"] == "EXECUTION_EXPIRED"
        assert agent.cancelled == [execution]
