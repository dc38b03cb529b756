"""gateway/logs.py and gateway/log_output.py: what redaction hides, with and without its shortcut for lines that hold
no credential word, the handler that writes a loop turn's lines at once, and the lean way that writes the same lines."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway import log_output
from gateway.log_output import LeanLogger, TurnBatchedHandler
from gateway.logs import REDACTED, REQUEST_ID, JsonFormatter, RedactCredentials, TextFormatter, redact


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

    record = logging.LogRecord("agui.test", logging.INFO, __file__, 1, "hello", None, None)
    record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0
    text, stock = TextFormatter(), logging.Formatter()
    assert text.formatTime(record) == stock.formatTime(record)
    assert text.formatTime(record) == text.formatTime(record)  # the cached second's text, again
    stamp = json.loads(JsonFormatter().format(record))["time"]
    assert stamp == time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(record.msecs):03d}Z"


def lean_setup(monkeypatch, stream: Recording, formatter: logging.Formatter) -> TurnBatchedHandler:
    """This module's handler as the root's sole one, as setup_logging leaves it (pytest's own capture set aside)."""

    handler = TurnBatchedHandler(stream, formatter)  # type: ignore[arg-type]
    handler.addFilter(RedactCredentials())
    monkeypatch.setattr(logging.root, "handlers", [handler])
    monkeypatch.setattr(log_output, "_handler", handler)
    logging.getLogger("test.lean").setLevel(logging.INFO)
    return handler


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize(
    ("template", "args", "request_id"),
    [
        ("POST %s %d bytes", ("/", 12), "req-1"),
        ("GET %s", ("/ws?token=abc&threadId=t-1",), None),
        ("run ended thread=%s reason=%r", ("t\n1\u2028", "Bearer x.y"), "r"),
        ("100% sure", (), None),
    ],
)
def test_the_lean_way_writes_the_line_logging_writes(monkeypatch, fmt, template, args, request_id):
    """The same line, redaction and request id as a record through the handler, in both formats."""

    stream = Recording()
    handler = lean_setup(monkeypatch, stream, JsonFormatter() if fmt == "json" else TextFormatter())
    times = iter([1_765_000_000.25, 1_765_000_000.25])
    monkeypatch.setattr("time.time", lambda: next(times))

    async def both() -> None:
        token = REQUEST_ID.set(request_id)
        try:
            LeanLogger("test.lean").info(template, *args)
            logging.getLogger("test.lean").info(template, *args)
        finally:
            REQUEST_ID.reset(token)

    asyncio.run(both())
    handler.flush()
    lean, stock = "".join(stream.flushed).splitlines()
    assert lean == stock
    assert "abc" not in lean and "x.y" not in lean and "\u2028" not in lean


def test_lean_lines_keep_their_place_among_the_others_and_wait_for_the_turns_end(monkeypatch):

    stream = Recording()
    lean_setup(monkeypatch, stream, TextFormatter())
    lean, stock = LeanLogger("test.lean"), logging.getLogger("test.lean")

    async def turn() -> None:
        lean.info("one %d", 1)
        stock.info("two")
        lean.info("three")
        assert stream.flushed == []
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    asyncio.run(turn())
    assert [line.split(": ", 1)[1] for line in "".join(stream.flushed).splitlines()] == ["one 1", "two", "three"]
    assert len(stream.flushed) == 1


def test_lines_still_waiting_are_written_at_shutdown(monkeypatch):

    stream = Recording()
    handler = lean_setup(monkeypatch, stream, TextFormatter())

    loop = asyncio.new_event_loop()

    def last_turn() -> None:
        loop.stop()  # the loop stops with this turn: the turn's flush never runs
        LeanLogger("test.lean").info("the last line")

    loop.call_soon(last_turn)
    loop.run_forever()
    loop.close()
    assert stream.flushed == []
    logging.shutdown([lambda: handler])  # what runs at exit
    assert "the last line" in "".join(stream.flushed)


def test_a_capture_beside_the_handler_sees_every_line(monkeypatch):
    """With another handler on the way (a test's capture), lean lines go through logging, the capture included."""

    stream = Recording()
    handler = lean_setup(monkeypatch, stream, TextFormatter())
    seen: list[str] = []
    capture = logging.Handler()
    capture.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logging.root.handlers.append(capture)

    async def turn() -> None:
        LeanLogger("test.lean").info("seen %s", "twice")

    asyncio.run(turn())
    handler.flush()
    assert seen == ["seen twice"] and "seen twice" in "".join(stream.flushed)


def test_a_lean_line_below_the_level_is_not_written(monkeypatch):

    stream = Recording()
    handler = lean_setup(monkeypatch, stream, TextFormatter())
    logging.getLogger("test.lean").setLevel(logging.WARNING)

    async def turn() -> None:
        LeanLogger("test.lean").info("quiet")

    asyncio.run(turn())
    handler.flush()
    assert stream.flushed == []
