"""CopilotKit 1.75's framework-free frontend (@copilotkit/core) in headless Chromium, two ways: through its own
runtime (Node, tests/copilotkit/runtime.mjs) with the HttpAgent it ships (@ag-ui/client 0.0.59) on the gateway's
`POST /`, as its docs wire an AG-UI agent; and talking to the gateway alone, its CopilotKit endpoints
(`/copilotkit`), from a page on another origin (`--cors-origins`). Chat, a frontend tool the agent calls, a
human-in-the-loop tool, shared state, stop, and a second page joining the thread, each with no CopilotKit error and
no console warning: the client declares no protocolVersion, so the gateway answers in what its 0.0.59 schema
accepts."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import threading
import time
import urllib.parse

import pytest
from playwright.sync_api import expect

from tests.support import ROOT, Gateway, free_port

pytestmark = pytest.mark.browser
HERE = os.path.join(ROOT, "tests", "copilotkit")


def _build_page() -> None:
    esbuild = os.path.join(HERE, "node_modules", ".bin", "esbuild")
    subprocess.run(
        [esbuild, "page.mjs", "--bundle", "--format=iife", "--outfile=dist/page.js", "--log-level=warning"],
        cwd=HERE,
        check=True,
        timeout=120,
    )


class _Page(http.server.SimpleHTTPRequestHandler):
    """The test page, on an origin of its own (the gateway is another)."""

    def translate_path(self, path: str) -> str:
        name = {"/page.js": "dist/page.js"}.get(urllib.parse.urlsplit(path).path, "page.html")
        return os.path.join(HERE, name)

    def log_message(self, *args: object) -> None:
        return


def _node_runtime(gateway, log_path):
    node = shutil.which("node")
    assert node, "Node.js is required for these tests (.ci/run installs it)"
    assert os.path.isdir(os.path.join(HERE, "node_modules", "@copilotkit", "runtime")), "run `npm ci` in tests/copilotkit"
    port = free_port()
    env = {**os.environ, "COPILOTKIT_TELEMETRY_DISABLED": "true"}  # no network here, and none wanted
    with open(log_path, "w") as log:  # a file, not a pipe nobody drains
        proc = subprocess.Popen([node, "runtime.mjs", gateway.url, str(port)], cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while "ready\n" not in log_path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("CopilotKit's runtime did not start: " + log_path.read_text())
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}/"


@pytest.fixture(scope="module", params=["node-runtime", "gateway-alone", "gateway-single-route"])
def runtime(request, gateway, tmp_path_factory):
    """(the page's URL, the gateway its runs reach)."""
    _build_page()
    tmp = tmp_path_factory.mktemp("copilotkit")
    if request.param == "node-runtime":
        proc, url = _node_runtime(gateway, tmp / "runtime.log")
        yield url, gateway
        proc.terminate()
        proc.wait(10)
        return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    alone = Gateway(tmp, "--cors-origins", origin).start()
    single = "&transport=single" if request.param == "gateway-single-route" else ""
    yield f"{origin}/?runtime={alone.url}/copilotkit{single}", alone
    alone.stop()
    server.shutdown()


@pytest.fixture
def app(page, runtime):
    page.goto(runtime[0])
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


def test_stop_ends_the_run_on_the_gateway_and_a_new_page_joins_the_stopped_thread(app, runtime, browser):
    url, gateway = runtime
    thread = app.evaluate("harness.start('/slow 30')")
    report = clean(app.evaluate("harness.stop()"))
    assert any(text.startswith("tick 1") for text in said(report)), said(report)
    gateway.wait_logged(f"run ended thread={thread} ")
    ended = next(line for line in gateway.logs().splitlines() if f"run ended thread={thread} " in line)
    assert "outcome=cancelled" in ended or "outcome=disconnected" in ended, ended
    if "/copilotkit" in url:  # the gateway alone: CopilotKit's stop reached its stop endpoint, naming the run
        assert "outcome=cancelled" in ended and f"run stopped thread={thread} run=" in gateway.logs(), ended
    context = browser.new_context()
    try:
        other = context.new_page()
        other.goto(url)
        expect(other.locator("body[data-ready=true]")).to_have_count(1)
        joined = clean(other.evaluate("threadId => harness.join(threadId)", thread))
        assert [m["content"] for m in joined["messages"] if m["role"] == "user"] == ["/slow 30"], joined["messages"]
    finally:
        context.close()
