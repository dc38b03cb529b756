"""The transport-agnostic run engine: prepare input, admit it, drive the backend, translate, settle, cancel."""

from gateway.engine.caller import ANONYMOUS, Caller
from gateway.engine.engine import RunEngine
from gateway.engine.handle import RunHandle
from gateway.engine.logwriter import LogPolicy
from gateway.engine.prepare import PreparedRun, prepare
from gateway.engine.stream import Bounds
from store import CancelStatus  # what cancel and stop answer

__all__ = ["ANONYMOUS", "Bounds", "Caller", "CancelStatus", "LogPolicy", "PreparedRun", "RunEngine", "RunHandle", "prepare"]
