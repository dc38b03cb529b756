"""The JSON documents a run's events carry (its shared state, its activities, snapshots), checked before they are
sent: a patch applies to the document as the client holds it or the run fails, and every document is bounded.

Patches are applied to a copy under a budget (`patching`): one that fails half way leaves the document as it was, and
one that would grow the document past its bound, or cost more than MAX_PATCH_WORK bytes of work, is refused before
that work is done."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.engine import patching
from gateway.errors import ErrorCode, GatewayError

MAX_STATE_BYTES = 1024 * 1024  # one state document, as JSON, after each snapshot or patch
MAX_PATCH_BYTES = 256 * 1024  # one STATE_DELTA or ACTIVITY_DELTA patch
# Bytes one patch may encode, copy, remove or compare: a patch that copies the whole state eight times is refused.
MAX_PATCH_WORK = 8 * MAX_STATE_BYTES
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024  # one MESSAGES_SNAPSHOT, one RAW or CUSTOM value, one activity
UNSET: Any = msgspec.UNSET  # no state known yet (a request with the iacCode extension): a patch needs a snapshot first


def refused(detail: str) -> GatewayError:
    """The error that ends the run; `detail` (a clause) becomes the sentence after the catalogue's message."""
    return GatewayError(ErrorCode.AGENT_PROTOCOL_ERROR, detail=detail[:1].upper() + detail[1:] + ".")


def bounded(value: Any, limit: int, what: str) -> Any:
    """`value` when it is JSON within `limit` bytes, else the refusal that ends the run."""
    _bounded_size(value, limit, what)
    return value


def _bounded_size(value: Any, limit: int, what: str) -> int:
    try:
        size = len(msgspec.json.encode(value))
    except (TypeError, msgspec.EncodeError) as exc:
        raise refused(f"{what} is not JSON ({exc})") from None
    if size > limit:
        raise refused(f"{what} is {size} bytes, past its bound of {limit}")
    return size


def patched(document: Any, patch: list[dict[str, Any]], what: str) -> Any:
    """`document` with the RFC 6902 `patch` applied, or the refusal that ends the run (nothing is applied)."""
    patch_size = _bounded_size(patch, MAX_PATCH_BYTES, f"the {what} patch")
    if document is UNSET:
        raise refused(f"a {what} patch came before any {what} snapshot")
    try:
        result = patching.apply(document, patch, MAX_STATE_BYTES, MAX_PATCH_WORK, slack=patch_size)
    except patching.PatchRefused as exc:
        raise refused(f"the {what} patch does not apply: {exc}") from None
    except (TypeError, msgspec.EncodeError) as exc:
        raise refused(f"the {what} is not JSON ({exc})") from None
    return bounded(result, MAX_STATE_BYTES, f"the {what} after its patch")
