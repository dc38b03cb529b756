"""The replica's memory budget for live runs (`--max-live-run-bytes`): the bytes of the events their rings hold.

Each ring charges what it appends and credits what it trims or drops. While the live runs hold the whole budget, a
new run is refused (429 SERVICE_QUOTA_EXCEEDED); while they hold more, a run whose ring holds more than its share
(the budget over the rings alive) is cut, never the replica. Each event is charged its bytes and EVENT_OVERHEAD,
the object and the ring's slot that hold them."""

from __future__ import annotations

EVENT_OVERHEAD = 41  # a bytes object's header and its slot in the ring's list, on 64-bit CPython


class LiveBytes:
    """One per engine. `limit` 0: no budget (the account is still kept, for /health and the gauge)."""

    __slots__ = ("limit", "rings", "used")

    def __init__(self, limit: int = 0) -> None:
        self.limit = limit
        self.used = 0  # bytes the live rings hold
        self.rings = 0  # rings alive (live runs, and ended ones whose followers still read)

    def opened(self) -> None:
        self.rings += 1

    def closed(self, charged: int) -> None:
        self.rings -= 1
        self.used -= charged

    @property
    def full(self) -> bool:
        """New runs are refused (429 SERVICE_QUOTA_EXCEEDED): the live runs hold the whole budget."""
        return 0 < self.limit <= self.used

    def over_share(self, held: int) -> bool:
        """Whether a ring holding `held` bytes is to be cut: the budget is passed, and this ring holds more than the
        budget shared among the rings alive."""
        return 0 < self.limit < self.used and held * max(1, self.rings) > self.limit

    def report(self) -> dict[str, int]:
        return {"used": self.used, "limit": self.limit, "rings": self.rings}


UNBOUNDED = LiveBytes()  # for rings made without an engine's account (tests, tools)
