"""The tuning annex: what makes the gateway faster or lighter by relying on a library's private state, one switch
per library. Each part is on only with `--tuning on` (the default) and an installed version of its library that
the part was written for (`WRITTEN_FOR`, the pins of pyproject.toml); a part whose library is another version is
left off with one log line, and the gateway serves that library's public path. Only the figures move with it
(docs/architecture.md has them), never what a client or an operator sees.

- litestar: the run routes and /ws answered before Litestar's router (transports/fast_path.py), and the scope
  entries a stream keeps dropped once it starts (transports/lean.py `forget_request`);
- uvicorn: the HTTP protocols' lean per-connection state (declared slots, the pipelined requests' list, lighter
  events: server/http_protocol.py), the burst acceptor (server/accept_burst.py) and the idle poll (server/awake.py);
- websockets: the corked WebSocket protocol with its direct text frames and batches (server/ws_protocol.py);
- redis: the scripts pipelined onto one connection and read with hiredis (store/redis/wire.py).

What is behaviour stays on whatever this says: the connection limits, the send deadline and the per-address cap
(server/connection_limits.py, checked at start by `check_limits`), and the graceful drain (server/serve.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

log = logging.getLogger("agui.annex")

# The release series each part was written for: the pins of pyproject.toml (a unit test keeps them equal).
WRITTEN_FOR = {"litestar": "2.25", "uvicorn": "0.54", "websockets": "17", "redis": "8.1"}
WHAT = {
    "litestar": "the run routes before Litestar's router",
    "uvicorn": "lean HTTP connections, the burst acceptor and the idle poll",
    "websockets": "the corked WebSocket protocol",
    "redis": "the pipelined Redis wire",
}


class LibraryChanged(RuntimeError):
    """A library whose private state the connection limits rely on is a version they were not written for."""


@dataclass(frozen=True)
class Annex:
    litestar: bool = False
    uvicorn: bool = False
    websockets: bool = False
    redis: bool = False


def _installed(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def written_for(name: str) -> bool:
    """Whether the installed version of `name` is of the series its part was written for."""
    installed, series = _installed(name), WRITTEN_FOR[name]
    return installed is not None and (installed == series or installed.startswith(series + "."))


def annex_of(tuning: str) -> Annex:
    """The parts on for `--tuning` here; a part left off by its library's version is logged once, in one line."""
    if tuning == "off":
        log.info("tuning off: serving on the public paths of Litestar, uvicorn, websockets and redis-py")
        return Annex()
    parts = {name: written_for(name) for name in WRITTEN_FOR}
    for name, on in parts.items():
        if not on:
            log.warning(
                "%s %s is not %s.x, which %s was written for: served on its public path",
                name,
                _installed(name),
                WRITTEN_FOR[name],
                WHAT[name],
            )
    return Annex(**parts)


def check_limits() -> None:
    """The connection limits adapt uvicorn's HTTP and WebSocket protocols (a class uvicorn takes as its `http` and
    `ws` settings) and read their state: refuse to serve unprotected on a uvicorn they were not written for."""
    if not written_for("uvicorn"):
        raise LibraryChanged(
            f"uvicorn {_installed('uvicorn')} is not {WRITTEN_FOR['uvicorn']}.x, which the connection limits were written for: "
            "refusing to serve without them"
        )
