"""The one catalogue of error codes: HTTP status, AgentCore code, and the GatewayError carrying them."""

from __future__ import annotations

import enum


class ErrorCode(enum.Enum):
    """Gateway error codes (CONTRACT §7.1) with their HTTP status and AgentCore code (§7.2)."""

    UNAUTHORIZED = ("UNAUTHORIZED", 401, "UNAUTHORIZED")
    ACCESS_DENIED = ("ACCESS_DENIED", 403, "ACCESS_DENIED")
    INVALID_INPUT = ("INVALID_INPUT", 400, "VALIDATION_ERROR")
    DUPLICATE_RUN_ID = ("DUPLICATE_RUN_ID", 409, "SESSION_BUSY")
    RUN_ID_CONFLICT = ("RUN_ID_CONFLICT", 409, "SESSION_BUSY")
    THREAD_BUSY = ("THREAD_BUSY", 409, "SESSION_BUSY")
    THREAD_BINDING_CONFLICT = ("THREAD_BINDING_CONFLICT", 409, "SESSION_BUSY")
    RESUME_REQUIRED = ("RESUME_REQUIRED", 409, "SESSION_BUSY")
    INCOMPLETE_RESUME = ("INCOMPLETE_RESUME", 400, "VALIDATION_ERROR")
    UNKNOWN_INTERRUPT = ("UNKNOWN_INTERRUPT", 400, "VALIDATION_ERROR")
    RESUME_PAYLOAD_INVALID = ("RESUME_PAYLOAD_INVALID", 400, "VALIDATION_ERROR")
    RESUME_ALREADY_APPLIED = ("RESUME_ALREADY_APPLIED", 409, "SESSION_BUSY")
    EXECUTION_EXPIRED = ("EXECUTION_EXPIRED", 409, "SESSION_BUSY")
    EXECUTION_LOST = ("EXECUTION_LOST", 409, "SESSION_BUSY")
    EXECUTION_NOT_FOUND = ("EXECUTION_NOT_FOUND", 404, "VALIDATION_ERROR")
    THREAD_NOT_FOUND = ("THREAD_NOT_FOUND", 404, "VALIDATION_ERROR")  # the thread API: unknown, or another principal's
    AGENT_NOT_FOUND = ("AGENT_NOT_FOUND", 404, "VALIDATION_ERROR")  # an agent id the gateway does not serve
    EVENTS_EXPIRED = ("EVENTS_EXPIRED", 410, "VALIDATION_ERROR")  # reattach extension: the position was trimmed
    STATE_PERSISTENCE_FAILED = ("STATE_PERSISTENCE_FAILED", 503, "INTERNAL_ERROR")
    A2A_UNAVAILABLE = ("A2A_UNAVAILABLE", 502, "AGENT_ERROR")
    SESSION_BACKUP_NOT_READY = ("SESSION_BACKUP_NOT_READY", 503, "AGENT_ERROR")  # the agent's session is syncing: retry
    A2A_PROTOCOL_ERROR = ("A2A_PROTOCOL_ERROR", 502, "AGENT_ERROR")
    A2A_EXECUTION_FAILED = ("A2A_EXECUTION_FAILED", 502, "AGENT_ERROR")
    # The backend produced what AG-UI forbids (a state delta that does not apply, a snapshot past its bound, an
    # unknown signal): the run ends before any of it reaches a client.
    AGENT_PROTOCOL_ERROR = ("AGENT_PROTOCOL_ERROR", 502, "AGENT_ERROR")
    # An AG-UI upstream agent could not be reached: refused, timed out, or a 5xx before its stream began.
    AGENT_UNAVAILABLE = ("AGENT_UNAVAILABLE", 502, "AGENT_ERROR")
    RATE_LIMIT_EXCEEDED = ("RATE_LIMIT_EXCEEDED", 429, "RATE_LIMIT_EXCEEDED")
    SERVICE_QUOTA_EXCEEDED = ("SERVICE_QUOTA_EXCEEDED", 429, "SERVICE_QUOTA_EXCEEDED")
    TOO_MANY_RUNS_ON_SOCKET = ("TOO_MANY_RUNS_ON_SOCKET", 429, "SERVICE_QUOTA_EXCEEDED")
    NOT_FOUND = ("NOT_FOUND", 404, "VALIDATION_ERROR")
    METHOD_NOT_ALLOWED = ("METHOD_NOT_ALLOWED", 405, "VALIDATION_ERROR")
    REQUEST_TIMEOUT = ("REQUEST_TIMEOUT", 408, "VALIDATION_ERROR")
    SHUTTING_DOWN = ("SHUTTING_DOWN", 503, "INTERNAL_ERROR")
    CANCELLED = ("CANCELLED", 499, "AGENT_ERROR")
    INTERNAL_ERROR = ("INTERNAL_ERROR", 500, "INTERNAL_ERROR")

    # The code's own name leads each value so that no two members alias each other.

    @property
    def http_status(self) -> int:
        return self.value[1]

    @property
    def agentcore_code(self) -> str:
        return self.value[2]


# AgentCore (§7.2) fixes one HTTP status per SSE code; /invocations answers with these.
AGENTCORE_STATUS = {
    "UNAUTHORIZED": 401,
    "ACCESS_DENIED": 403,
    "VALIDATION_ERROR": 400,
    "RATE_LIMIT_EXCEEDED": 429,
    "SESSION_BUSY": 409,
    "SERVICE_QUOTA_EXCEEDED": 429,
    "AGENT_ERROR": 200,
    "INTERNAL_ERROR": 500,
}


class GatewayError(Exception):
    """An error with a contract code; `field` names the offending input, `detail` adds technical context."""

    def __init__(
        self,
        code: ErrorCode,
        field: str | None = None,
        detail: str | None = None,
        *,
        http_status: int | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {field or ''} {detail or ''}".strip())
        self.code = code
        self.field = field
        self.detail = detail
        self.http_status = http_status or code.http_status
        self.headers: dict[str, str] = {}  # e.g. Retry-After, WWW-Authenticate
        self.language: str | None = None  # the caller's language, when known before the error
        # An upstream agent's own RUN_ERROR, shown as it came (its code and message) instead of the catalogue's.
        self.agent_code: str | None = None
        self.agent_message: str | None = None
