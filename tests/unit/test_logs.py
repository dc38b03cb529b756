"""gateway/logs.py: what redaction hides, with and without its shortcut for lines that hold no credential word, and
the handler that writes a loop turn's lines at once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.logs import REDACTED, TurnBatchedHandler, redact


@pytest.mark.parametrize(
    ("line", "hidden"),
    [
        ("GET /ws?token=abc123&threadId=t1 101", "abc123"),
        ("header Authorization: Bearer abc.def.ghi", "abc.def.ghi"),
        ("sent BEARER abc.def.ghi", "abc.def.ghi"),
        ("basic dXNlcjpwYXNz in a header", "dXNlcjpwYXNz"),
        ("subprotocols ['agui-mux.v1', 'agui.ticket.t-123']", "t-123"),
        ("cookie: session=s3cr3t", "s3cr3t"),
        ("x-api-key: k-999", "k-999"),
        ("a2a call: ('Authorization', b'Bearer zzz')", "zzz"),
        ("Ba\u017fic dXNlcjpwYXNz", "dXNlcjpwYXNz"),  # the long s the patterns take for an s: no shortcut for it
    ],
)
def test_credentials_are_hidden(line, hidden):
    cleaned = redact(line)
    assert hidden not in cleaned and REDACTED in cleaned, cleaned


@pytest.mark.parametrize(
    "line",
    [
        "POST / 200 5123 bytes 3.2 ms from 127.0.0.1",
        "run ended thread=t-1 run=r-1 outcome=success seconds=0.012",
        "GET /threads/t-1/runs/r-1/events?lastEventId=4&threadId=t-1 200",
    ],
)
def test_a_line_with_nothing_to_hide_is_kept_as_it_is(line):
    assert redact(line) == line


class Recording:
    """A stream that notes what reached it when it was flushed."""

    def __init__(self) -> None:
        self.buffer = ""
        self.flushed: list[str] = []

    def write(self, text: str) -> None:
        self.buffer += text

    def flush(self) -> None:
        if self.buffer:
            self.flushed.append(self.buffer)
            self.buffer = ""


def logger_to(stream: Recording) -> logging.Logger:
    handler = TurnBatchedHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("test.logs.batched")
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.INFO)
    return log


def test_a_turns_lines_go_out_together_when_the_turn_is_done():
    stream = Recording()
    log = logger_to(stream)

    async def turns() -> None:
        for index in range(3):
            log.info("line %d", index)
        assert stream.flushed == [], "nothing written while the turn still runs"
        await asyncio.sleep(0)  # the turn ends; the flush comes before the next one's callbacks are done
        await asyncio.sleep(0)
        log.info("line 3")
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    asyncio.run(turns())
    assert stream.flushed == ["line 0\nline 1\nline 2\n", "line 3\n"]


def test_a_line_logged_off_the_loop_goes_out_at_once():
    stream = Recording()
    logger_to(stream).info("starting")
    assert stream.flushed == ["starting\n"]


@pytest.mark.parametrize("created", [1_765_000_000.25, 1_765_000_000.999, 1_765_000_001.0])
def test_the_formats_times_are_logging_own(created):
    """The text format's time is what logging's default gives; the JSON one is UTC ISO 8601 with milliseconds."""
    import json
    import time

    from gateway.logs import JsonFormatter, TextFormatter

    record = logging.LogRecord("agui.test", logging.INFO, __file__, 1, "hello", None, None)
    record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0
    text, stock = TextFormatter(), logging.Formatter()
    assert text.formatTime(record) == stock.formatTime(record)
    assert text.formatTime(record) == text.formatTime(record)  # the cached second's text, again
    stamp = json.loads(JsonFormatter().format(record))["time"]
    assert stamp == time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(record.msecs):03d}Z"
