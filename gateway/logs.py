"""Logging setup: text or JSON lines. Request bodies and secrets are never logged, at any level.

Every record passes one filter before it is formatted, whoever logged it (uvicorn's access, connection and
trace lines and the websockets handshake trace included):
- every query parameter's value is replaced by `[redacted]` unless its name (percent-decoded, any case) is on
  a short allow-list of harmless ids (`QUERY_ALLOWED`): a credential under a spelling nobody foresaw is still
  hidden;
- `Bearer`/`Basic` credentials, SigV4's `AWS4-HMAC-SHA256 Credential=..., Signature=...`, the `agui.bearer.<token>` and `agui.ticket.<ticket>` subprotocols, and the values
  of credential headers (`Authorization`, `Cookie`, API-key headers) are redacted wherever they appear.

Both formats escape every character `str.splitlines()` splits on (control characters, U+0085, U+2028, U+2029), so
a client value can never forge a line. Client identifiers are bounded (256 characters) before they reach a log.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import re
import sys
import time
from typing import Any
from urllib.parse import unquote

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
QUERY_ALLOWED = frozenset({"lasteventid", "rosinvocationid", "userid", "threadid", "runid"})
REDACTED = "[redacted]"
_QUERY = re.compile(r"(?<=[?&;])([^=&;?#\s\"'<>]+)=([^&;#\s\"'<>]*)")
_SCHEMES = re.compile(r"\b(bearer|basic)(\s+|%20|\+)[^\s,;\"'&]+", re.IGNORECASE)
_SIGV4 = re.compile(r"\b(AWS4-HMAC-SHA256)(\s+|%20|\+)[^\r\n\"']+", re.IGNORECASE)  # its credential, headers and signature
_SUBPROTOCOL = re.compile(r"\b(agui\.(?:bearer|ticket))\.[^\s,;\"'\]\)]+", re.IGNORECASE)
_HEADER = re.compile(
    r"\b((?:proxy-)?authorization|(?:set-)?cookie|x-api-key|api-key|x-auth-token)(\"?\s*[:=]\s*\"?|\"?,\s*b?\"|'?,\s*b?')[^\r\n\"']+",
    re.IGNORECASE,
)
_CREDENTIAL_WORDS = re.compile(
    r"((?:^|\s)(?:token|ticket|access_token|id_token|api_key|apikey|auth|authorization)=)[^&\s\"';]*", re.IGNORECASE
)
_LINE_BREAKING = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def _query_value(match: re.Match[str]) -> str:
    name = match.group(1)
    return match.group(0) if unquote(name).lower() in QUERY_ALLOWED else f"{name}={REDACTED}"


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def with_request_id(metadata: dict[str, Any]) -> dict[str, Any]:
    """RUN_ERROR metadata, plus the current request's id when there is one."""
    request_id = REQUEST_ID.get()
    return {**metadata, "requestId": request_id} if request_id else metadata


# The three patterns that follow the query's each need one of these words: an ASCII text with none of them (in any
# case) holds nothing they would redact, and skips them (most lines: the access log's, a run's end). Non-ASCII text
# always runs them: their case-blind matching also takes a few other letters (the long s, the Kelvin sign).
_MARKERS = re.compile(r"bearer|basic|agui\.|authorization|cookie|api-key|auth-token|aws4-hmac")


def redact(text: str) -> str:
    """The text with every credential it may hold replaced by `[redacted]`."""
    if "=" in text:
        text = _QUERY.sub(_query_value, text)
        text = _CREDENTIAL_WORDS.sub(rf"\1{REDACTED}", text)
    if text.isascii() and _MARKERS.search(text.lower()) is None:
        return text
    text = _SCHEMES.sub(rf"\1\2{REDACTED}", text)
    text = _SIGV4.sub(rf"\1\2{REDACTED}", text)
    text = _SUBPROTOCOL.sub(rf"\1.{REDACTED}", text)
    return _HEADER.sub(rf"\1\2{REDACTED}", text)


def escape_line_breaks(text: str) -> str:
    """Every character `str.splitlines()` splits on, written as an escape."""
    return _LINE_BREAKING.sub(_escape, text)


class RedactCredentials(logging.Filter):
    """Renders the record's message once, redacted, so no formatter sees the raw arguments; stamps the request id."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._second, self._stamp = -1, ""  # the second last formatted, and its text: one strftime a second

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's own name
        second = int(record.created)
        if second != self._second:
            self._second, self._stamp = second, time.strftime(self.default_time_format, self.converter(record.created))
        return f"{self._stamp},{int(record.msecs):03d}"

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's own name
        record.message = escape_line_breaks(record.message)
        line = super().formatMessage(record)
        request_id = getattr(record, "request_id", None)
        return f"{line} rid={request_id}" if request_id else line


_JSON_LINE_BREAKS = {code: f"\\u{code:04x}" for code in (0x85, 0x2028, 0x2029)}


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self._second, self._stamp = -1, ""  # as TextFormatter's

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry = {
            "time": f"{self._stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["requestId"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        # JSON escapes control characters by itself, but not U+0085, U+2028 and U+2029, which split lines too.
        return json.dumps(entry, ensure_ascii=False).translate(_JSON_LINE_BREAKS)


class TurnBatchedHandler(logging.StreamHandler):
    """Writes a turn of the event loop's lines at once: each line goes into the stream's buffer, and the buffer out
    when the turn's callbacks are done (a `call_soon`), so the lines a busy turn logs (a run's end and its access
    line, for each run it finished) cost one write instead of a write and a flush each. A line logged off the loop
    (start, shutdown, another thread) goes out at once; `logging.shutdown`, at exit, flushes what is left."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._flushing: asyncio.AbstractEventLoop | None = None  # the loop a flush is scheduled on

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(self.format(record) + self.terminator)
        except Exception:  # noqa: BLE001 - logging's contract: a handler reports its failure, never raises it
            self.handleError(record)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._flushing is not loop:
            self._flushing = loop
            loop.call_soon(self._flush_turn)

    def _flush_turn(self) -> None:
        with self.lock or contextlib.nullcontext():
            self._flushing = None
            self.flush()


def setup_logging(level: str, fmt: str) -> None:
    # Neither format shows a record's thread, process or caller: not gathering them is a third of a record's cost
    # (the logging HOWTO's "Optimization" names these switches, `_srcfile` among them).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    if hasattr(logging, "_srcfile"):
        logging._srcfile = None
    # stderr's own stream writes each line as it ends (Python makes it line-buffered): this one is told when.
    stream = open(sys.stderr.fileno(), "w", encoding="utf-8", errors="backslashreplace", buffering=1 << 16, closefd=False)  # noqa: SIM115
    handler = TurnBatchedHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RedactCredentials())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
