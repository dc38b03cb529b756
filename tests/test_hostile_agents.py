"""An agent behind the gateway cannot hurt the replica: a hostile AG-UI upstream (tests/hostile_upstream.py, raw bytes)
sends patches that double a document, a thousand copies of a large string, twenty thousand usage entries,
interrupts no resume could answer, an event of millions of values and a large event trickled in; each run ends with
its documented code, `/health` keeps answering throughout (polled every 50 ms), the replica's memory stays bounded,
and the thread is free for its next run."""

from __future__ import annotations

import threading
import time
import uuid

import httpx
import pytest

from tests.hostile_upstream import HostileUpstream
from tests.support import Gateway, SseResult, post_sse

# A frozen loop showed /health 5.8-10.4 s late and the process 0.8 GB larger. The margins hold on a loaded 2-core
# machine and still tell a freeze from noise.
WORST_HEALTH_SECONDS = 1.0
MAX_RSS_GROWTH = 200 * 1024 * 1024
BUDGET = 24 * 1024 * 1024
STEP_BYTES = 1024 * 1024  # what one step of an upstream's stream brings at most: one network read's events


@pytest.fixture(scope="module")
def hostile():
    server = HostileUpstream().start()
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["http-upstream-file-store", "in-process-source-redis-store"])
def gateway(request, hostile, tmp_path_factory):
    """The HTTP upstream on the file store, and the same scripts from an in-process source on the Redis store; a
    small budget for live runs, so that a few endless runs pass it (the scenarios of one run stay within it)."""
    if request.param == "http-upstream-file-store":
        backend: tuple[str, ...] = ("--agent", "agui+" + hostile.url)
    else:
        backend = ("--agent", "tests.hostile_upstream:source", "--store", request.getfixturevalue("redis_server").url)
    server = Gateway(tmp_path_factory.mktemp("hostile"), *backend, "--max-live-run-bytes", str(BUDGET)).start()
    server.kind = request.param
    yield server
    server.stop()


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


class HealthWatch:
    """Polls /health every 50 ms in a thread while the block runs; `worst` is the slowest answer, in seconds."""

    def __init__(self, url: str) -> None:
        self.url, self.worst, self.failures = url + "/health", 0.0, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                began = time.monotonic()
                try:
                    ok = client.get(self.url).status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.worst = max(self.worst, time.monotonic() - began)
                self.failures += not ok
                self.stop.wait(0.05)

    def __enter__(self) -> HealthWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(35)


def run(gateway: Gateway, text: str, thread_id: str | None = None) -> dict:
    """The terminal event of a plain run of the script `text`."""
    return run_whole(gateway, text, thread_id).terminal


def run_whole(gateway: Gateway, text: str, thread_id: str | None = None) -> SseResult:
    body = {
        "threadId": thread_id or f"t-{uuid.uuid4().hex[:10]}",
        "runId": f"r-{uuid.uuid4().hex[:8]}",
        "state": {},
        "messages": [{"id": f"m-{uuid.uuid4().hex[:6]}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with httpx.Client() as client:
        result = post_sse(client, gateway.url + "/", body)
    assert result.status == 200, result.raw[:300]
    return result


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("doubling", "larger than the gateway's bound of 8388608 bytes (--max-state-bytes)"),
        ("copies", "larger than the gateway's bound of 8388608 bytes (--max-state-bytes)"),
        ("activity", "larger than the gateway's bound of 1048576 bytes"),
        ("usage", "usage is not a list of at most 1024 entries"),
        ("duplicate-interrupts", "names an earlier interrupt"),
        ("long-interrupt-id", "1 to 256 characters"),
        ("values", "more than 500000 JSON values"),
    ],
)
def test_a_hostile_event_ends_its_run_and_the_replica_keeps_serving(gateway, script, said):
    assert gateway.proc is not None
    thread_id = f"t-{script}-{uuid.uuid4().hex[:6]}"
    before = rss(gateway.proc.pid)
    with HealthWatch(gateway.url) as health:
        terminal = run(gateway, script, thread_id)
    assert terminal["type"] == "RUN_ERROR" and terminal["code"] == "AGENT_PROTOCOL_ERROR", terminal
    assert said in terminal["message"], terminal["message"]
    assert health.failures == 0 and health.worst < WORST_HEALTH_SECONDS, (health.worst, health.failures)
    assert rss(gateway.proc.pid) - before < MAX_RSS_GROWTH
    after = run(gateway, "hello", thread_id)  # the thread is free: no interrupt was left pending
    assert after["type"] == "RUN_FINISHED" and after["outcome"]["type"] == "success", after


def test_a_state_of_a_long_conversation_passes_within_the_state_bound(gateway):
    """3 MiB of state (a LangGraph graph's messages past 1 MiB of history): what works directly works here too."""
    result = run_whole(gateway, "big-state")
    assert result.terminal["type"] == "RUN_FINISHED", result.terminal
    [snapshot] = [event for event in result.events if event["type"] == "STATE_SNAPSHOT"]
    assert len(snapshot["snapshot"]["messages"]) == 3000


def test_a_large_event_trickled_in_is_read_whole(gateway):
    with HealthWatch(gateway.url) as health:
        terminal = run(gateway, "trickle")
    assert terminal["type"] == "RUN_FINISHED", terminal
    assert health.failures == 0 and health.worst < WORST_HEALTH_SECONDS, (health.worst, health.failures)


def test_the_log_names_an_upstream_failure_as_the_agents_with_its_reason(gateway):
    failing, duplicate = f"t-error-{uuid.uuid4().hex[:8]}", f"t-duplicate-{uuid.uuid4().hex[:8]}"
    terminal = run(gateway, "error", failing)
    assert (terminal["code"], terminal["message"]) == ("MODEL_OVERLOADED", "Try again later."), terminal
    run(gateway, "duplicate-interrupts", duplicate)
    for thread in (failing, duplicate):  # a run's line is logged as it closes, a moment after its client has its end
        gateway.wait_logged(f"run ended thread={thread} ")
    ended = [line for line in gateway.logs().splitlines() if "run ended" in line and "outcome=A" in line]
    assert any("outcome=AGENT_ERROR" in line and "reason='MODEL_OVERLOADED: Try again later.'" in line for line in ended), ended
    refused = [line for line in ended if "outcome=AGENT_PROTOCOL_ERROR" in line]
    # The shared gateway's other runs end in its log too, in whatever order a loaded machine finishes them: this run's
    # line is found by its thread.
    mine = [line for line in refused if f"thread={duplicate} " in line]
    assert refused and all(" reason=" in line for line in refused) and len(mine) == 1 and "names an earlier interrupt" in mine[0], refused


def test_endless_runs_are_cut_at_their_share_of_the_live_runs_budget(gateway):
    """Four endless upstream runs would hold 16 MiB each in their rings: past the 24 MiB budget each is cut at its
    share with SERVICE_QUOTA_EXCEEDED, /health shows the budget in use and keeps answering, and the memory goes back."""
    assert gateway.proc is not None
    before = rss(gateway.proc.pid)
    results: list[dict] = []
    with HealthWatch(gateway.url) as health:
        # Four together: each waits at the upstream until the four are live, so a loaded machine that admits one late
        # cannot leave it alone under the budget, where no share of it is ever passed.
        runs = [threading.Thread(target=lambda: results.append(run(gateway, "endless, four together"))) for _ in range(4)]
        for thread in runs:
            thread.start()
        seen = 0
        while any(thread.is_alive() for thread in runs):
            seen = max(seen, httpx.get(gateway.url + "/health", timeout=30).json()["liveRunBytes"]["used"])
            time.sleep(0.05)
        for thread in runs:
            thread.join()
    assert [(r["type"], r["code"]) for r in results] == [("RUN_ERROR", "SERVICE_QUOTA_EXCEEDED")] * 4, results
    assert all("more than its share" in r["message"] for r in results), results
    # Past the budget by what a step of each run brings, and by the rings of runs already cut that their clients are
    # still reading (docs/reference.md). A loaded machine lets one run race to its ring's bound while the four still
    # hold less than the budget (nobody is cut before it is passed); that ring is read out while the others grow to
    # their share: at most the budget, each other run's share, and a step of each (one network read, under 1 MiB).
    # Without the budget the four rings would hold 4 x 16 MiB.
    assert BUDGET // 2 < seen <= BUDGET + 3 * (BUDGET // 4) + 4 * STEP_BYTES, seen
    assert health.failures == 0 and health.worst < WORST_HEALTH_SECONDS, (health.worst, health.failures)
    assert rss(gateway.proc.pid) - before < MAX_RSS_GROWTH
    deadline = time.monotonic() + 30
    while httpx.get(gateway.url + "/health", timeout=30).json()["liveRunBytes"]["used"] > 0:
        assert time.monotonic() < deadline, "the rings gave their charge back"
        time.sleep(0.05)
    assert run(gateway, "hello")["type"] == "RUN_FINISHED"
