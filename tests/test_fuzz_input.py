"""Property-based: malformed and oversized inputs to the parser and the HTTP endpoint give a 4xx with a contract code."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.engine.prepare import prepare
from gateway.errors import GatewayError
from gateway.i18n import known_codes
from tests.support import run_body

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
FIELDS = ["threadId", "runId", "state", "messages", "tools", "context", "forwardedProps", "resume", "parentRunId"]
EXT_FIELDS = [
    "schemaVersion",
    "rosInvocationId",
    "cwd",
    "thinking",
    "userId",
    "alibabaCloud",
    "runMode",
    "candidatePresentation",
    "llmApiKey",
]


@st.composite
def mutated_bodies(draw) -> bytes:
    body = run_body("hello")
    kind = draw(st.sampled_from(["field", "ext", "message", "bytes", "drop"]))
    if kind == "field":
        body[draw(st.sampled_from(FIELDS))] = draw(JSON)
    elif kind == "ext":
        body["forwardedProps"]["iacCode"][draw(st.sampled_from(EXT_FIELDS))] = draw(JSON)
    elif kind == "message":
        body["messages"] = [draw(st.dictionaries(st.sampled_from(["id", "role", "content", "name"]), JSON, max_size=4))]
    elif kind == "drop":
        body.pop(draw(st.sampled_from(FIELDS[:7])))
    else:
        return draw(st.binary(max_size=200))
    return json.dumps(body).encode()


@given(mutated_bodies())
@settings(max_examples=400, deadline=None)
def test_parser_never_raises_anything_but_a_contract_error(raw):
    try:
        prepare(raw, allowed_roots=("/tmp",), default_cwd=None, accept_language=None)
    except GatewayError as error:
        assert error.code.name in known_codes()
        assert 400 <= error.http_status < 500


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=30) as client:
        yield client


@given(raw=mutated_bodies(), path=st.sampled_from(["/", "/invocations"]))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_endpoint_answers_4xx_or_a_stream_never_500(gateway, http, raw, path):
    response = http.post(gateway.url + path, content=raw, headers={"content-type": "application/json"})
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        if path == "/":
            assert response.json()["error"]["code"] in known_codes()
        else:
            event = json.loads(response.text.removeprefix("data: "))
            assert event["type"] == "RUN_ERROR" and event["metadata"]["gatewayCode"] in known_codes()


@given(size=st.integers(min_value=12 * 1024 * 1024 + 1, max_value=13 * 1024 * 1024))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_oversized_bodies_are_413(gateway, http, size):
    response = http.post(gateway.url + "/", content=b" " * size, headers={"content-type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "INVALID_INPUT"
