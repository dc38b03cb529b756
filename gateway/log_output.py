"""Where log lines go: stderr, a loop turn's lines in one write, and a lean way in for the lines every run logs.

The lean way (`LeanLogger.info`) writes the very line logging would (the same format, redaction and request id, in
the same order as every other line), at a fraction of the cost: no record is made, and the line is redacted and
formatted when the turn's lines are written, not where it was logged. It is taken only when this module's handler
is the sole one the line would reach (no filter or handler added anywhere on its way, as a test's log capture
adds): otherwise the line goes through logging as any other. Lines still waiting are written by
`logging.shutdown`, which runs at exit.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import sys
import time
from typing import Any

from gateway.logs import REQUEST_ID, JsonFormatter, LineFormatter, RedactCredentials, TextFormatter, redact

# A line of the lean way, as logged: (created, its milliseconds, level, logger's name, message, request id).
LeanLine = tuple[float, int, str, str, str, str | None]


class TurnBatchedHandler(logging.StreamHandler):
    """Writes a turn of the event loop's lines at once: each line waits in order, and they go out together when the
    turn's callbacks are done (a `call_soon`), so the lines a busy turn logs (a run's end and its access line, for
    each run it finished) cost one write instead of a write and a flush each. A line logged off the loop (start,
    shutdown, another thread) goes out at once, with any still waiting before it; `flush` writes what waits."""

    def __init__(self, stream: Any, formatter: LineFormatter | None = None) -> None:
        super().__init__(stream)
        if formatter is not None:
            self.setFormatter(formatter)
        self._waiting: collections.deque[str | LeanLine] = collections.deque()  # appends and pops safe across threads
        self._flushing: asyncio.AbstractEventLoop | None = None  # the loop a flush is scheduled on

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._waiting.append(self.format(record))
        except Exception:  # noqa: BLE001 - logging's contract: a handler reports its failure, never raises it
            self.handleError(record)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._after_turn(loop)

    def lean(self, line: LeanLine, loop: asyncio.AbstractEventLoop) -> None:
        self._waiting.append(line)
        self._after_turn(loop)

    def takes(self, logger: logging.Logger) -> bool:
        """Whether a line of `logger` would reach this handler alone, through no filter but its redaction."""
        node: Any = logger
        root = logging.root
        while node is not root:
            if node.handlers or node.filters or not node.propagate:
                return False
            node = node.parent
        handlers = root.handlers
        return (
            len(handlers) == 1
            and handlers[0] is self
            and not root.filters
            and self.level <= logging.INFO
            and len(self.filters) == 1
            and isinstance(self.filters[0], RedactCredentials)
            and isinstance(self.formatter, LineFormatter)
        )

    def _after_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._flushing is not loop:
            self._flushing = loop
            loop.call_soon(self._flush_turn)

    def _flush_turn(self) -> None:
        self._flushing = None
        self.flush()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]  # a StreamHandler always has its lock
            waiting, formatter = self._waiting, self.formatter
            lines = []
            while waiting:
                line = waiting.popleft()
                if isinstance(line, tuple):
                    created, msecs, level, name, message, request_id = line
                    line = formatter.line(created, msecs, level, name, redact(message), request_id)  # type: ignore[union-attr]
                lines.append(line)
            if lines:
                try:
                    self.stream.write(self.terminator.join(lines) + self.terminator)
                except Exception:  # noqa: BLE001 - as emit: reported, never raised
                    self.handleError(logging.makeLogRecord({"msg": "log lines lost: the stream refused them"}))
            super().flush()


class LeanLogger:
    """A logger's info lines by the lean way, where the handler allows it (the module's docstring)."""

    __slots__ = ("logger",)

    def __init__(self, name: str) -> None:
        self.logger = logging.getLogger(name)

    def info(self, template: str, *args: object) -> None:
        logger = self.logger
        if not logger.isEnabledFor(logging.INFO):
            return
        handler = _handler
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if handler is None or loop is None or not handler.takes(logger):
            logger.info(template, *args)
            return
        created = time.time()
        # The message is made now, as logging makes it at the call: what the arguments say then is what is logged.
        handler.lean(
            (created, int((created - int(created)) * 1000), "INFO", logger.name, template % args if args else template, REQUEST_ID.get()),
            loop,
        )


_handler: TurnBatchedHandler | None = None  # the handler setup_logging installed, which the lean way writes to


def setup_logging(level: str, fmt: str) -> None:
    global _handler
    # Neither format shows a record's thread, process or caller: not gathering them is a third of a record's cost
    # (the logging HOWTO's "Optimization" names these switches, `_srcfile` among them).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    if hasattr(logging, "_srcfile"):
        logging._srcfile = None
    # stderr's own stream writes each line as it ends (Python makes it line-buffered): this one is told when.
    stream = open(sys.stderr.fileno(), "w", encoding="utf-8", errors="backslashreplace", buffering=1 << 16, closefd=False)  # noqa: SIM115
    handler = TurnBatchedHandler(stream, JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RedactCredentials())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    _handler = handler
