"""The AgentCore ping status (Healthy / HealthyBusy) of this replica, moved by the engine and by draining."""

from __future__ import annotations

import time


class BusyStatus:
    """AgentCore ping status whose timestamp moves only when the status changes."""

    def __init__(self) -> None:
        self.busy = False
        self.draining = False
        self.status = "Healthy"
        self.since = int(time.time())

    def _update(self) -> None:
        status = "HealthyBusy" if (self.busy or self.draining) else "Healthy"
        if status != self.status:
            self.status = status
            self.since = int(time.time())

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        self._update()

    def set_draining(self) -> None:
        self.draining = True
        self._update()
