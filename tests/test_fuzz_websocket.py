"""Property-based: the multiplexed WebSocket protocol answers any frame (operations, ids, nesting, sizes) with a
documented error frame or close code, within a deadline, and never with 1011."""

from __future__ import annotations

import asyncio
import json

import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.errors import ErrorCode
from tests.support import run_body

DOCUMENTED_CLOSES = {1000, 1003, 1007, 1008, 1009}
ERROR_CODES = {code.name for code in ErrorCode} - {"INTERNAL_ERROR"}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30,
)
IDS = st.one_of(st.text(max_size=20), st.just(""), st.just("x" * 300), st.integers(), st.none())
OPS = st.one_of(st.sampled_from(["run", "cancel"]), st.text(max_size=20), st.integers(), st.none())


def deep(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@st.composite
def frames(draw) -> str:
    kind = draw(st.sampled_from(["envelope", "valid-run", "deep", "garbage", "json"]))
    if kind == "garbage":
        return draw(st.text(max_size=200))
    if kind == "json":
        return json.dumps(draw(JSON))
    if kind == "deep":
        depth = draw(st.sampled_from([10, 63, 65, 200, 3000, 20000]))
        return '{"op":"run","id":"d","input":{"threadId":"t","runId":"r","state":' + deep(depth) + "}}"
    frame: dict = {}
    if draw(st.booleans()):
        frame["op"] = draw(OPS)
    if draw(st.booleans()):
        frame["id"] = draw(IDS)
    if kind == "valid-run":
        frame.update(op="run", id=draw(st.text(min_size=1, max_size=10)), input=run_body("fuzz", state=draw(JSON)))
    elif draw(st.booleans()):
        frame["input"] = draw(JSON)
    return json.dumps(frame)


async def answer_to(url: str, frame: str) -> tuple[str, object]:
    """('frame', event) for the first answer, or ('close', code)."""
    async with websockets.connect(url, subprotocols=["agui-mux.v1"], max_size=None) as ws:
        await ws.send(frame)
        try:
            message = await asyncio.wait_for(ws.recv(), 5)
        except websockets.ConnectionClosed as closed:
            return "close", closed.rcvd.code if closed.rcvd else None
        return "frame", json.loads(message)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(frame=frames())
def test_every_frame_gets_a_documented_answer(gateway, frame):
    kind, answer = asyncio.run(answer_to(gateway.url.replace("http", "ws") + "/ws", frame))  # a hang fails the 5 s wait
    if kind == "close":
        assert answer in DOCUMENTED_CLOSES, (frame[:200], answer)
        return
    event = answer["event"]
    if event["type"] == "RUN_ERROR":
        assert event["code"] in ERROR_CODES, (frame[:200], event)
    else:
        assert event["type"] == "RUN_STARTED", (frame[:200], event)
