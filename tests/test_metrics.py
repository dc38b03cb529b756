"""Prometheus metrics: a scrape before and after a known set of runs moves every counter by exactly what happened,
and the text parses with the Prometheus client's own parser."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import websockets
from prometheus_client.parser import text_string_to_metric_families

from tests.support import free_port, pending_interrupt, post_sse, run_body


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def delta(before: dict, after: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_metrics_move_by_exactly_what_happened(start_gateway, client):
    port = free_port()
    server = start_gateway("--metrics-port", str(port))
    before = scrape(port)
    post_sse(client, server.url + "/", run_body("plain"))
    tool_body = run_body("/tool deploy {}")
    interrupted = post_sse(client, server.url + "/", tool_body)
    pending_interrupt(interrupted)
    post_sse(client, server.url + "/", run_body("/fail"))
    duplicate = run_body("again")
    post_sse(client, server.url + "/", duplicate)
    assert client.post(server.url + "/", json=duplicate).status_code == 409
    execution = interrupted.custom("iac-code.session.v1")[0]["executionId"]
    ros = tool_body["forwardedProps"]["iacCode"]["rosInvocationId"]
    cancel = client.post(
        f"{server.url}/extensions/iac-code/v1/executions/{execution}/cancel",
        json={"threadId": tool_body["threadId"], "rosInvocationId": ros},
    )
    assert cancel.json()["status"] == "cancelled"
    assert client.post(server.url + "/", json=run_body("x"), headers={"authorization": "Bearer nope"}).status_code == 200  # no auth here

    async def over_ws() -> None:
        async with websockets.connect(server.url.replace("http", "ws") + "/ws") as ws:
            await ws.send(json.dumps(run_body("ws")))
            while json.loads(await ws.recv())["type"] != "RUN_FINISHED":
                pass

    asyncio.run(over_ws())
    deadline = time.monotonic() + 5
    while scrape(port).get(("agui_runs_in_flight", ()), 1) != 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    after = scrape(port)
    assert delta(before, after, "agui_runs_started_total", transport="sse", agent="default") == 5
    assert delta(before, after, "agui_runs_started_total", transport="ws", agent="default") == 1
    assert delta(before, after, "agui_runs_ended_total", transport="sse", outcome="completed", agent="default") == 3
    assert delta(before, after, "agui_runs_ended_total", transport="sse", outcome="interrupted", agent="default") == 1
    assert delta(before, after, "agui_runs_ended_total", transport="sse", outcome="A2A_EXECUTION_FAILED", agent="default") == 1
    assert delta(before, after, "agui_runs_ended_total", transport="ws", outcome="completed", agent="default") == 1
    assert delta(before, after, "agui_runs_refused_total", transport="sse", code="DUPLICATE_RUN_ID") == 1
    assert delta(before, after, "agui_cancels_total", origin="extension") == 1
    assert delta(before, after, "agui_time_to_first_event_seconds_count", transport="sse") == 5
    assert delta(before, after, "agui_time_to_first_event_seconds_count", transport="ws") == 1
    assert delta(before, after, "agui_run_duration_seconds_count", outcome="failed", agent="default") == 1
    assert delta(before, after, "agui_store_operation_seconds_count", operation="admit") == 7
    assert delta(before, after, "agui_store_errors_total", operation="admit", kind="rejected") == 1
    assert delta(before, after, "agui_store_operation_seconds_count", operation="save_interrupt") == 1
    assert delta(before, after, "agui_events_sent_total", transport="sse") > 20
    assert delta(before, after, "agui_bytes_sent_total", transport="ws") > 0
    assert after[("agui_connections_open", (("kind", "sse"),))] == 0
    labels = {label for (_, pairs) in after for label, _ in pairs}
    assert not labels & {"thread", "threadId", "run", "runId", "user", "userId"}, labels


def test_metrics_are_off_unless_asked(start_gateway):
    server = start_gateway()
    assert httpx.get(server.url + "/metrics").status_code == 404
