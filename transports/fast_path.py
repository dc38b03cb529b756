"""The run routes and `/ws` served past Litestar's router: the frames a long stream keeps alive, at their fewest.

Through Litestar, an idle stream keeps the router, the exception middleware (twice on a WebSocket), the hygiene
middleware, RunRoutes and the route's own handler frames alive for its whole life: about 2 KiB per idle SSE run
and 2.8 KiB per idle WebSocket (bench/idle.py). `FastPath` wraps Litestar's ASGI handler (inside `Litestar.__call__`, which has
set the scope's app and state): a POST to exactly `/` or `/invocations`, or a WebSocket on exactly `/ws`, that
passes the hygiene checks goes through the access log straight to its handler. Anything else (other paths and
methods, a trailing slash, a root path, a refusal) is Litestar's, where the same handlers serve it.

Private state relied on (written for Litestar 2.25; pinned in pyproject.toml): `Litestar.asgi_handler`, the
scope's `litestar_app`, and a route handler's `fn`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from litestar import Litestar
from litestar.types import ASGIApp, Receive, Scope, Send

from transports.access_log import AccessLog
from transports.fallback import refusal
from transports.sse import serve_run
from transports.websocket import serve_socket


class FastPath:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._routes: dict[tuple[str, str], Callable[[Scope, Receive, Send], Awaitable[None]]] = {
            ("POST", "/"): AccessLog(partial(serve_run, agentcore=False)),
            ("POST", "/invocations"): AccessLog(partial(serve_run, agentcore=True)),
            ("WS", "/ws"): AccessLog(serve_socket),
        }

    def route(self, scope: Scope) -> Callable[[Scope, Receive, Send], Awaitable[None]] | None:
        """The direct handler for this request, or None when it is Litestar's."""
        kind = scope["type"]
        direct = self._routes.get(("WS" if kind == "websocket" else str(scope.get("method", "")), scope["path"]))
        return direct if direct is not None and (kind != "http" or refusal(scope) is None) else None

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the coroutine to await rather than awaiting it: no frame of its own for the life of a stream.
        direct = self.route(scope)
        return direct(scope, receive, send) if direct is not None else self.app(scope, receive, send)


class Outermost:
    """The application as our own server serves it: the same direct routes, taken before `Litestar.__call__`, whose
    frame every idle stream and socket kept (about 0.26 KiB each). It does what that call does for them (the scope's
    app and state; the app has no before-send hooks) and returns the handler's coroutine rather than awaiting it, so
    the server must be told the interface (uvicorn: `interface="asgi3"`, in server/serve.py). An embedder
    serving the Litestar app itself gets the same routes from `FastPath`, one frame deeper."""

    __slots__ = ("app", "fast")

    def __init__(self, app: Litestar) -> None:
        if not isinstance(app.asgi_handler, FastPath) or app.before_send:
            raise ValueError("Outermost serves an app built by create_app")
        self.app = app
        self.fast = app.asgi_handler

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        direct = self.fast.route(scope) if scope["type"] != "lifespan" else None
        if direct is None:
            return self.app(scope, receive, send)
        scope["app"] = scope["litestar_app"] = self.app
        scope.setdefault("state", {})
        return direct(scope, receive, send)
