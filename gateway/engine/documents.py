"""The JSON documents a run's events carry (its shared state, its activities, snapshots), checked before they are
sent: a patch applies to the document as the client holds it or the run fails, and every document is bounded.

Patches are applied to a copy under a budget (`patching`): one that fails half way leaves the document as it was, and
one that would grow the document past its bound, or cost more than `patch_work` bytes of work, is refused before
that work is done."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.engine import patching
from gateway.errors import ErrorCode, GatewayError

# One state document or messages snapshot, as JSON, after each snapshot or patch: the default of --max-state-bytes. A
# request of 12 MiB carries a conversation about twice (its messages, and a state that holds them, as LangGraph's does).
MAX_STATE_BYTES = 8 * 1024 * 1024
MAX_ACTIVITY_BYTES = 1024 * 1024  # one activity's content, after each snapshot or patch
MAX_PATCH_BYTES = 256 * 1024  # one STATE_DELTA or ACTIVITY_DELTA patch
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024  # one activity snapshot, RAW event or CUSTOM value
UNSET: Any = msgspec.UNSET  # no state known yet (a request with the iacCode extension): a patch needs a snapshot first


def refused(detail: str) -> GatewayError:
    """The error that ends the run; `detail` (a clause) becomes the sentence after the catalogue's message."""
    return GatewayError(ErrorCode.AGENT_PROTOCOL_ERROR, detail=detail[:1].upper() + detail[1:] + ".")


STATE_FLAG = "--max-state-bytes"


def bounded(value: Any, limit: int, what: str, flag: str | None = None) -> Any:
    """`value` when it is JSON within `limit` bytes, else the refusal that ends the run (naming the `flag` that sets
    the bound, when one does)."""
    _bounded_size(value, limit, what, flag)
    return value


def _bounded_size(value: Any, limit: int, what: str, flag: str | None = None) -> int:
    try:
        size = len(msgspec.json.encode(value))
    except (TypeError, msgspec.EncodeError) as exc:
        raise refused(f"{what} is not JSON ({exc})") from None
    if size > limit:
        raise refused(f"{what} is {size} bytes, past the gateway's bound of {limit}" + (f" ({flag})" if flag else ""))
    return size


def patch_work(limit: int) -> int:
    """Bytes one patch may encode, copy, remove or compare on a document bounded by `limit`: replacing the whole
    document fits, copying it over and over does not."""
    return 2 * limit + 8 * 1024 * 1024


def patched(document: Any, patch: list[dict[str, Any]], what: str, limit: int = MAX_ACTIVITY_BYTES, flag: str | None = None) -> Any:
    """`document` with the RFC 6902 `patch` applied, or the refusal that ends the run (nothing is applied)."""
    patch_size = _bounded_size(patch, MAX_PATCH_BYTES, f"the {what} patch")
    if document is UNSET:
        raise refused(f"a {what} patch came before any {what} snapshot")
    try:
        result = patching.apply(document, patch, limit, patch_work(limit), slack=patch_size)
    except patching.PatchRefused as exc:
        raise refused(f"the {what} patch does not apply: {exc}" + (f" ({flag})" if flag else "")) from None
    except (TypeError, msgspec.EncodeError) as exc:
        raise refused(f"the {what} is not JSON ({exc})") from None
    return bounded(result, limit, f"the {what} after its patch", flag)
