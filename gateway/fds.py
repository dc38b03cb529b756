"""File descriptors: each stream or socket holds one, so the soft limit is raised to the hard one at start (when
the process may), one client address may hold only a share of them, a burst of new connections stops before the
reserve, and /health reports both limits with the number open now."""

from __future__ import annotations

import logging
import os
import resource

log = logging.getLogger("agui.serve")
CEILING = 1 << 20  # what "unlimited" is raised to (the kernel's usual nr_open)
RESERVED = 64  # descriptors kept for the store, its journal and segments, the listener, the agent's connections
CLIENT_SHARE = 4  # one client address may hold at most 1/CLIENT_SHARE of the rest


def raise_fd_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns (soft, hard) as they stand afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    targets = [CEILING, 1 << 16] if hard == resource.RLIM_INFINITY else [hard]
    for target in targets:
        if soft == resource.RLIM_INFINITY or soft >= target:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            break
        except (ValueError, OSError) as exc:
            log.warning("could not raise the file descriptor limit from %d to %d (%s)", soft, target, exc)
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def fd_report() -> dict[str, int | None]:
    """{soft, hard, open}: the limits, and the descriptors open now (None where /proc is not there)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        opened: int | None = len(os.listdir("/proc/self/fd"))
    except OSError:
        opened = None
    infinite = resource.RLIM_INFINITY
    return {"soft": None if soft == infinite else soft, "hard": None if hard == infinite else hard, "open": opened}


def descriptor_share() -> int | None:
    """A quarter of the descriptors this process may open beyond its reserve (None: no limit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(1, (soft - RESERVED) // CLIENT_SHARE)


def free_before_reserve(probe: int) -> int | None:
    """Descriptors this process may still open before it reaches its reserve (None: no limit), found by copying the
    open descriptor `probe`. The kernel gives a new descriptor the lowest number free, so the copy's number counts
    those open below it; those open above a gap go uncounted until new ones fill it. Counting /proc/self/fd
    instead is exact, but costs a directory read that grows with the descriptors open."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        lowest = os.dup(probe)
    except OSError:  # none free at all
        return 0
    os.close(lowest)
    return max(0, soft - RESERVED - lowest)


def per_client_cap(configured: int) -> int:
    """The open connections one client address may hold: the configured cap (0: none), within a share of the
    descriptors this process may open, so that one address cannot take them all from the others."""
    share = descriptor_share()
    if configured == 0 or share is None:
        return configured
    if share < configured:
        log.info("connections per client address: %d (a share of the descriptor limit; --max-connections-per-client %d)", share, configured)
    return min(configured, share)
