"""The Lua scripts' side of the wire: their sources (with the bounds defined once, in Python), the keys they work
on, and the encodings of their arguments and replies."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import Any

import msgspec

from store.base import Lease, Progress, Rejected, Rejection
from store.records import Execution, PendingInterrupt

LUA_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "lua")
SCRIPTS = (
    "admit",
    "accept_resume",
    "save_interrupt",
    "finish_run",
    "cancel",
    "stop",
    "leave_queue",
    "renew",
    "rate_limit",
    "adopt",
    "mark_adoptable",
)
DURABLE_SCRIPTS = frozenset({"admit", "accept_resume", "save_interrupt", "finish_run", "cancel", "stop"})  # WAITed when replicated
_LIST_FIELDS = ("pending", "answered_ids", "open_steps")
_decode = msgspec.json.Decoder().decode


@functools.lru_cache(maxsize=1024)  # a run asks four times (admission, end), within its few hundred ms
def thread_key(thread_id: str) -> str:
    """Every key of a thread carries the hash tag {t:<digest>} so scripts work on Redis Cluster."""
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"agui:{{t:{digest}}}:state"


def history_keys(state_key: str) -> tuple[str, str, str]:
    """A thread's conversation, summary and meta keys, beside its state (the same hash tag)."""
    tag = state_key[: -len(":state")]
    return f"{tag}:conv", f"{tag}:summary", f"{tag}:meta"


def list_key(scope: str) -> str:
    """A principal's thread list (a sorted set of thread keys by when each was written): its own hash tag, so on a
    Cluster it is written beside, not with, a thread's state."""
    digest = hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"agui:{{l:{digest}}}:threads"


def script_source(name: str, bounds: dict[str, float]) -> str:
    """The bounds as Lua locals, then the shared helpers, then the script: constants are defined once, in Python."""
    header = "".join(f"local {key} = {value!r}\n" for key, value in bounds.items())
    with open(os.path.join(LUA_DIR, "lib.lua")) as lib, open(os.path.join(LUA_DIR, f"{name}.lua")) as body:
        return header + lib.read() + "\n" + body.read()


def lease_argument(lease: Lease) -> dict[str, Any]:
    return {"run_id": lease.run_id, "execution_id": lease.execution_id, "fence": lease.fence}


def progress_argument(progress: Progress) -> dict[str, Any]:
    return {"sequence": progress.sequence, "identities": progress.identities}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []  # cjson writes an empty array as {}


def execution_of(raw: Any) -> Execution | None:
    """A script's execution table as an Execution (blobs decoded, empty tables read as lists)."""
    if not isinstance(raw, dict):
        return None
    raw = dict(raw)
    for name in _LIST_FIELDS:
        raw[name] = as_list(raw.get(name))
    raw["pending"] = [
        {
            **p,
            "wire": json.loads(p["wire"]),
            "response_schema": json.loads(p["response_schema"]) if isinstance(p.get("response_schema"), str) else None,
        }
        for p in raw["pending"]
    ]
    checkpoint = raw.get("checkpoint")
    raw["checkpoint"] = json.loads(checkpoint) if isinstance(checkpoint, str) else None
    if not isinstance(raw.get("applied"), dict):
        raw["applied"] = {}
    return msgspec.convert(raw, Execution)


def pending_argument(pending: list[PendingInterrupt]) -> list[dict[str, Any]]:
    """Pending interrupts with their opaque members as JSON strings (cjson must never rewrite them)."""
    return [
        {
            "id": p.id,
            "reason": p.reason,
            "wire": json.dumps(p.wire),
            "response_schema": json.dumps(p.response_schema) if p.response_schema is not None else None,
            "tool_call_id": p.tool_call_id,
            "expires_at": p.expires_at,
        }
        for p in pending
    ]


def reply(raw: Any) -> dict[str, Any]:
    """A script's JSON reply (cjson's, never NaN: decoded by msgspec);
    a refusal in it becomes Rejected."""
    result: dict[str, Any] = _decode(raw)
    if result.get("error"):
        field = result.get("field")
        raise Rejected(Rejection(result["error"]), field if isinstance(field, str) else None)
    return result
