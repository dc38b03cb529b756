"""Differential: the same @ag-ui/client drives a real agent directly and through the gateway (HttpAgent over SSE, and
the gateway's WebSocketAgent), and the client's end state must be the same: every message with its fields (roles,
content, empty ones included, tool calls, tool call ids, encrypted values) and the state. The agents pick their own
ids (Pydantic AI's are random), so ids are compared by what they point at: each is named by the order in which the
client's messages first show it, and every reference to it must follow. Every request the gateway sends the agent
must pass @ag-ui/core 1.0's own RunAgentInput schema, and every event the client got through the gateway its
EventSchemas. The agents: ag-ui-langgraph (both of its interrupt styles), Pydantic AI's AG-UI adapter, and a
TypeScript agent that refuses what @ag-ui/core's schema refuses (tests/node/validating_agent.mjs); the pending
interrupts are compared whole."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import uuid
from typing import Any

import pytest

from tests.support import Gateway
from tests.test_node_client import NODE_DIR, drive

pytestmark = pytest.mark.node
CONFIRM = {"name": "confirm", "description": "Ask the user", "parameters": {"type": "object", "properties": {}}}
ID_FIELDS = ("id", "toolCallId", "parentMessageId")

LANGGRAPH_STEPS = [
    {"message": "hello graph"},
    {"message": "/tool"},
    {"message": "/client", "tools": [CONFIRM]},
    {"toolResult": "yes", "tools": [CONFIRM]},
    {"message": "/approve"},  # the package's older interrupt style: a CUSTOM event, answered in forwardedProps
    {"forwardedProps": {"command": {"resume": "yes"}}},
    {"message": "/write The quick brown fox jumps"},  # predictive state: PredictState, then the tool's streamed argument
    {"message": "/research vpc"},  # a subgraph's answer
    {"message": "and again"},
]
YES = {"status": "resolved", "payload": {"decision": "yes"}}
LANGGRAPH_OUTCOME_STEPS = [  # AG-UI 1.0's interrupt outcome, answered by `resume`
    {"message": "hello graph"},
    {"message": "/approve"},
    {"answer": YES},
    {"message": "/approve expiring"},  # an expiry of the agent's own: passed on, and none of the gateway's otherwise
    {"answer": YES},
    {"message": "/tool"},
]
TYPESCRIPT_STEPS = [  # the second turn is where a gateway that rebuilt the request failed such an agent
    {"message": "hello typescript"},
    {"message": "/tool", "tools": [CONFIRM]},
    {"toolResult": "yes", "tools": [CONFIRM]},
    {"message": "/think"},
    {"message": "what came back?"},  # the signature and every role, as the agent reads its history
]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")  # random ids, two spellings
PYDANTIC_STEPS = [
    {"message": "hello model"},
    {"message": "/think"},
    {"message": "/signed"},  # the signature must come back with the history: through the gateway too
    {"message": "/tool"},
    {"message": "/count"},
    {"message": "/client", "tools": [CONFIRM]},
    {"toolResult": "yes", "tools": [CONFIRM]},
]


@pytest.fixture(scope="module")
def langgraph_upstream():
    from tests.langgraph_agent import LangGraphServer

    server = LangGraphServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def langgraph_outcome_upstream():
    from tests.langgraph_agent import LangGraphServer

    server = LangGraphServer(emit_interrupt_outcome=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def typescript_upstream():
    from tests.typescript_agent import TypeScriptAgent

    server = TypeScriptAgent().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pydantic_upstream():
    from tests.pydantic_agent import PydanticAIServer

    server = PydanticAIServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def agents(langgraph_upstream, langgraph_outcome_upstream, pydantic_upstream, typescript_upstream, tmp_path_factory):
    """Each agent, directly and behind a gateway of its own."""
    started = {}
    upstreams = (
        ("langgraph", langgraph_upstream),
        ("langgraph-outcome", langgraph_outcome_upstream),
        ("pydantic", pydantic_upstream),
        ("typescript", typescript_upstream),
    )
    for name, upstream in upstreams:
        gateway = Gateway(tmp_path_factory.mktemp(name), "--agent", "agui+" + upstream.url).start()
        started[name] = (upstream, gateway)
    yield started
    for _, gateway in started.values():
        gateway.stop()


def canonical(end_state: dict[str, Any]) -> dict[str, Any]:
    """The end state with each id named by the order the messages first show it (`#1`, `#2`, ...), wherever it
    stands: a message's id, a tool call's, a tool message's toolCallId, and any string equal to one."""
    names: dict[str, str] = {}

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ID_FIELDS and isinstance(item, str):
                    names.setdefault(item, f"#{len(names) + 1}")
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)

    def rename(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: rename(item) for key, item in value.items()}
        if isinstance(value, list):
            return [rename(item) for item in value]
        return names.get(value, value) if isinstance(value, str) else value

    collect(end_state["messages"])
    return rename(end_state)


def interrupts_of(run: dict[str, Any]) -> str:
    """A run's pending interrupts as the client holds them, whole; the ids LangGraph draws at random (its interrupt
    and task ids) named by their place, since the direct and the gateway's runs are two executions."""
    text = json.dumps(run["interrupts"], sort_keys=True)
    for index, found in enumerate(dict.fromkeys(UUID.findall(text))):
        text = text.replace(found, f"<id {index}>")
    return text


def check_schemas(requests: list[Any], events: list[Any], core: str = "1.0") -> None:
    node = shutil.which("node")
    assert node and os.path.isdir(os.path.join(NODE_DIR, "node_modules", "ag-ui-core-0059")), "run `npm ci` in tests/node"
    done = subprocess.run(
        [node, "check_schemas.mjs"],
        cwd=NODE_DIR,
        input=json.dumps({"requests": requests, "events": events, "core": core}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"], result["failures"][:3]


@pytest.mark.parametrize("kind", ["http", "ws"])
@pytest.mark.parametrize(
    ("name", "steps"),
    [
        ("langgraph", LANGGRAPH_STEPS),
        ("langgraph-outcome", LANGGRAPH_OUTCOME_STEPS),
        ("pydantic", PYDANTIC_STEPS),
        ("typescript", TYPESCRIPT_STEPS),
    ],
)
def test_the_clients_end_state_through_the_gateway_is_the_direct_one(agents, name, steps, kind):
    upstream, gateway = agents[name]
    initial = {"turns": 4} if name == "pydantic" else {}
    direct = drive(upstream.url, steps, stableIds=True, initialState=initial)
    sent_before = len(upstream.requests)
    # Then a page reloaded: a new client joins the thread and must end where the client that stayed did.
    through = drive(gateway.url, [*steps, {"connect": True, "fresh": True}], kind=kind, stableIds=True, initialState=initial)
    assert [run["error"] for run in through["runs"]] == [None] * (len(steps) + 1)
    assert through["warnings"] == []
    assert canonical(through["stayed"]) == canonical(direct["endState"])
    assert through["endState"] == through["stayed"], "the joining client holds the same messages (ids too) and state"
    assert through["runs"][-1]["interrupts"] == through["runs"][-2]["interrupts"]
    assert [e["type"] for e in through["runs"][-1]["events"]][:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    for ours, theirs in zip(through["runs"], direct["runs"], strict=False):
        assert len(ours["pendingToolCallIds"]) == len(theirs["pendingToolCallIds"])
        assert len(ours["pendingInterrupts"]) == len(theirs["pendingInterrupts"])
        assert interrupts_of(ours) == interrupts_of(theirs)  # exactly as the agent sent them: no field of ours
    forwarded = [json.loads(body) for body in upstream.requests[sent_before:]]
    assert len(forwarded) == len(steps)
    assert all(body.get("protocolVersion") for body in forwarded), "the client's declared version goes on"
    check_schemas(forwarded, [event for run in through["runs"] for event in run["events"]])
    through["endState"] = through["stayed"]
    if name == "langgraph":  # the features the steps are for did happen
        events = [event for run in through["runs"] for event in run["events"]]
        assert any(e["type"] == "CUSTOM" and e["name"] == "PredictState" for e in events)
        assert sum(e["type"] == "TOOL_CALL_ARGS" for e in events) > 3, "arguments streamed in pieces"
        assert through["endState"]["state"]["document"] == "The quick brown fox jumps"
        said = [m["content"] for m in through["endState"]["messages"] if m["role"] == "assistant" and m.get("content")]
        assert "Research on vpc: three sources agree. " in said or "Research on vpc: three sources agree." in said, said
    if name == "langgraph-outcome":
        asked = [run["interrupts"] for run in through["runs"] if run["interrupts"]]
        assert [[i.get("expiresAt") for i in pending] for pending in asked] == [[None], ["2099-01-01T00:00:00Z"]]
        said = [m["content"] for m in through["endState"]["messages"] if m["role"] == "assistant" and m.get("content")]
        assert said.count('Approved: {"decision": "yes"}') == 2, said
    if name == "typescript":
        assert upstream.failures == [], upstream.failures[:1]  # its own schema accepted every request, both ways
        said = [m["content"] for m in through["endState"]["messages"] if m["role"] == "assistant" and m.get("content")]
        history = "user,assistant,user,assistant,tool,assistant,user,reasoning,assistant,user"  # the tool call's parent too
        assert said[-1] == f"You said: what came back? [history {history}; signed reasoning] ", said
    if name == "pydantic":
        signed = next(m for m in through["endState"]["messages"] if m["role"] == "reasoning")
        assert "sig-visible" in signed.get("encryptedValue", ""), signed
        said = [m["content"] for m in through["endState"]["messages"] if m["role"] == "assistant" and m.get("content")]
        assert "signatures ['sig-visible']" in said, said


@pytest.mark.redis
def test_the_end_state_is_the_direct_one_across_two_replicas_and_a_reattach_mid_run(langgraph_upstream, tmp_path):
    """Two replicas on one Redis: HttpAgent turns alternate between them; then the WebSocketAgent's socket is cut in
    the middle of a streamed answer and it attaches again. The client ends where the direct one does."""
    from tests.support import RedisServer
    from tests.tcp_proxy import TcpProxy

    steps = [{"message": "hello graph"}, {"message": "/slow 15"}, {"message": "/tool"}, {"message": "and again"}]
    direct = drive(langgraph_upstream.url, steps, stableIds=True)
    redis_server = RedisServer(tmp_path).start()
    shared = ("--agent", "agui+" + langgraph_upstream.url, "--store", redis_server.url)
    a, b = Gateway(tmp_path, *shared).start(), Gateway(tmp_path, *shared).start()
    try:
        alternating = [{**step, "url": (a, b)[index % 2].url} for index, step in enumerate(steps)]
        across = drive(a.url, alternating, stableIds=True)
        assert canonical(across["endState"]) == canonical(direct["endState"])
        with TcpProxy(a.port) as proxy:
            proxy.cut_after(b'"tick 5 "')  # mid-answer: ticks come a tenth of a second apart
            cut = drive(proxy.url, steps, kind="ws", stableIds=True)
            assert proxy.cuts == 1
        slow_run = cut["runs"][1]["events"][0]["runId"]
        a.wait_logged(f"run {slow_run}: its last follower left")  # the gateway saw the drop, and the client came back
        assert canonical(cut["endState"]) == canonical(direct["endState"])
        check_joined_mid_run(*join_mid_run(a, b))  # a page reloaded on the other replica mid-answer
    finally:
        a.stop()
        b.stop()
        redis_server.stop()


@pytest.mark.parametrize("kind", ["http", "ws"])
def test_a_client_that_joins_a_thread_waiting_on_an_interrupt_holds_it(agents, kind):
    _, gateway = agents["langgraph-outcome"]
    joined = drive(gateway.url, [*LANGGRAPH_OUTCOME_STEPS[:2], {"connect": True, "fresh": True}], kind=kind, stableIds=True)
    assert joined["endState"] == joined["stayed"]
    assert [i["id"] for i in joined["runs"][-1]["interrupts"]] == [i["id"] for i in joined["runs"][-2]["interrupts"]] != []
    finished = joined["runs"][-1]["events"][-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"


def join_mid_run(runs_on: Gateway, joins_on: Gateway, kind: str = "http") -> tuple[dict, dict]:
    """A client runs two turns on `runs_on`, the second a slow answer; once that run has started, a new client joins
    the thread on `joins_on` (a page reloaded mid-answer). Both reports, the runner's and the joiner's."""
    thread = "mid-" + uuid.uuid4().hex[:8]
    steps = [{"message": "hello graph"}, {"message": "/slow 15"}]
    ran: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: ran.update(drive(runs_on.url, steps, threadId=thread, stableIds=True)))
    runner.start()
    try:
        runs_on.wait_logged(f"run started thread={thread} run=", count=2, timeout=30)
        joined = drive(joins_on.url, [{"connect": True}], threadId=thread, kind=kind)
    finally:
        runner.join(60)
    return ran, joined


def check_joined_mid_run(ran: dict, joined: dict) -> None:
    assert joined["runs"][0]["error"] is None
    events = [e["type"] for e in joined["runs"][0]["events"]]
    assert events[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert "TEXT_MESSAGE_CONTENT" in events[3:], "the join followed the run live"
    assert joined["endState"] == ran["endState"]


@pytest.mark.parametrize("kind", ["http", "ws"])
def test_a_client_that_joins_mid_run_ends_where_the_one_that_ran_does(agents, kind):
    _, gateway = agents["langgraph"]
    check_joined_mid_run(*join_mid_run(gateway, gateway, kind))
