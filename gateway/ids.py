"""Random identifiers (request ids, execution ids, nonces, message ids) from the operating system's CSPRNG, read
4 KiB at a time: a run needs four or five of them, and a `getrandom` call each would release and take back the GIL
at every one (the file store's I/O thread holds the GIL between)."""

from __future__ import annotations

import os
import threading

_CHUNK = 4096


class _Pool(threading.local):
    """Each thread's own unread randomness: no two threads ever hand out the same bytes."""

    def __init__(self) -> None:
        self.data = b""
        self.at = 0


_pool = _Pool()


def _forget_after_fork() -> None:
    _pool.data, _pool.at = b"", 0  # a forked child never hands out what its parent may still hand out


os.register_at_fork(after_in_child=_forget_after_fork)


def random_hex(nbytes: int) -> str:
    """`nbytes` random bytes as hex, as `os.urandom(nbytes).hex()` gives them."""
    pool = _pool
    at = pool.at
    if at + nbytes > len(pool.data):
        pool.data, at = os.urandom(max(_CHUNK, nbytes)), 0
    pool.at = at + nbytes
    return pool.data[at : at + nbytes].hex()
