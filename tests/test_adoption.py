"""A2A runs outlive their replica: three gateways share one Redis; the replica that runs a slow A2A task is killed,
paused or drained, and another adopts the run, which goes on to its real end with its text complete and never
repeated (real a2a-sdk agent, real Redis, real gateway processes)."""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import pytest

from tests.a2a_agent import A2AAgentServer, live_agent
from tests.reattach_client import GRACE, assert_exactly_once, attach_after, events_url, open_get, open_post
from tests.support import Gateway, RedisServer, assert_well_formed_run, run_body
from tests.test_websocket import verify_with_node

pytestmark = [pytest.mark.a2a, pytest.mark.redis]
LEASE = "2"  # seconds: an adoption comes about one lease (plus a scan, a third of it) after the owner stops


agent = pytest.fixture(scope="module", name="agent")(live_agent)


@pytest.fixture
def cluster(tmp_path, agent):
    """Three replicas on one Redis of the test's own; `start(i)` brings replica i (back) up on a fresh port."""
    redis = RedisServer(tmp_path).start()
    args = ("--store", redis.url, "--agent", "a2a+" + agent.url, "--allowed-cwd", "/tmp", "--lease-seconds", LEASE)
    extra = ("--heartbeat-seconds", "0.5", "--shutdown-grace-seconds", "2")

    class Cluster:
        def __init__(self) -> None:
            self.gateways = [Gateway(tmp_path, *args, *extra).start() for _ in range(3)]
            self.every = list(self.gateways)  # each process started, restarted ones too
            self.redis = redis

        def restart(self, index: int) -> Gateway:
            self.gateways[index] = Gateway(tmp_path, *args, *extra).start()
            self.every.append(self.gateways[index])
            return self.gateways[index]

        def logs(self) -> str:
            return "".join(gateway.logs() for gateway in self.every)

    cluster = Cluster()
    yield cluster
    for gateway in cluster.gateways:
        gateway.stop()
    redis.stop()


def ticks(count: int) -> str:
    return "".join(f"w{index} " for index in range(count))


def text_of(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def cancels(agent: A2AAgentServer) -> list[dict]:
    return [c for c in agent.calls if c["method"] == "CancelTask"]


def permission_answers(agent: A2AAgentServer) -> list[dict]:
    """The answers (a data part) the agent executed."""
    return [c for c in agent.calls if c["method"] == "SendStreamingMessage" and c["message"].get("parts", [{}])[0].get("data")]


def check_pipeline_once(events: list[dict], count: int) -> None:
    customs = [e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "iac-code.pipeline.v1"]
    ids = [v["eventId"] for v in customs]
    assert len(ids) == len(set(ids)), "a pipeline event twice"
    assert len(ids) <= count


def replay_all(base: str, body: dict) -> list[dict]:
    """The run's whole log, replayed from the start through `base` (it must have ended)."""
    stream = attach_after(base, body, 0)
    return [event for _, event in stream.rest()]


def wait_ended(base: str, body: dict, seconds: float = 30) -> list[dict]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, stream = open_get(events_url(base, body, rosInvocationId="inv-1"), {"last-event-id": "0"})
        if status == 200:
            events = [event for _, event in stream.rest()]
            if events and events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                return events
        time.sleep(0.5)
    raise AssertionError("the run never ended in the store")


def in_shared_log(other: str, body: dict, position: int) -> None:
    """Wait until `position` of a live run can be read through another replica, which reads the shared log only."""
    stream = attach_after(other, body, position - 1)
    assert [at for at, _ in stream.take(1)] == [position]
    stream.drop()


def killed_mid_run(a: Gateway, b: Gateway, url: str, body: dict, taken: int) -> list[dict]:
    """The run posted to `url` (on A) read until `taken` events, A killed, the rest read through B: every event once."""
    head = open_post(url, body, GRACE).take(taken)
    in_shared_log(b.url, body, head[-1][0])  # what A sent is in its log (written behind the run)
    a.kill()
    rest = attach_after(b.url, body, head[-1][0]).rest()
    return assert_exactly_once([head, rest])


def test_a_killed_replicas_run_is_adopted_and_ends_complete(cluster, agent):
    a, b, _ = cluster.gateways
    before = len(cancels(agent))
    body = run_body("long 60")
    events = killed_mid_run(a, b, a.url + "/", body, 8)
    assert_well_formed_run(events)
    verify_with_node([events])
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}, events[-1]
    assert text_of(events) == ticks(60), "the text is complete and never repeated"
    check_pipeline_once(events, 60)
    assert len(cancels(agent)) == before, "the agent saw no cancel"
    assert "run adopted" in cluster.logs()


def test_an_unattended_run_is_adopted_and_reaches_its_end_in_the_store(cluster, agent):
    a, b, c = cluster.gateways
    body = run_body("long 40")
    first = open_post(a.url + "/", body, GRACE)
    head = first.take(4)
    first.drop()  # nobody follows: the grace window keeps it going on A
    in_shared_log(b.url, body, head[-1][0])  # it went on unattended, its log written behind it
    a.kill()
    events = wait_ended(c.url, body)
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}, events[-1]
    assert text_of(events) == ticks(40)
    verify_with_node([events])
    again = replay_all(b.url, body)
    assert again == events, "attaching later replays the same run"


def test_a_rolling_restart_keeps_the_run_going_without_a_cancel(cluster, agent):
    before = len(cancels(agent))
    body = run_body("long 110")
    owner = cluster.gateways[0]
    stream = open_post(owner.url + "/", body, GRACE)
    stream.take(3)
    stream.drop()
    for index in range(3):  # SIGTERM each replica in turn, bringing it back before the next
        cluster.gateways[index].proc.send_signal(signal.SIGTERM)
        cluster.gateways[index].proc.wait(30)
        cluster.restart(index)
        time.sleep(1.0)
    events = wait_ended(cluster.gateways[1].url, body, 60)
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}, events[-1]
    assert text_of(events) == ticks(110)
    check_pipeline_once(events, 110)
    assert len(cancels(agent)) == before, "no CancelTask during the rolling restart"
    logs = cluster.logs()
    assert "run handed off" in logs and "run adopted" in logs, "drained replicas handed the run off; others adopted it"


def test_an_interrupt_after_adoption_is_saved_and_resumed_elsewhere(cluster, agent):
    a, b, c = cluster.gateways
    body = run_body("long 30 permission")
    events = killed_mid_run(a, b, a.url + "/", body, 5)
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt" and outcome["interrupts"][0]["id"] == "perm-long", events[-1]
    entry = [{"interruptId": "perm-long", "status": "resolved", "payload": {"decision": "allow_once"}}]
    answers_before = len(permission_answers(agent))
    with httpx.Client(timeout=60) as http:
        response = http.post(
            c.url + "/", json=run_body(None, thread=body["threadId"], resume=entry), headers={"accept": "text/event-stream"}
        )
    resumed = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    assert resumed[-1]["type"] == "RUN_FINISHED" and resumed[-1]["outcome"] == {"type": "success"}, resumed[-1]
    assert [e["content"] for e in resumed if e["type"] == "TOOL_CALL_RESULT"] == ["deployed"], "the tool ran once"
    assert len(permission_answers(agent)) == answers_before + 1


def test_a_paused_former_owner_writes_nothing_after_the_adoption(cluster, agent):
    a, b, _ = cluster.gateways
    before = len(cancels(agent))
    body = run_body("long 70")
    first = open_post(a.url + "/", body, GRACE)
    head = first.take(6)
    os.kill(a.proc.pid, signal.SIGSTOP)  # past its lease: another replica adopts the run
    try:
        rest = attach_after(b.url, body, head[-1][0])
        middle = rest.take(20)  # events from the adopter
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    tail = rest.rest()
    events = assert_exactly_once([head, middle, tail])
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}, events[-1]
    assert text_of(events) == ticks(70)
    assert replay_all(b.url, body) == events, "the log holds the adopter's events only, once each"
    deadline = time.monotonic() + 10
    while "newer owner" not in a.logs() and "lost its lease" not in a.logs() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "newer owner writes it" in a.logs() or "another replica goes on with it" in a.logs(), a.logs()[-2000:]
    assert len(cancels(agent)) == before, "the former owner did not cancel the task it lost"


def test_an_adopted_run_can_be_cancelled_from_any_replica(cluster, agent):
    """A is killed at once, within its log's first write delay: the adopter opens the log itself. The cancel
    extension, sent through a third replica, reaches the adopter, which cancels the agent's task."""
    from tests.test_cancel_and_disconnect import CANCEL

    a, b, c = cluster.gateways
    body = run_body("long 120")
    first = open_post(a.url + "/", body, GRACE)
    head = first.take(4)
    session = next(event["value"] for _, event in head if event["type"] == "CUSTOM" and event["name"] == "iac-code.session.v1")
    first.drop()
    a.kill()
    deadline = time.monotonic() + 15
    while "run adopted" not in cluster.logs() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "run adopted" in cluster.logs()
    before = len(cancels(agent))
    with httpx.Client(timeout=30) as http:
        answer = http.post(c.url + CANCEL.format(session["executionId"]), json={"threadId": body["threadId"], "rosInvocationId": "inv-1"})
    assert answer.json()["status"] == "cancelled", answer.text
    events = wait_ended(b.url, body)
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "cancelled"}, events[-1]
    assert [c["taskId"] for c in cancels(agent)[before:]] == [session["taskId"]], "the adopter cancelled the agent's task"


def test_an_adopted_run_goes_on_with_its_own_agent_on_a_replica_that_declares_it(tmp_path, agent):
    """Replicas on one Redis, declaring the demo agent (default) and an A2A agent, `tasks` on all but one, which has
    it as `jobs`: a run of `tasks` by its id, its replica killed mid-run. The replica that does not declare `tasks`
    leaves the run alone
    (as in a rolling deploy that adds an agent); one that declares it adopts it, and the run ends complete there as
    that agent's, its thread still that agent's."""
    redis = RedisServer(tmp_path).start()
    both, without = tmp_path / "both.toml", tmp_path / "without.toml"
    chat = '[agents.chat]\nbackend = "demo"\ndefault = true\n'
    both.write_text(f'{chat}\n[agents.tasks]\nbackend = "a2a+{agent.url}"\n')
    without.write_text(f'{chat}\n[agents.jobs]\nbackend = "a2a+{agent.url}"\n')  # adopts runs, of another agent
    args = ("--store", redis.url, "--allowed-cwd", "/tmp", "--lease-seconds", LEASE, "--heartbeat-seconds", "0.5")
    a, other = Gateway(tmp_path, *args, "--agents", str(both)).start(), Gateway(tmp_path, *args, "--agents", str(without)).start()
    b = None
    try:
        body = run_body("long 20")
        head = open_post(a.url + "/agents/tasks", body, GRACE).take(6)
        in_shared_log(other.url, body, head[-1][0])
        a.kill()
        other.wait_logged(f"run {body['runId']} is the agent 'tasks''s, not declared here")  # its lease ran out
        b = Gateway(tmp_path, *args, "--agents", str(both)).start()
        rest = attach_after(b.url, body, head[-1][0]).rest()
        events = assert_exactly_once([head, rest])
        assert events[-1]["type"] == "RUN_FINISHED" and text_of(events) == ticks(20), events[-1]
        assert f"run adopted thread={body['threadId']} " in b.logs() and "run adopted" not in other.logs()
        b.wait_logged(f"run={body['runId']} outcome=completed")
        ended = next(line for line in b.logs().splitlines() if f"run={body['runId']} outcome=completed" in line)
        assert " agent=tasks" in ended, ended
        again = httpx.post(b.url + "/", json=run_body("next", thread=body["threadId"]), headers={"accept": "text/event-stream"})
        assert again.status_code == 409 and again.json()["error"]["field"] == "agentId", "the thread stays the tasks agent's"
    finally:
        for gateway in (a, other, b):
            if gateway is not None:
                gateway.stop()
        redis.stop()
