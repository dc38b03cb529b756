"""The browser page in headless Chromium (Debian's, driven by Playwright) against a real gateway."""

from __future__ import annotations

import json

import httpx
import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def open_ui(page, server, cwd="/tmp/agui-ui"):
    page.goto(server.url + "/ui/")
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    page.get_by_text("Settings").click()
    page.get_by_label("Workspace (cwd)").fill(cwd)
    page.get_by_label("Workspace (cwd)").dispatch_event("change")


def send(page, text):
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_plain_chat_streams_text_reasoning_and_usage(page, gateway):
    missing: list[str] = []
    page.on("response", lambda response: missing.append(response.url) if response.status == 404 else None)
    open_ui(page, gateway)
    page.get_by_label("Ask for reasoning (thinking)").check()
    send(page, "hello browser")
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: hello browser")
    expect(page.get_by_test_id("user").last).to_have_text("hello browser")
    reasoning = page.get_by_test_id("reasoning").last
    expect(reasoning).to_be_attached()
    reasoning.locator("summary").click()
    expect(reasoning).to_contain_text("The user wrote 13 characters")
    expect(page.get_by_test_id("usage")).to_contain_text("Tokens:")
    expect(page.get_by_test_id("status")).to_have_text("Done")
    assert missing == [], f"the page asked for files that do not exist: {missing}"


def test_a_token_count_belongs_to_its_own_run(page, gateway):
    open_ui(page, gateway)
    send(page, "one two three")
    expect(page.get_by_test_id("usage")).to_contain_text("Tokens:")
    send(page, "/tool deploy {}")  # a run without usage
    expect(page.get_by_test_id("interrupts")).to_be_visible()
    expect(page.get_by_test_id("usage")).to_have_text("")


def test_permission_allowed_runs_the_tool(page, gateway):
    open_ui(page, gateway)
    send(page, '/tool deploy {"stack":"vpc"}')
    form = page.get_by_test_id("interrupts")
    expect(form).to_be_visible()
    expect(form).to_contain_text("Run deploy")  # metadata.title
    expect(form).to_contain_text("Allow the agent to run deploy?")  # message
    expect(page.get_by_test_id("tool-call").last).to_contain_text('{"stack":"vpc"}')
    form.get_by_label("Allow once").check()
    page.get_by_test_id("answer").click()
    expect(page.get_by_test_id("tool-result").last).to_contain_text('"ok": true')
    expect(page.get_by_test_id("assistant").last).to_contain_text("ran successfully")
    expect(form).to_be_hidden()


def test_permission_denied_does_not_run_the_tool(page, gateway):
    open_ui(page, gateway)
    send(page, "/tool destroy {}")
    page.get_by_test_id("interrupts").get_by_label("Deny").check()
    page.get_by_test_id("answer").click()
    expect(page.get_by_test_id("assistant").last).to_contain_text("was not run")
    expect(page.get_by_test_id("tool-result")).to_have_count(0)


def test_question_with_free_text(page, gateway):
    open_ui(page, gateway)
    send(page, "/ask Which region?")
    form = page.get_by_test_id("interrupts")
    expect(form).to_contain_text("Which region?")
    expect(form.get_by_label("Yes")).to_be_visible()  # options from metadata
    form.get_by_label("Or write your answer").fill("eu-central-1")
    page.get_by_test_id("answer").click()
    expect(page.get_by_test_id("assistant").last).to_have_text("You answered: eu-central-1")


@pytest.fixture(scope="module")
def a2a_agent():
    from tests.a2a_agent import A2AAgentServer

    server = A2AAgentServer().start()
    yield server
    server.stop()


def test_a2a_selections_are_answered_by_option_or_free_text(page, start_gateway, a2a_agent):
    """The A2A agent's `{selectedId}` or `{freeText}` schema is one form: radio buttons and a text box."""
    server = start_gateway("--agent", "a2a+" + a2a_agent.url)
    open_ui(page, server)
    send(page, "question")
    form = page.get_by_test_id("interrupts")
    expect(form).to_contain_text("Which region?")
    form.get_by_label("Beijing").check()
    page.get_by_test_id("answer").click()
    expect(page.get_by_test_id("assistant").last).to_have_text("You chose: Beijing")
    send(page, "question")
    expect(form).to_contain_text("Which region?")
    form.get_by_label("Or write your answer").fill("Lisbon")
    page.get_by_test_id("answer").click()
    expect(page.get_by_test_id("assistant").last).to_have_text("You chose: Lisbon")
    sent = [c["message"]["parts"] for c in a2a_agent.calls if c["method"] == "SendStreamingMessage" and c["message"].get("parts")]
    assert [{"text": "Beijing"}] in sent and [{"text": "Lisbon"}] in sent


def test_pipeline_with_steps_progress_and_artifact(page, gateway):
    open_ui(page, gateway)
    send(page, "/pipeline selling")
    form = page.get_by_test_id("interrupts")
    expect(form).to_contain_text("Select a candidate")
    expect(form.locator("legend", has_text="Candidate").last).to_have_text("Candidate")  # not the raw key candidateId
    expect(form).not_to_contain_text("candidateId")
    expect(page.get_by_test_id("artifact")).to_contain_text("Candidate comparison")
    expect(page.get_by_test_id("pipeline")).to_contain_text("pipeline_started")
    expect(page.get_by_test_id("pipeline")).to_contain_text("pipelineName: selling")
    expect(page.get_by_test_id("pipeline")).not_to_contain_text("{")  # no raw JSON spilling out
    form.get_by_label("Multi-AZ VPC with NAT").check()
    page.get_by_test_id("answer").click()
    expect(page.get_by_test_id("assistant").last).to_have_text("Deployed cand-b.")
    steps = page.get_by_test_id("steps")
    for name in ("pipeline", "plan", "candidates", "deploy"):
        expect(steps.locator(f"li[data-step={name}]")).to_have_class("done")
    expect(page.get_by_test_id("pipeline")).to_contain_text("pipeline_completed")
    expect(page.locator("progress").first).to_be_attached()


@pytest.mark.parametrize("cwd", ["/tmp/agui-ui", ""], ids=["extension", "plain"])
def test_stop_button_stops_the_run(page, gateway, cwd):
    open_ui(page, gateway, cwd)
    send(page, "/slow 20")
    expect(page.get_by_test_id("assistant").last).to_contain_text("tick 1")
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_test_id("cancelled")).to_be_visible(timeout=5000)
    expect(page.get_by_test_id("status")).to_have_text("Cancelled")


@pytest.mark.parametrize("transport", ["ws", "sse"])
def test_messages_sent_during_a_run_are_queued_then_run_in_order(page, gateway, transport):
    open_ui(page, gateway, "")
    page.get_by_test_id(f"transport-{transport}").check()
    send(page, "/slow 2")
    expect(page.get_by_test_id("assistant").last).to_contain_text("tick 1")
    send(page, "second")
    send(page, "third")
    expect(page.get_by_test_id("queued").locator("li")).to_have_text(["second", "third"])
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: third", timeout=10000)
    expect(page.get_by_test_id("queued")).to_be_hidden()
    expect(page.get_by_test_id("user")).to_have_text(["/slow 2", "second", "third"])
    expect(page.get_by_test_id("assistant")).to_have_text(["tick 1 tick 2 ", "You said: second", "You said: third"])


def test_sse_mode_and_thread_kept_across_reload(page, gateway):
    open_ui(page, gateway)
    page.get_by_test_id("transport-sse").check()
    send(page, "/tool deploy {}")
    expect(page.get_by_test_id("interrupts")).to_be_visible()
    thread = page.get_by_test_id("thread-id").text_content()
    page.reload()
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    assert page.get_by_test_id("thread-id").text_content() == thread
    expect(page.get_by_test_id("interrupts")).to_be_visible()  # the pending interrupt survived the reload
    expect(page.get_by_test_id("user").last).to_have_text("/tool deploy {}")  # the transcript is rebuilt from events
    expect(page.get_by_test_id("tool-call").last).to_contain_text("Tool: deploy")
    stored = page.evaluate("JSON.parse(localStorage.getItem('agui.page.v1'))")
    assert stored["threadId"] == thread and stored["runs"][-1][-1]["type"] == "RUN_FINISHED"
    assert "<" not in json.dumps(stored), "structured data is kept, never HTML"
    page.get_by_test_id("transport-sse").check()
    page.get_by_test_id("interrupts").get_by_label("Allow once").check()
    page.get_by_test_id("answer").click()
    expect(page.get_by_test_id("tool-result").last).to_be_visible()


def test_auth_with_a_ticket(page, start_gateway):
    server = start_gateway(env={"AGUI_GATEWAY_AUTH_TOKEN": "ui-secret-token"})
    open_ui(page, server)
    send(page, "no token yet")
    expect(page.get_by_test_id("error").last).to_contain_text("WebSocket refused")
    page.get_by_label("Bearer token").fill("ui-secret-token")
    page.get_by_label("Bearer token").dispatch_event("change")
    send(page, "with a ticket")
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: with a ticket")
    assert "ui-secret-token" not in page.evaluate("JSON.stringify(Object.assign({}, localStorage))")
    assert httpx.get(server.url + "/ui/").status_code == 200


def test_reconnects_after_the_connection_drops(page, start_gateway):
    server = start_gateway()
    open_ui(page, server)
    send(page, "before the drop")
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: before the drop")
    server.stop()
    expect(page.get_by_test_id("status")).to_have_text("Reconnecting…")
    server.start()  # same port, same state directory
    expect(page.get_by_test_id("status")).to_have_text("Connected", timeout=20000)
    send(page, "after the drop")
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: after the drop")


def slow_answer(server, seconds: int) -> str:
    """The whole text `/slow <seconds>` streams, from a run read without interruption."""
    from tests.support import post_sse, run_body

    result = post_sse(httpx.Client(timeout=60), server.url + "/", run_body(f"/slow {seconds}"))
    return "".join(event["delta"] for event in result.of("TEXT_MESSAGE_CONTENT"))


@pytest.mark.parametrize("mode", ["ws", "sse"])
def test_a_reload_mid_run_follows_the_run_to_its_end_without_repeating_text(page, gateway, mode):
    expected = slow_answer(gateway, 5)
    open_ui(page, gateway)
    if mode == "sse":
        page.get_by_test_id("transport-sse").check()
    send(page, "/slow 5")
    assistant = page.get_by_test_id("assistant").last
    expect(assistant).not_to_have_text("", timeout=5000)
    page.wait_for_timeout(1200)  # a few deltas in
    page.reload()
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    expect(page.get_by_test_id("assistant").last).to_have_text(expected, timeout=20000)
    page.wait_for_function("JSON.parse(localStorage.getItem('agui.page.v1')).live === null")
    expect(page.get_by_test_id("status")).not_to_have_text("Disconnected")
    stored = page.evaluate("JSON.parse(localStorage.getItem('agui.page.v1'))")
    assert stored["live"] is None and stored["runs"][-1][-1]["outcome"] == {"type": "success"}


def test_a_dropped_websocket_attaches_again_and_the_answer_ends_complete(page, gateway):
    from tests.tcp_proxy import TcpProxy

    expected = slow_answer(gateway, 5)
    with TcpProxy(gateway.port) as proxy:
        open_ui(page, proxy)
        send(page, "/slow 5")
        assistant = page.get_by_test_id("assistant").last
        expect(assistant).not_to_have_text("", timeout=5000)
        page.wait_for_timeout(1200)
        proxy.cut()  # the server side of the socket is gone; the run goes on in its grace window
        expect(page.get_by_test_id("assistant").last).to_have_text(expected, timeout=20000)
        assert page.get_by_test_id("assistant").count() == 1


@pytest.mark.parametrize("mode", ["ws", "sse"])
def test_plain_mode_shows_shared_state_and_the_plan_live_and_runs_the_pages_own_tool(page, gateway, mode):
    """With no workspace the page sends plain AG-UI requests: its state goes back with each run (turns count up),
    /plan's steps are drawn from the state deltas, and /frontend calls the page's `show_notice`, which the page
    runs before sending its result in the next run."""
    open_ui(page, gateway, cwd="")
    if mode == "sse":
        page.get_by_test_id("transport-sse").check()
    send(page, "/plan 3")
    plan = page.get_by_test_id("plan").locator("li")
    expect(plan).to_have_count(3)
    expect(page.get_by_test_id("plan").locator("li[data-status=completed]")).to_have_count(3, timeout=10000)
    expect(plan.first).to_contain_text("Step 1")
    send(page, "/state first")
    expect(page.get_by_test_id("assistant").last).to_have_text("State updated: turn 1")
    send(page, "/state second")
    expect(page.get_by_test_id("assistant").last).to_have_text("State updated: turn 2")
    state = page.get_by_test_id("state")
    expect(state).to_contain_text('"turns":2')
    expect(state).to_contain_text('"lastMessage":"second"')
    send(page, '/frontend show_notice {"text":"hi there"}')
    expect(page.get_by_test_id("tool-result").last).to_have_text("Shown: hi there")
    expect(page.get_by_test_id("assistant").last).to_have_text("The show_notice tool returned: Shown: hi there")
    expect(page.get_by_test_id("status")).to_have_text("Done")
    expect(page.get_by_test_id("error")).to_have_count(0)


def test_a_pending_question_keeps_its_form_blocks_send_and_is_shown_once(page, gateway):
    open_ui(page, gateway)
    send(page, "/ask Which region?")
    form = page.get_by_test_id("interrupts")
    expect(form).to_be_visible()
    expect(page.get_by_test_id("send")).to_be_disabled()
    assert form.inner_text().count("Which region?") == 1, form.inner_text()
    page.get_by_label("Message").fill("a message typed while the question waits")
    page.get_by_label("Message").press("Enter")
    expect(form).to_be_visible()
    expect(page.get_by_test_id("error")).to_have_count(0)
    expect(page.get_by_label("Message")).to_have_value("a message typed while the question waits")
    form.get_by_label("Yes").check()
    page.get_by_test_id("answer").click()
    expect(page.get_by_test_id("assistant").last).to_contain_text("yes")
    expect(page.get_by_test_id("send")).to_be_enabled()


def test_on_load_the_page_joins_its_thread_and_shows_a_run_it_never_saw(page, gateway):
    """The stored transcript is gone (another device ran the thread, or storage was cleared): the page joins the
    thread on the gateway and shows its newest run."""
    open_ui(page, gateway)
    send(page, "seen elsewhere")
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: seen elsewhere")
    thread = page.evaluate("JSON.parse(localStorage.getItem('agui.page.v1')).threadId")
    page.evaluate(f"localStorage.setItem('agui.page.v1', JSON.stringify({{threadId: {json.dumps(thread)}, cwd: '/tmp/agui-ui'}}))")
    page.reload()
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: seen elsewhere")
    assert page.get_by_test_id("assistant").count() == 1
    page.reload()
    expect(page.get_by_test_id("assistant")).to_have_count(1)  # known now: not added twice


def test_the_thread_list_opens_a_thread_whole_after_storage_is_gone_renames_and_deletes(page, gateway):
    """Plain threads live on the gateway: a page with no stored transcript lists them, opens one with its whole
    conversation, renames one and deletes one."""
    open_ui(page, gateway, cwd="")
    send(page, "first thread, first turn")
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: first thread, first turn")
    send(page, "first thread, second turn")
    expect(page.get_by_test_id("assistant")).to_have_count(2)
    first = page.get_by_test_id("thread-id").text_content()
    page.get_by_role("button", name="New thread").click()
    send(page, "second thread")
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: second thread")
    second = page.get_by_test_id("thread-id").text_content()
    page.evaluate("localStorage.clear()")
    page.reload()
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    threads = page.get_by_test_id("threads")  # the shared gateway's other plain threads are listed too
    expect(threads.locator(f"li[data-thread-id='{second}'] .open")).to_have_text("second thread")
    expect(threads.locator(f"li[data-thread-id='{first}'] .open")).to_have_text("first thread, first turn")
    assert threads.locator("li").first.get_attribute("data-thread-id") == second  # newest first
    threads.locator(f"li[data-thread-id='{first}'] .open").click()
    expect(page.get_by_test_id("user")).to_have_text(["first thread, first turn", "first thread, second turn"])
    expect(page.get_by_test_id("assistant")).to_have_text(["You said: first thread, first turn", "You said: first thread, second turn"])
    assert page.get_by_test_id("thread-id").text_content() == first
    page.once("dialog", lambda dialog: dialog.accept("Renamed thread"))
    threads.locator(f"li[data-thread-id='{first}'] .rename").click()
    expect(threads.locator(f"li[data-thread-id='{first}'] .open")).to_have_text("Renamed thread")
    threads.locator(f"li[data-thread-id='{first}'] .delete").click()
    expect(threads.locator(f"li[data-thread-id='{first}']")).to_have_count(0)
    expect(threads.locator(f"li[data-thread-id='{second}']")).to_have_count(1)
    assert httpx.get(f"{gateway.url}/threads/{first}").status_code == 404


def test_the_page_offers_the_gateways_agents_and_a_thread_keeps_its_agent(page, start_gateway, tmp_path):
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[agents.assistant]\nbackend = "demo"\ndefault = true\n\n'
        '[agents.mirror]\nbackend = "tests.mirror_agent:MirrorAgent"\ndescription = "Shows what it was handed"\n'
    )
    server = start_gateway("--agents", str(agents))
    page.goto(server.url + "/ui/")
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    choice = page.get_by_test_id("agent")
    expect(choice.locator("option")).to_have_text(["assistant: The gateway's demo agent", "mirror: Shows what it was handed"])
    send(page, "hello default")
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: hello default")
    first = page.get_by_test_id("thread-id").text_content()
    choice.select_option("mirror")  # another agent: a thread of its own
    expect(page.get_by_test_id("thread-id")).not_to_have_text(first)
    send(page, "over the socket")
    expect(page.get_by_test_id("state")).to_contain_text("over the socket")  # what the mirror was handed
    page.get_by_test_id("transport-sse").check()
    send(page, "over SSE")
    expect(page.get_by_test_id("state")).to_contain_text("over SSE")
    page.locator(f"#threads li[data-thread-id='{first}'] button.open").click()  # the first thread: its agent again
    expect(choice).to_have_value("")
    send(page, "and again")
    expect(page.get_by_test_id("assistant").last).to_have_text("You said: and again")
