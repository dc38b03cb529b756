"""Logging setup: text or JSON lines. Request bodies and secrets are never logged.

Every record passes one filter before it is formatted: credentials in query strings (`token`, `ticket`,
`access_token`, `id_token`) are replaced by `[redacted]`, whoever logged them (uvicorn's connection lines
included). The text format escapes control characters, so a client value with CR/LF can never forge a line;
JSON escapes them by itself. Client identifiers are bounded (256 characters) before they reach a log.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
from typing import Any

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
_CREDENTIALS = re.compile(r"((?:^|[?&;\s])(?:token|ticket|access_token|id_token)=)[^&\s\"';]*", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def with_request_id(metadata: dict[str, Any]) -> dict[str, Any]:
    """RUN_ERROR metadata, plus the current request's id when there is one."""
    request_id = REQUEST_ID.get()
    return {**metadata, "requestId": request_id} if request_id else metadata


def redact(text: str) -> str:
    return _CREDENTIALS.sub(r"\1[redacted]", text)


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

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's own name
        record.message = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", record.message)
        line = super().formatMessage(record)
        request_id = getattr(record, "request_id", None)
        return f"{line} rid={request_id}" if request_id else line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["requestId"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RedactCredentials())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
