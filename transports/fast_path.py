"""The one entrance of the run routes and `/ws`, before Litestar's router: the frames a long stream keeps alive, at
their fewest.

Through Litestar, an idle stream would keep the router, the exception middleware (twice on a WebSocket), the
middleware stack and the route's own handler frames alive for its whole life (bench/idle.py measures an idle
stream's and socket's memory). `FastPath` wraps Litestar's ASGI handler (inside `Litestar.__call__`,
which has set the scope's app and state) and answers, through the access log:
- every HTTP request `refusal` names (request smuggling, a NUL in the path), whatever its path;
- `POST /` and `POST /invocations` (the run), `OPTIONS` on them (204 with `Allow`), and any other method on them or
  on `/ws` (METHOD_NOT_ALLOWED, an SSE RUN_ERROR on `/invocations`);
- a WebSocket on `/ws`;
- `POST /agents/{agentId}` (an agent's run: transports/agents.py);
- every request under `--copilotkit-path` (transports/copilotkit.py: its runs stream as `POST /`'s do).
Paths are read as Litestar's router reads them (`//` and a trailing `/` name the same route). Everything else is
Litestar's, whose own handlers for these routes (transports/run_routes.py) give the same answers.

Part of the tuning annex (server/annex.py): it relies on Litestar's private state (written for Litestar 2.25;
pinned in pyproject.toml): `Litestar.asgi_handler` and the scope's `litestar_app`. Without it (`--tuning off`, or
another Litestar), the same routes are Litestar's own handlers (transports/run_routes.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from litestar import Litestar
from litestar.types import ASGIApp, Receive, Scope, Send

from transports.access_log import AccessLog
from transports.agents import AGENTS_PREFIX, agent_run
from transports.copilotkit import copilotkit_answer
from transports.fallback import RUN_ALLOW, canonical, other_method, refusal, refuse
from transports.render import Dialect
from transports.sse import run_route, serve_answer
from transports.websocket import serve_socket

Handler = Callable[[Scope, Receive, Send], Awaitable[None]]


class FastPath:
    __slots__ = ("_agent_run", "_copilotkit", "_not_here", "_refuse", "_runs", "_socket", "app", "copilotkit_path")

    def __init__(self, app: ASGIApp, copilotkit_path: str = "") -> None:
        self.app = app
        self.copilotkit_path = copilotkit_path  # "" : CopilotKit's endpoints are off
        self._copilotkit: Handler = AccessLog(partial(serve_answer, answering=copilotkit_answer))
        self._agent_run: Handler = AccessLog(partial(serve_answer, answering=agent_run))
        self._runs: dict[str, tuple[Handler, Handler]] = {
            path: (AccessLog(partial(serve_answer, answering=run_route(dialect))), AccessLog(partial(other_method, allow=RUN_ALLOW)))
            for path, dialect in (("/", Dialect.SSE), ("/invocations", Dialect.INVOCATIONS))
        }
        self._socket: Handler = AccessLog(serve_socket)
        self._not_here: Handler = AccessLog(partial(other_method, allow=None))  # /ws over plain HTTP
        self._refuse: Handler = AccessLog(refuse)

    def route(self, scope: Scope) -> Handler | None:
        """The direct handler for this request, or None when it is Litestar's."""
        kind = scope["type"]
        if kind == "websocket":
            return self._socket if canonical(scope["path"]) == "/ws" else None
        if kind != "http":
            return None
        if refusal(scope) is not None:
            return self._refuse
        path = canonical(scope["path"])
        handlers = self._runs.get(path)
        if handlers is not None:
            return handlers[0] if scope.get("method") == "POST" else handlers[1]
        if path == "/ws":
            return self._not_here
        if path.startswith(AGENTS_PREFIX) and scope.get("method") == "POST" and "/" not in path[len(AGENTS_PREFIX) :]:
            return self._agent_run
        base = self.copilotkit_path
        if base and path.startswith(base) and (len(path) == len(base) or path[len(base)] == "/"):
            return self._copilotkit
        return None

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the coroutine to await rather than awaiting it: no frame of its own for the life of a stream.
        direct = self.route(scope)
        return direct(scope, receive, send) if direct is not None else self.app(scope, receive, send)


class Outermost:
    """The application as our own server serves it: the same direct routes, taken before `Litestar.__call__`, whose
    frame every idle stream and socket would keep. It does what that call does for them (the scope's
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
        direct = self.fast.route(scope)
        if direct is None:
            return self.app(scope, receive, send)
        scope["app"] = scope["litestar_app"] = self.app
        scope.setdefault("state", {})
        return direct(scope, receive, send)
