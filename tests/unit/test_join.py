"""Thread join in the engine: the newest run a thread document names, replayed whole from its log; a thread with
none, another principal's thread and a thread bound to another userId all give nothing."""

from __future__ import annotations

import json

from gateway.agents import signals as s
from gateway.engine import LogPolicy
from gateway.engine.caller import Caller
from store.base import LatestRun, latest_run_of
from tests.unit.scripted import Harness, ScriptedAgent, body, collect


def test_the_newest_run_is_the_active_one_else_the_last_admitted():
    runs = {"r1": {"fence": 1, "at": 10.0}, "r3": {"fence": 3, "at": 5.0}, "r2": {"fence": 2, "at": 20.0}}
    assert latest_run_of({"runs": runs}) == LatestRun("r3", None), "the highest fence: admitted last"
    active = {"run_id": "r9", "execution_id": "e", "owner": "o", "started_at": 0, "lease_until": 1, "fence": 9}
    assert latest_run_of({"runs": runs, "active": active, "binding": {"cwd": "/w", "user_id": "alice"}}) == LatestRun("r9", "alice")
    assert latest_run_of(None) is None and latest_run_of({"runs": {}}) is None


async def test_joining_replays_the_newest_run_and_refuses_alike_what_is_not_the_callers():
    h = Harness(ScriptedAgent([s.TextDelta(text="hello"), s.Completed()]), log_policy=LogPolicy(max_grace_seconds=1))
    sent = await h.run(body(user="alice"))
    joined = await h.engine.join("t1", 0, user_id="alice")
    assert joined is not None and await collect(joined) == sent
    assert await h.engine.join("t1", 0) is None, "bound to alice: joined with her userId only"
    assert await h.engine.join("t1", 0, user_id="mallory") is None
    assert await h.engine.join("nobody", 0) is None
    assert await h.engine.join("t1", 0, Caller(owner="another")) is None, "another principal's thread is no thread"
    last = len(sent)
    tail = await h.engine.join("t1", last - 1, user_id="alice")
    assert tail is not None and [
        json.loads(data)["type"] for batch in [b async for b in tail.events(30)] if batch for _, data in batch
    ] == ["RUN_FINISHED"]
