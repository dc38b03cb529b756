"""The JSON documents a run's events carry (its shared state, its activities, snapshots), checked before they are
sent: a patch applies to the document as the client holds it or the run fails, and every document is bounded.

Patches are applied with `jsonpatch` (RFC 6902, with RFC 6901 pointers) to a copy, so a patch that fails half way
leaves the document as it was."""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer
import msgspec

from gateway.errors import ErrorCode, GatewayError

MAX_STATE_BYTES = 1024 * 1024  # one state document, as JSON, after each snapshot or patch
MAX_PATCH_BYTES = 256 * 1024  # one STATE_DELTA or ACTIVITY_DELTA patch
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024  # one MESSAGES_SNAPSHOT, one RAW or CUSTOM value, one activity
UNSET: Any = msgspec.UNSET  # no state known yet (a request with the iacCode extension): a patch needs a snapshot first


def refused(detail: str) -> GatewayError:
    """The error that ends the run; `detail` (a clause) becomes the sentence after the catalogue's message."""
    return GatewayError(ErrorCode.AGENT_PROTOCOL_ERROR, detail=detail[:1].upper() + detail[1:] + ".")


def bounded(value: Any, limit: int, what: str) -> Any:
    """`value` when it is JSON within `limit` bytes, else the refusal that ends the run."""
    try:
        size = len(msgspec.json.encode(value))
    except (TypeError, msgspec.EncodeError) as exc:
        raise refused(f"{what} is not JSON ({exc})") from None
    if size > limit:
        raise refused(f"{what} is {size} bytes, past its bound of {limit}")
    return value


def patched(document: Any, patch: list[dict[str, Any]], what: str) -> Any:
    """`document` with the RFC 6902 `patch` applied, or the refusal that ends the run (nothing is applied)."""
    bounded(patch, MAX_PATCH_BYTES, f"the {what} patch")
    if document is UNSET:
        raise refused(f"a {what} patch came before any {what} snapshot")
    try:
        result = jsonpatch.apply_patch(document, patch, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, KeyError, IndexError, ValueError) as exc:
        raise refused(f"the {what} patch does not apply: {str(exc)[:200]}") from None
    return bounded(result, MAX_STATE_BYTES, f"the {what} after its patch")
