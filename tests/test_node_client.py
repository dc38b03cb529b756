"""The reference TypeScript client (@ag-ui/client 1.0, HttpAgent with its event verification) against a real gateway."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid

import pytest

from tests.support import ROOT, ext

pytestmark = pytest.mark.node
NODE_DIR = os.path.join(ROOT, "tests", "node")


def drive(url: str, steps: list[dict], *, quiet: bool = True, **extra: object) -> dict:
    """Run `steps` through run_agent.mjs (`kind="ws"`: the gateway's WebSocketAgent, from transports/ui/).
    `quiet`: the client must log no warning or error (False where a run is meant to fail)."""
    node = shutil.which("node")
    assert node, "Node.js is required for these tests (.ci/run installs it)"
    assert os.path.isdir(os.path.join(NODE_DIR, "node_modules", "@ag-ui", "client")), "run `npm ci` in tests/node"
    library = os.path.join(NODE_DIR, ".lib")  # beside node_modules, so its bare imports resolve there
    os.makedirs(library, exist_ok=True)
    for name in ("ws-agent.js", "ws-mux.js"):
        shutil.copy(os.path.join(ROOT, "transports", "ui", name), library)
    config = {"url": url, "threadId": extra.pop("threadId", None) or "node-" + uuid.uuid4().hex[:10], "steps": steps, **extra}
    done = subprocess.run([node, "run_agent.mjs", json.dumps(config)], cwd=NODE_DIR, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    if quiet:
        assert report["warnings"] == [], report["warnings"]
        assert done.stderr == "", done.stderr
    return report


def check_run(run: dict) -> dict:
    assert run["error"] is None, run["error"]
    events = run["events"]
    started, terminal = events[0], events[-1]
    assert started["type"] == "RUN_STARTED"
    assert terminal["type"] in ("RUN_FINISHED", "RUN_ERROR")
    if terminal["type"] == "RUN_FINISHED":
        assert (terminal["threadId"], terminal["runId"]) == (started["threadId"], started["runId"])
    return terminal


@pytest.mark.parametrize("path", ["/", "/invocations"])
def test_plain_and_reasoning_runs_pass_verification(gateway, path):
    props = {"iacCode": ext(thinking={"enabled": True})}
    report = drive(gateway.url + path, [{"message": "hello node", "forwardedProps": props}, {"message": "again", "forwardedProps": props}])
    for run in report["runs"]:
        terminal = check_run(run)
        assert terminal["outcome"]["type"] == "success"
        assert any(e["type"] == "REASONING_START" for e in run["events"])
    assistant = [m["content"] for m in report["messages"] if m["role"] == "assistant"]
    assert assistant == ["You said: hello node", "You said: again"]


@pytest.mark.parametrize("path", ["/", "/invocations"])
def test_fail_run_ends_with_run_error(gateway, path):
    report = drive(gateway.url + path, [{"message": "/fail", "forwardedProps": {"iacCode": ext()}}])
    run = report["runs"][0]
    terminal = run["events"][-1]
    assert run["events"][0]["type"] == "RUN_STARTED" and terminal["type"] == "RUN_ERROR"
    assert terminal["code"] == ("A2A_EXECUTION_FAILED" if path == "/" else "AGENT_ERROR")


@pytest.mark.parametrize("path", ["/", "/invocations"])
def test_interrupt_and_resume_through_pending_interrupts(gateway, path):
    props = {"iacCode": ext()}
    report = drive(
        gateway.url + path,
        [
            {"message": '/tool deploy {"stack":"vpc"}', "forwardedProps": props},
            {"forwardedProps": props, "answer": {"status": "resolved", "payload": {"decision": "allow_once"}}},
        ],
    )
    first, second = report["runs"]
    interrupt = check_run(first)
    assert interrupt["outcome"]["type"] == "interrupt"
    assert first["pendingInterrupts"] == [interrupt["outcome"]["interrupts"][0]["id"]]
    finished = check_run(second)
    assert finished["outcome"]["type"] == "success"
    assert second["pendingInterrupts"] == []
    assert any(e["type"] == "TOOL_CALL_RESULT" for e in second["events"])


def test_pipeline_interrupt_and_resume(gateway):
    props = {"iacCode": ext()}
    report = drive(
        gateway.url + "/",
        [
            {"message": "/pipeline selling", "forwardedProps": props},
            {"forwardedProps": props, "answer": {"status": "resolved", "payload": {"candidateId": "cand-b"}}},
        ],
    )
    assert check_run(report["runs"][0])["outcome"]["type"] == "interrupt"
    assert check_run(report["runs"][1])["outcome"]["type"] == "success"


@pytest.mark.parametrize("path", ["/", "/invocations"])
def test_a_plain_http_agent_as_shipped_works_on_the_embedded_default(gateway, path):
    """A CopilotKit-style flow with @ag-ui/client's HttpAgent and no iacCode anywhere: turns, an interrupt, a resume."""
    report = drive(
        gateway.url + path,
        [
            {"message": "first turn"},
            {"message": "second turn"},
            {"message": "/tool deploy {}"},
            {"answer": {"status": "resolved", "payload": {"decision": "allow_once"}}},
            {"message": "after the tool"},
        ],
    )
    first, second, interrupted, resumed, after = (check_run(run) for run in report["runs"])
    assert first["outcome"]["type"] == second["outcome"]["type"] == "success"
    assert interrupted["outcome"]["type"] == "interrupt" and report["runs"][2]["pendingInterrupts"]
    assert resumed["outcome"]["type"] == "success" and report["runs"][3]["pendingInterrupts"] == []
    assert any(e["type"] == "TOOL_CALL_RESULT" for e in report["runs"][3]["events"])
    assert after["outcome"]["type"] == "success"
    replies = [m["content"] for m in report["messages"] if m["role"] == "assistant" and m["content"]]
    assert "You said: first turn" in replies and "You said: after the tool" in replies
