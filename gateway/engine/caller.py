"""Who asks, as the engine needs it, and how that scopes threads.

A thread belongs to the principal that created it: with authentication, the store keys a thread by the
principal's identity and the client's threadId together. Another principal naming the same threadId
reaches a different (empty) thread, so it can neither act on the first nor learn that it exists: a
resume answers UNKNOWN_INTERRUPT, a cancel EXECUTION_NOT_FOUND, exactly as for an unknown thread.
Without authentication the key is the threadId itself, bound by the client's userId as the contract says.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gateway.errors import ErrorCode, GatewayError


@dataclass(frozen=True, slots=True)
class Caller:
    owner: str | None = None  # the binding identity (None: unauthenticated)
    user_id: str | None = None  # the user the credential asserts; a client-sent userId must equal it


ANONYMOUS = Caller()


def thread_key(caller: Caller, thread_id: str) -> str:
    """The store's key for a thread: the threadId, scoped to its principal when there is one."""
    if caller.owner is None:
        return thread_id
    return f"p-{hashlib.sha256(caller.owner.encode()).hexdigest()[:24]}:{thread_id}"


def list_scope(caller: Caller, user_id: str | None) -> str:
    """Whose thread list a thread is in: its principal's, and within it the userId the thread is bound to (holders of
    the static token, and everyone without authentication, share a principal; their userId tells their lists apart)."""
    owner = "" if caller.owner is None else hashlib.sha256(caller.owner.encode()).hexdigest()[:24]
    return f"{owner}|{user_id or ''}"


def check_user_id(caller: Caller, user_id: str | None) -> None:
    if caller.user_id is not None and user_id is not None and user_id != caller.user_id:
        raise GatewayError(ErrorCode.ACCESS_DENIED, "forwardedProps.iacCode.userId", "The userId must be the authenticated user's.")
