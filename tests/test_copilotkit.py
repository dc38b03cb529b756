"""CopilotKit 1.75's framework-free frontend (@copilotkit/core) in headless Chromium, two ways: through its own
runtime (Node, tests/copilotkit/runtime.mjs) with the HttpAgent it ships (@ag-ui/client 0.0.59) on the gateway's
`POST /`, as its docs wire an AG-UI agent; and talking to the gateway alone, its CopilotKit endpoints
(`/copilotkit`), from a page on another origin (`--cors-origins`). Chat, a frontend tool the agent calls, a
human-in-the-loop tool, shared state, stop, and a second page joining the thread, each with no CopilotKit error and
no console warning: the client declares no protocolVersion, so the gateway answers in what its 0.0.59 schema
accepts. Then the gateway as a CopilotKit app's whole backend: two agents from its `/info` (the demo agent and a
Pydantic AI agent behind it), each used from the page; a reload after the gateway restarted on its file store, and a
page on a second replica sharing Redis, each showing the whole conversation and going on with it."""

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

from tests.support import ROOT, Gateway, RedisServer, free_port

pytestmark = pytest.mark.browser
HERE = os.path.join(ROOT, "tests", "copilotkit")


def _build_page() -> None:
    """Both test pages, bundled with esbuild from the npm registry's packages: the framework-free core's, and the
    React provider's (JSX, React in its production build, CopilotKit's fonts left out)."""
    esbuild = os.path.join(HERE, "node_modules", ".bin", "esbuild")
    common = ["--bundle", "--format=iife", "--log-level=warning"]
    subprocess.run([esbuild, "page.mjs", *common, "--outfile=dist/page.js"], cwd=HERE, check=True, timeout=120)
    react = ["--jsx=automatic", "--minify", "--define:process.env.NODE_ENV='production'"]
    fonts = [f"--loader:.{kind}=empty" for kind in ("woff2", "woff", "ttf")]
    subprocess.run([esbuild, "react-page.jsx", *common, *react, *fonts, "--outfile=dist/react.js"], cwd=HERE, check=True, timeout=120)


class _Page(http.server.SimpleHTTPRequestHandler):
    """The test page, on an origin of its own (the gateway is another)."""

    def translate_path(self, path: str) -> str:
        served = {"/page.js": "dist/page.js", "/react.js": "dist/react.js", "/react": "react.html"}
        name = served.get(urllib.parse.urlsplit(path).path, "page.html")
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


@pytest.fixture(scope="module")
def page_origin():
    """The test page, served on an origin of its own."""
    _build_page()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def agents_file(tmp_path_factory):
    """Two agents: the demo agent (`default`, the id CopilotKit uses when an app names none) and a Pydantic AI agent."""
    from tests.pydantic_agent import PydanticAIServer

    helper = PydanticAIServer().start()
    path = tmp_path_factory.mktemp("agents") / "agents.toml"
    path.write_text(
        '[agents.default]\nbackend = "demo"\ndefault = true\ndescription = "The demo agent"\n\n'
        f'[agents.helper]\nbackend = "agui+{helper.url}"\ndescription = "A Pydantic AI agent"\n'
    )
    yield str(path)
    helper.stop()


def opened(browser, url: str):
    """A fresh page (a reload, another device) on the app, ready."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(url)
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    return context, page


def test_two_agents_from_info_each_used_then_a_restart_and_a_second_replica_show_the_conversation(
    browser, page_origin, agents_file, tmp_path
):
    redis = RedisServer(tmp_path).start()
    shared = ("--agents", agents_file, "--cors-origins", page_origin, "--store", redis.url)
    first = Gateway(tmp_path, "--agents", agents_file, "--cors-origins", page_origin).start()
    replicas = [Gateway(tmp_path, *shared).start() for _ in range(2)]
    contexts = []
    try:
        # The file store: two agents, each used, then the gateway restarts and a reloaded page has it all.
        context, page = opened(browser, f"{page_origin}/?runtime={first.url}/copilotkit")
        contexts.append(context)
        assert page.evaluate("harness.agents()") == ["default", "helper"]
        assert said(clean(page.evaluate("harness.send('hello demo')"))) == ["You said: hello demo"]
        helped = clean(page.evaluate("harness.send('/tool', 'helper')"))
        assert any("found 3 vpc" in text for text in said(helped)), said(helped)
        threads = {agent: page.evaluate("agent => harness.threadOf(agent)", agent) for agent in ("default", "helper")}
        first.stop()
        first.start()  # the same port and state directory
        context, page = opened(browser, f"{page_origin}/?runtime={first.url}/copilotkit")
        contexts.append(context)
        for agent, expected in (("default", ["You said: hello demo"]), ("helper", None)):
            joined = clean(page.evaluate("([thread, agent]) => harness.join(thread, agent)", [threads[agent], agent]))
            assert [m["content"] for m in joined["messages"] if m["role"] == "user"] == ["hello demo" if agent == "default" else "/tool"]
            if expected is not None:
                assert said(joined) == expected
            else:
                assert any("found 3 vpc" in text for text in said(joined)), said(joined)
        going_on = clean(page.evaluate("harness.send('and again')"))
        assert said(going_on) == ["You said: hello demo", "You said: and again"]
        # Two replicas on one Redis: a page on each; the second joins what the first said and goes on.
        context, one = opened(browser, f"{page_origin}/?runtime={replicas[0].url}/copilotkit")
        contexts.append(context)
        clean(one.evaluate("harness.send('on replica one', 'helper')"))
        thread = one.evaluate("harness.threadOf('helper')")
        context, two = opened(browser, f"{page_origin}/?runtime={replicas[1].url}/copilotkit&transport=single")
        contexts.append(context)
        joined = clean(two.evaluate("thread => harness.join(thread, 'helper')", thread))
        assert [m["content"] for m in joined["messages"] if m["role"] == "user"] == ["on replica one"]
        went_on = clean(two.evaluate("harness.send('on replica two', 'helper')"))
        assert [m["content"] for m in went_on["messages"] if m["role"] == "user"] == ["on replica one", "on replica two"]
        assert f"run started thread={thread} " in replicas[1].logs() and "agent=helper" in replicas[1].logs()
    finally:
        for context in contexts:
            context.close()
        for gateway in (first, *replicas):
            gateway.stop()
        redis.stop()


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


def test_the_react_provider_shows_the_conversation_and_state_and_a_reload_shows_it_again(browser, page_origin, tmp_path):
    """CopilotKit's React provider (`CopilotKitProvider`, `useAgent`, `useFrontendTool`) with the gateway as its runtime:
    what the page renders is what the user sees."""
    alone = Gateway(tmp_path, "--cors-origins", page_origin).start()
    contexts = []
    try:
        for transport in ("", "&transport=single"):
            context, page = opened(browser, f"{page_origin}/react?runtime={alone.url}/copilotkit{transport}")
            contexts.append(context)
            page.evaluate("harness.send('hello react')")
            expect(page.locator("#messages li[data-role=assistant]")).to_have_text(["You said: hello react"])
            page.evaluate("""harness.send('/frontend confirm {"really":true}')""")
            assert page.evaluate("harness.calls()") == [{"name": "confirm", "args": {"really": True}}]
            expect(page.locator("#messages li[data-role=tool]")).to_have_text(["confirmed"])
            page.evaluate("harness.setState({demo: {turns: 41}})")  # set from the page: the agent counts on from it
            page.evaluate("harness.send('/state teal')")
            expect(page.locator("#messages li[data-role=assistant]").last).to_have_text("State updated: turn 42")
            expect(page.locator("#state")).to_contain_text('"lastMessage":"teal"')
            thread = page.evaluate("harness.threadId()")
            assert page.evaluate("harness.problems()") == []
            context, reloaded = opened(browser, f"{page_origin}/react?runtime={alone.url}/copilotkit{transport}")
            contexts.append(context)
            reloaded.evaluate("thread => harness.join(thread)", thread)
            users = ["hello react", '/frontend confirm {"really":true}', "/state teal"]
            expect(reloaded.locator("#messages li[data-role=user]")).to_have_text(users)
            expect(reloaded.locator("#state")).to_contain_text('"lastMessage":"teal"')
            assert reloaded.evaluate("harness.problems()") == []
    finally:
        for context in contexts:
            context.close()
        alone.stop()
