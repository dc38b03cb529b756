"""WebSocketAgent (transports/ui/ws-agent.js), an @ag-ui/client agent over the multiplexed WebSocket, run by Node
with the pinned @ag-ui/client: the same events as HttpAgent on the same inputs, interrupts and resume, cancel
by abortRun, a dropped connection made invisible, and tickets."""

from __future__ import annotations

import httpx
import pytest

from tests.reattach_client import events_url, open_get
from tests.support import ext
from tests.test_node_client import check_run, drive

pytestmark = pytest.mark.node
IAC = {"iacCode": ext()}


def shape(run: dict) -> list[tuple[str, object]]:
    return [(event["type"], event.get("delta")) for event in run["events"]]


def test_plain_runs_match_http_agent(gateway):
    steps = [{"message": "hello there", "forwardedProps": IAC}, {"message": "and again", "forwardedProps": IAC}]
    over_ws, over_http = drive(gateway.url, steps, kind="ws"), drive(gateway.url, steps)
    for ws_run, http_run in zip(over_ws["runs"], over_http["runs"], strict=True):
        assert check_run(ws_run)["outcome"] == {"type": "success"}
        assert shape(ws_run) == shape(http_run)
    assert over_ws["messages"] == over_http["messages"]


def test_interrupt_and_resume_through_pending_interrupts(gateway):
    steps = [
        {"message": "/tool deploy {}", "forwardedProps": IAC},
        {"answer": {"status": "resolved", "payload": {"decision": "allow_once"}}, "forwardedProps": IAC},
    ]
    over_ws, over_http = drive(gateway.url, steps, kind="ws"), drive(gateway.url, steps)
    assert check_run(over_ws["runs"][0])["outcome"]["type"] == "interrupt"
    assert over_ws["runs"][0]["pendingInterrupts"] and over_ws["runs"][1]["pendingInterrupts"] == []
    assert check_run(over_ws["runs"][1])["outcome"] == {"type": "success"}
    assert [shape(run) for run in over_ws["runs"]] == [shape(run) for run in over_http["runs"]]


def test_abort_run_cancels_on_the_gateway(gateway):
    thread = "ws-agent-" + __import__("uuid").uuid4().hex[:8]
    report = drive(gateway.url, [{"message": "/slow 20", "forwardedProps": IAC, "abortAfter": 4}], kind="ws", threadId=thread)
    events = report["runs"][0]["events"]
    assert 4 <= len(events) < 10
    run_id = events[0]["runId"]
    status, replay = open_get(events_url(gateway.url, {"threadId": thread, "runId": run_id}, rosInvocationId="inv-1"))
    assert status == 200
    assert replay.rest()[-1][1]["outcome"] == {"type": "cancelled"}  # the gateway cancelled it, at once


def test_a_dropped_connection_is_invisible_to_the_app(gateway):
    from tests.tcp_proxy import TcpProxy

    with TcpProxy(gateway.port) as proxy:
        proxy.cut_after(b"tick 1 ")  # mid-run, once the first tick reached the app: the socket dies under the agent
        report = drive(proxy.url, [{"message": "/slow 3", "forwardedProps": IAC}], kind="ws")
        assert proxy.cuts == 1, "the proxy cut the agent's one socket"
    run = report["runs"][0]
    gateway.wait_logged(f"run {run['events'][0]['runId']}: its last follower left")  # the gateway saw the drop too
    assert check_run(run)["outcome"] == {"type": "success"}
    assert [e["delta"] for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["tick 1 ", "tick 2 ", "tick 3 "]


def test_a_token_is_exchanged_for_a_ticket(start_gateway):
    server = start_gateway(env={"AGUI_GATEWAY_AUTH_TOKEN": "agent-token"})
    report = drive(server.url, [{"message": "with a ticket", "forwardedProps": IAC}], kind="ws", token="agent-token")
    assert check_run(report["runs"][0])["outcome"] == {"type": "success"}
    assert httpx.get(server.url + "/ui/ws-agent.js").headers["content-type"].startswith(("text/javascript", "application/javascript"))


def test_ten_concurrent_runs_share_one_socket(start_gateway):
    from tests.support import free_port

    metrics = free_port()
    server = start_gateway("--metrics-port", str(metrics))
    report = drive(
        server.url,
        [{"message": "/slow 1", "forwardedProps": IAC}],
        kind="ws",
        parallel=10,
        metricsUrl=f"http://127.0.0.1:{metrics}/metrics",
    )
    assert [check_run(run)["outcome"] for run in report["runs"]] == [{"type": "success"}] * 10
    assert report["sockets"] == 1  # counted on the gateway while the shared socket is open


def test_a_bad_token_is_a_clear_error_not_a_reconnect_loop(start_gateway):
    server = start_gateway(env={"AGUI_GATEWAY_AUTH_TOKEN": "agent-token"})
    report = drive(server.url, [{"message": "refused", "forwardedProps": IAC}], kind="ws", token="expired-token", quiet=False)
    assert "ticket refused (401)" in report["runs"][0]["error"]
    assert report["warnings"] == ["error: Agent execution failed: Error: ticket refused (401)"]  # @ag-ui/client's own log
    assert server.logs().count("/ws/tickets") <= 2  # one refused ticket request, no loop behind it
