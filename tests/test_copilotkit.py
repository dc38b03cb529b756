"""CopilotKit 1.75 in front of the gateway as its docs wire an AG-UI agent: its own runtime (Node, tests/copilotkit/
runtime.mjs) with the HttpAgent it ships (@ag-ui/client 0.0.59) on the gateway's `POST /`, and its framework-free
frontend (@copilotkit/core) in headless Chromium. Chat, a frontend tool the agent calls, a human-in-the-loop tool,
shared state and stop, each with no CopilotKit error and no console warning: the client declares no
protocolVersion, so the gateway answers in what its 0.0.59 schema accepts."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
from playwright.sync_api import expect

from tests.support import ROOT, free_port

pytestmark = pytest.mark.browser
HERE = os.path.join(ROOT, "tests", "copilotkit")


@pytest.fixture(scope="module")
def runtime(gateway, tmp_path_factory):
    node = shutil.which("node")
    assert node, "Node.js is required for these tests (.ci/run installs it)"
    assert os.path.isdir(os.path.join(HERE, "node_modules", "@copilotkit", "runtime")), "run `npm ci` in tests/copilotkit"
    esbuild = os.path.join(HERE, "node_modules", ".bin", "esbuild")
    subprocess.run(
        [esbuild, "page.mjs", "--bundle", "--format=iife", "--outfile=dist/page.js", "--log-level=warning"],
        cwd=HERE,
        check=True,
        timeout=120,
    )
    port = free_port()
    env = {**os.environ, "COPILOTKIT_TELEMETRY_DISABLED": "true"}  # no network here, and none wanted
    log_path = tmp_path_factory.mktemp("copilotkit") / "runtime.log"  # a file, not a pipe nobody drains
    with open(log_path, "w") as log:
        proc = subprocess.Popen([node, "runtime.mjs", gateway.url, str(port)], cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while "ready\n" not in log_path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("CopilotKit's runtime did not start: " + log_path.read_text())
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def app(page, runtime):
    page.goto(runtime + "/")
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    return page


def clean(report: dict) -> dict:
    assert report["errors"] == [], report["errors"]
    assert report["console"] == [], report["console"]
    return report


def said(report: dict) -> list[str]:
    return [m["content"] for m in report["messages"] if m["role"] == "assistant" and m.get("content")]


def test_chat_and_shared_state(app):
    first = clean(app.evaluate("harness.send('hello copilot')"))
    assert said(first) == ["You said: hello copilot"]
    second = clean(app.evaluate("harness.send('/state blue')"))
    assert second["state"]["demo"]["lastMessage"] == "blue", second["state"]


def test_a_frontend_tool_the_agent_calls_runs_in_the_page_and_the_agent_reads_its_result(app):
    report = clean(app.evaluate("""harness.send('/frontend confirm {"really":true}')"""))
    assert report["calls"] == [{"name": "confirm", "args": {"really": True}}]
    results = [m for m in report["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in results] == ["confirmed"]
    assert any("confirmed" in text for text in said(report)), said(report)  # the follow-up run read the result


def test_a_human_in_the_loop_tool_waits_for_the_user(app):
    app.evaluate("""() => { window.pending = harness.send('/frontend approve {"plan":"vpc"}'); }""")
    deadline = time.monotonic() + 15
    while not app.evaluate("harness.waitingForDecision()"):
        assert time.monotonic() < deadline, "the tool was never called"
        time.sleep(0.05)
    app.evaluate("harness.decide('approved by the user')")
    report = clean(app.evaluate("window.pending"))
    assert report["calls"] == [{"name": "approve", "args": {"plan": "vpc"}}]
    assert any("approved by the user" in text for text in said(report)), said(report)


def test_stop_ends_the_run_on_the_gateway_and_a_new_page_joins_the_stopped_thread(app, gateway, runtime, browser):
    thread = app.evaluate("harness.start('/slow 30')")
    report = clean(app.evaluate("harness.stop()"))
    assert any(text.startswith("tick 1") for text in said(report)), said(report)
    gateway.wait_logged(f"run ended thread={thread} ")
    ended = next(line for line in gateway.logs().splitlines() if f"run ended thread={thread} " in line)
    assert "outcome=cancelled" in ended or "outcome=disconnected" in ended, ended
    context = browser.new_context()
    try:
        other = context.new_page()
        other.goto(runtime + "/")
        expect(other.locator("body[data-ready=true]")).to_have_count(1)
        joined = clean(other.evaluate("threadId => harness.join(threadId)", thread))
        assert [m["content"] for m in joined["messages"] if m["role"] == "user"] == ["/slow 30"], joined["messages"]
    finally:
        context.close()
