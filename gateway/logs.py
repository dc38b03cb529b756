"""What a log line holds: text or JSON lines, redacted. Request bodies and secrets are never logged, at any level.
(gateway/log_output.py says where lines go.)

Every line is redacted before it is formatted, whoever logged it (uvicorn's access, connection and
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

import contextvars
import json
import logging
import re
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


class LineFormatter(logging.Formatter):
    """A format whose line is made from five fields only: `line` is the format, for a record here and for a line of
    the lean path (gateway/log_output.py) alike. A record with an exception or a stack goes through logging's own."""

    def __init__(self, fmt: str | None = None) -> None:
        super().__init__(fmt)
        self._second, self._stamp = -1, ""  # the second last formatted, and its text: one strftime a second

    def stamp(self, created: float) -> str:
        second = int(created)
        if second != self._second:
            self._second, self._stamp = second, self.second_text(created)
        return self._stamp

    def second_text(self, created: float) -> str:
        raise NotImplementedError

    def line(self, created: float, msecs: int, level: str, name: str, message: str, request_id: str | None) -> str:
        raise NotImplementedError

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)
        request_id = getattr(record, "request_id", None)
        return self.line(record.created, int(record.msecs), record.levelname, record.name, record.getMessage(), request_id)


class TextFormatter(LineFormatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def second_text(self, created: float) -> str:
        return time.strftime(self.default_time_format, self.converter(created))

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's own name
        return f"{self.stamp(record.created)},{int(record.msecs):03d}"

    def line(self, created: float, msecs: int, level: str, name: str, message: str, request_id: str | None) -> str:
        line = f"{self.stamp(created)},{msecs:03d} {level} {name}: {escape_line_breaks(message)}"
        return f"{line} rid={request_id}" if request_id else line

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's own name
        request_id = getattr(record, "request_id", None)
        return self.line(record.created, int(record.msecs), record.levelname, record.name, record.message, request_id)


_JSON_LINE_BREAKS = {code: f"\\u{code:04x}" for code in (0x85, 0x2028, 0x2029)}


class JsonFormatter(LineFormatter):
    def second_text(self, created: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))

    def line(self, created: float, msecs: int, level: str, name: str, message: str, request_id: str | None) -> str:
        return _dumps(self.entry(created, msecs, level, name, message, request_id))

    def entry(self, created: float, msecs: int, level: str, name: str, message: str, request_id: str | None) -> dict[str, str]:
        entry = {"time": f"{self.stamp(created)}.{msecs:03d}Z", "level": level.lower(), "logger": name, "message": message}
        if request_id:
            entry["requestId"] = request_id
        return entry

    def format(self, record: logging.LogRecord) -> str:
        if not (record.exc_info or record.stack_info):
            return super().format(record)
        request_id = getattr(record, "request_id", None)
        entry = self.entry(record.created, int(record.msecs), record.levelname, record.name, record.getMessage(), request_id)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return _dumps(entry)


def _dumps(entry: dict[str, str]) -> str:
    # JSON escapes control characters by itself, but not U+0085, U+2028 and U+2029, which split lines too.
    return json.dumps(entry, ensure_ascii=False).translate(_JSON_LINE_BREAKS)
