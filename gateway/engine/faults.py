"""Foreign failures become contract errors here, at the engine's edge: store refusals and outages, backend crashes."""

from __future__ import annotations

from typing import Literal

from gateway.agents import signals as s
from gateway.errors import ErrorCode, GatewayError
from store import Rejected, Rejection, StoreUnavailable

_REJECTION_CODES = {
    Rejection.THREAD_BINDING_CONFLICT: ErrorCode.THREAD_BINDING_CONFLICT,
    Rejection.DUPLICATE_RUN_ID: ErrorCode.DUPLICATE_RUN_ID,
    Rejection.RUN_ID_CONFLICT: ErrorCode.RUN_ID_CONFLICT,
    Rejection.THREAD_BUSY: ErrorCode.THREAD_BUSY,
    Rejection.RESUME_REQUIRED: ErrorCode.RESUME_REQUIRED,
    Rejection.LEASE_LOST: ErrorCode.EXECUTION_LOST,
    Rejection.CANCELLED: ErrorCode.EXECUTION_LOST,  # only seen by save_interrupt, which handles it first
}

STORE_FAILURES = (Rejected, StoreUnavailable)


class _AsContractError:
    """`with as_contract_error:` a store failure inside the block is raised as the contract's error (`store_error`)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> Literal[False]:
        if isinstance(exc, STORE_FAILURES):
            raise store_error(exc) from None
        return False


as_contract_error = _AsContractError()


def store_error(exc: Rejected | StoreUnavailable) -> GatewayError:
    if isinstance(exc, Rejected):
        return GatewayError(_REJECTION_CODES[exc.reason], exc.field)
    return GatewayError(ErrorCode.STATE_PERSISTENCE_FAILED)


def backend_error(exc: Exception) -> GatewayError:
    """A backend that raises is a failed task: unreachable (connection errors) or failed."""
    code = ErrorCode.A2A_UNAVAILABLE if isinstance(exc, (ConnectionError, OSError)) else ErrorCode.A2A_EXECUTION_FAILED
    return GatewayError(code)


def failed_signal_error(signal: s.Failed) -> GatewayError:
    """A backend's own failure report, with its code when it names one of ours."""
    code = ErrorCode[signal.code] if signal.code in ErrorCode.__members__ else ErrorCode.A2A_EXECUTION_FAILED
    error = GatewayError(code, detail=signal.message[:500])
    if signal.as_sent:
        error.agent_code, error.agent_message = signal.code[:100], signal.message[:2000]
    return error
