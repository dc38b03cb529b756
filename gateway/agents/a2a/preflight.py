"""Before an answer is sent (IAC_CODE_A2A_WIRE.md §4 preflight, §5): session restore, GetTask, pipeline recovery."""

from __future__ import annotations

from typing import Any

import httpx

from gateway.agents import signals as s
from gateway.agents.a2a.client import A2AClient, A2AError
from gateway.agents.a2a.frames import TERMINAL_STATES, FrameReader, normalise_state
from gateway.agents.a2a.pipeline import snapshot_signal

BACKUP_NOT_READY = "SESSION_BACKUP_NOT_READY"
TASK_NOT_FOUND = -32001  # the A2A error code of an unknown task


def unavailable(exc: BaseException) -> s.Failed:
    return s.Failed(message=f"The agent is unavailable ({type(exc).__name__}).", code="A2A_UNAVAILABLE")


def error_codes(error: dict[str, Any]) -> set[str]:
    """The runtime's codes in a JSON-RPC error's `data`: `{"code": …}` as the runtime writes it, or A2A 1.0's error
    details as a2a-sdk 1.3 sends them, a list of `google.rpc.ErrorInfo` whose `metadata` holds those fields."""
    data = error.get("data")
    details = data if isinstance(data, list) else [data]
    codes = set()
    for detail in details:
        if isinstance(detail, dict):
            for fields in (detail, detail.get("metadata")):
                if isinstance(fields, dict) and isinstance(fields.get("code"), str):
                    codes.add(fields["code"])
    return codes


def refused(exc: A2AError) -> s.Failed:
    """A JSON-RPC error instead of the answer's first frame: retryable, and the interrupt stays pending."""
    if BACKUP_NOT_READY in error_codes(exc.error):
        return s.Failed(message="The agent's session backup is not ready yet; retry the answer.", code=BACKUP_NOT_READY)
    return s.Failed(message=f"The agent did not take the answer: {str(exc)[:300]}", code="A2A_UNAVAILABLE")


async def restore(client: A2AClient, cwd: str, session_id: str | None, task_id: str) -> s.Failed | None:
    """`POST /iac-code/session/ensure-restored`, only when a session id is known and the agent offers it."""
    if not session_id:
        return None
    try:
        response = await client.extension(
            "POST", "/iac-code/session/ensure-restored", json={"cwd": cwd, "sessionId": session_id, "taskId": task_id}
        )
    except httpx.HTTPError as exc:
        return unavailable(exc)
    if response is None or response.status_code == 200:
        return None
    if response.status_code == 404:
        return s.Failed(message="The agent could not restore the session.", code="EXECUTION_LOST")
    body = _json(response)
    nested = body.get("error")
    error: dict[str, Any] = nested if isinstance(nested, dict) else body
    if response.status_code == 409 and error.get("code") == BACKUP_NOT_READY:
        return s.Failed(message="The agent's session backup is not ready yet; retry the answer.", code=BACKUP_NOT_READY)
    retry = "; retry the answer" if error.get("retryable") is True else ""
    return s.Failed(message=f"Session restore failed (HTTP {response.status_code}){retry}.", code="A2A_UNAVAILABLE")


async def check_task(client: A2AClient, reader: FrameReader) -> s.Failed | None:
    """`GetTask`: the task must still be the bound one, in the bound context, and not ended."""
    assert reader.task_id is not None
    try:
        task = await client.call("GetTask", {"id": reader.task_id, "historyLength": 100})
    except A2AError as exc:
        if exc.error.get("code") == TASK_NOT_FOUND:
            return s.Failed(message="The agent no longer knows the task this answer is for.", code="EXECUTION_LOST")
        return refused(exc)
    except (httpx.HTTPError, OSError) as exc:
        return unavailable(exc)
    task = task.get("task", task) if isinstance(task, dict) else {}
    if task.get("id", reader.task_id) != reader.task_id or task.get("contextId", reader.context_id) != reader.context_id:
        return s.Failed(message="The agent reports another task or context for this answer.", code="A2A_PROTOCOL_ERROR")
    state = normalise_state((task.get("status") or {}).get("state"))
    if state in TERMINAL_STATES:
        return s.Failed(message=f"The task already ended ({state}).", code="EXECUTION_LOST")
    return None


async def recover_pipeline(client: A2AClient, reader: FrameReader, after: int | None = None) -> list[s.Signal]:
    """`GET /iac-code/pipeline/state`: one ACTIVITY_SNAPSHOT, then the events after the cursor (or `after`),
    de-duplicated against what was already shown."""
    cursor = reader.pipeline.cursor if after is None else after
    try:
        response = await client.extension("GET", "/iac-code/pipeline/state", params={"taskId": reader.task_id, "afterSequence": cursor})
    except httpx.HTTPError:
        return []
    if response is None or response.status_code != 200:
        return []
    state = _json(response)
    out: list[s.Signal] = []
    snapshot = state.get("snapshot")
    if isinstance(snapshot, dict):
        out.append(snapshot_signal(snapshot))
    for envelope in state.get("events") or []:
        if isinstance(envelope, dict):
            reader.envelope(envelope, out, recovered=True)
    if isinstance(snapshot, dict):
        reader.pipeline.advance(snapshot.get("lastSequence"))
    return out


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
