"""`/ws`: runs over WebSocket on the same engine. Base mode: one RunAgentInput frame in, one bare event per frame out.

Multiplexed mode (subprotocol `agui-mux.v1`): client frames `{"op":"run","id":S,"input":{...}}` (with an
optional `"reattachGraceSeconds"`), `{"op":"attach","id":S,"threadId","runId","rosInvocationId","lastEventId","userId"}`,
`{"op":"connect","id":S,"threadId","lastEventId","userId"}` (join the thread: its newest run, replayed then live)
and `{"op":"cancel","id":S}` (a run's own stream, or a joined one: the stop of that run, on any replica, with the
right its join checked; a queued run leaves its queue); `AGUI-Multitask` on the upgrade is the policy of its runs
that name none; a `run` frame's `"agent"` names its agent, else the upgrade's `?agent=`, else the default (an
unknown agent at the upgrade is HTTP 404 AGENT_NOT_FOUND; in a frame, a RUN_ERROR); server frames `{"id":S,"eventId":P,"event":{...}}` (`eventId`: the event's
position, to attach from; absent on errors that are not part of a run), and `{"id":S,"closed":true}` for a
connect to a thread with no retained run (the stream is over, with no event). Close codes: 1003 binary frame,
1007 a frame that is not JSON, 1008 policy (too many queued frames, bad envelope in mux mode, an attached stream
that fell behind its run's ring: attach again from the last event id),
1009 frame over 12 MiB (uvicorn), 1011 internal error. Authentication is checked before the upgrade
is accepted (refused with HTTP 401 and `WWW-Authenticate`, or 403 on servers without the ASGI denial
response): `Authorization: Bearer`, a ticket (`?ticket=` or subprotocol
`agui.ticket.<ticket>`), or the token as subprotocol `agui.bearer.<token>`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Coroutine
from typing import Any

import msgspec
from litestar import WebSocket
from litestar.types import Receive, Scope, Send

from gateway import metrics
from gateway.auth import Principal
from gateway.engine import RunHandle
from gateway.engine.stream import Entry, FollowerCut
from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import message_for, negotiate
from gateway.logs import with_request_id
from gateway.protocol import events as e
from gateway.protocol.validate import check_depth, error_from_msgspec
from transports.http_input import (
    authenticate_or_redeem,
    bearer_token,
    caller_of,
    check_rate,
    header,
    parse_position,
    scope_header,
)
from transports.lean import forget_request
from transports.render import Dialect, error_body
from transports.run_input import prepared_run
from transports.server_extensions import TEXT_BATCH
from transports.services import TransportServices
from transports.sse import MULTITASK_HEADER, SESSION_HEADER
from transports.ws_framing import (
    BASE_PROTOCOL,
    BEARER_PREFIX,
    CLOSE_INTERNAL,
    CLOSE_INVALID,
    CLOSE_POLICY,
    MAX_LIST_CHANGES,
    MAX_MUX_RUNS,
    MAX_QUEUED_FRAMES,
    MUX_PROTOCOL,
    TICKET_PREFIX,
    MuxFrame,
    OpenSocket,
    close_quietly,
    closed_frame,
    encode_frame,
    event_frames,
    is_json,
    mux_decoder,
    receive_text,
)

log = logging.getLogger("agui.ws")
WS_LABEL = Dialect.WS.value  # the transport's metrics label, and its runs' `transport`

DENIAL_EXTENSION = "websocket.http.response"


async def _authenticated(socket: WebSocket[Any, Any, Any], services: TransportServices, offered: list[str]) -> Principal:
    """Header token, subprotocol token, or a single-use ticket (which acts as the principal it was issued to).
    Raises the contract's error, with its challenge, when refused."""
    tickets = [p[len(TICKET_PREFIX) :] for p in offered if p.startswith(TICKET_PREFIX)]
    if socket.query_params.get("ticket"):
        tickets.append(socket.query_params["ticket"])
    token = bearer_token(socket) or next((p[len(BEARER_PREFIX) :] for p in offered if p.startswith(BEARER_PREFIX)), None)
    return await authenticate_or_redeem(socket, services, tickets, token)


async def _refuse_upgrade(socket: WebSocket[Any, Any, Any], error: GatewayError, language: str) -> None:
    """Answer the upgrade with the error's HTTP status and headers (401 + WWW-Authenticate), where the server supports
    the ASGI denial response; otherwise close before accepting (the server answers 403)."""
    if DENIAL_EXTENSION not in (socket.scope.get("extensions") or {}):
        await socket.close(CLOSE_POLICY, "unauthorized")
        return
    body = error_body(error, language)
    headers = [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    send: Any = socket.send  # the denial messages are ASGI's, not in Litestar's event types
    await send({"type": "websocket.http.response.start", "status": error.http_status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


class Connection:
    """One accepted socket: serialises sends, tracks its runs, cancels them when the peer goes away."""

    __slots__ = (
        "accept_language",
        "agent",
        "batching",
        "ctx",
        "forwarders",
        "language",
        "multitask",
        "mux",
        "principal",
        "runs",
        "runtime_session",
        "send_lock",
        "socket",
    )

    def __init__(
        self, socket: OpenSocket, scope: Scope, services: TransportServices, mux: bool, principal: Principal, agent: str = ""
    ) -> None:
        self.socket = socket
        self.mux = mux
        self.principal = principal
        self.ctx = services
        self.runs: dict[str, RunHandle] = {}
        self.forwarders: dict[str, asyncio.Task] = {}
        self.send_lock = asyncio.Lock()
        # Our uvicorn protocol takes a batch of UTF-8 payloads, one text frame each (ASGI extension).
        self.batching = TEXT_BATCH in (scope.get("extensions") or {})
        # The only request headers a socket reads after its handshake, read once (the scope's headers are dropped).
        self.accept_language = scope_header(scope, "accept-language")
        self.runtime_session = scope_header(scope, SESSION_HEADER)
        self.multitask = scope_header(scope, MULTITASK_HEADER)  # the upgrade's busy-thread policy: every run's header
        self.language = negotiate(None, self.accept_language)
        self.agent = agent  # the upgrade's `?agent=`: the agent of its runs that name none (empty: the default)

    def send_events(self, entries: list[Entry], stream_id: str | None, positions: bool = False) -> Coroutine[Any, Any, None]:
        """One text frame per event; sent as one batch where the server supports it. The sending coroutine itself is
        returned: a socket waiting on a slow peer holds no frame of this call."""
        frames = event_frames(entries, stream_id, positions, mux=self.mux)
        metrics.labelled(metrics.EVENTS_SENT, WS_LABEL).inc(len(frames))
        metrics.labelled(metrics.BYTES_SENT, WS_LABEL).inc(sum(len(frame) for frame in frames))
        return self.send_frames(frames)

    async def send_frames(self, frames: list[bytes]) -> None:
        async with self.send_lock:  # mux: runs share the socket; frames of one batch stay together
            if self.batching:
                await self.socket.send({"type": "websocket.send", TEXT_BATCH: frames})
            else:
                for frame in frames:
                    await self.socket.send({"type": "websocket.send", "text": frame.decode()})

    async def send_event(self, event: e.Event, stream_id: str | None) -> None:
        await self.send_events([(0, e.encode_json(event))], stream_id)

    async def send_error(self, error: GatewayError, stream_id: str | None, language: str | None = None) -> None:
        log.info("run refused code=%s field=%s stream=%s", error.code.name, error.field, (stream_id or "")[:64])
        event = e.RunError(code=error.code.name, message=message_for(error, language or self.language))
        event.metadata = with_request_id({"field": error.field} if error.field else {}) or None  # the upgrade's id
        await self.send_event(event, stream_id)

    async def start_run(self, raw: bytes, stream_id: str | None, grace: float | None = None, agent: str = "") -> RunHandle | None:
        """Validate and admit like SSE; an error before the run is a RUN_ERROR frame and the socket stays usable."""
        try:
            self.check_not_expired()
            await check_rate(self.ctx, self.principal)
            prepared = prepared_run(
                self.ctx.settings,
                raw,
                transport=WS_LABEL,
                agent=agent or self.agent,
                accept_language=self.accept_language,
                runtime_session=self.runtime_session,
                grace=grace,
                grace_field="reattachGraceSeconds",
                multitask=self.multitask,
            )
            return await self.ctx.engine.start(prepared, caller_of(self.principal))
        except GatewayError as error:
            metrics.labelled(metrics.RUNS_REFUSED, WS_LABEL, error.code.name).inc()
            await self.send_error(error, stream_id, error.language)
            if error.code is ErrorCode.UNAUTHORIZED:
                await self.socket.close(CLOSE_POLICY, "credential expired")
            return None

    async def attach(self, frame: MuxFrame) -> RunHandle | None:
        """Follow a run from a position, like `GET /threads/{t}/runs/{r}/events`; a refusal is a RUN_ERROR frame."""
        try:
            self.check_not_expired()
            await check_rate(self.ctx, self.principal)
            if not frame.thread_id or not frame.run_id:
                raise GatewayError(ErrorCode.INVALID_INPUT, "threadId" if not frame.thread_id else "runId", "Name the run to attach to.")
            after = parse_position(frame.last_event_id) or 0
            caller = caller_of(self.principal)
            user_id = frame.user_id or None
            return await self.ctx.engine.attach(
                frame.thread_id, frame.run_id, frame.ros_invocation_id, after, caller, user_id=user_id, language=self.language
            )
        except GatewayError as error:
            metrics.labelled(metrics.REATTACHES, error.code.name).inc()
            await self.send_error(error, frame.id, error.language)
            if error.code is ErrorCode.UNAUTHORIZED:
                await self.socket.close(CLOSE_POLICY, "credential expired")
            return None

    async def join(self, frame: MuxFrame) -> RunHandle | None:
        """Join a thread, like `GET /threads/{t}/events`: its newest run; none is an empty, closed stream."""
        try:
            self.check_not_expired()
            await check_rate(self.ctx, self.principal)
            if not frame.thread_id:
                raise GatewayError(ErrorCode.INVALID_INPUT, "threadId", "Name the thread to connect to.")
            after = parse_position(frame.last_event_id) or 0
            run = await self.ctx.engine.join(
                frame.thread_id, after, caller_of(self.principal), user_id=frame.user_id or None, language=self.language
            )
        except GatewayError as error:
            metrics.labelled(metrics.REATTACHES, error.code.name).inc()
            await self.send_error(error, frame.id, error.language)
            if error.code is ErrorCode.UNAUTHORIZED:
                await self.socket.close(CLOSE_POLICY, "credential expired")
            return None
        if run is None or run.finished:
            await self.send_frames([closed_frame(frame.id)])
            return None
        return run

    def check_not_expired(self) -> None:
        """A socket outlives its credential only to finish the runs in flight: no new run starts after expiry."""
        expires_at = self.principal.expires_at
        if expires_at is not None and time.time() >= expires_at:
            raise GatewayError(ErrorCode.UNAUTHORIZED, detail="The credential has expired; reconnect with a fresh one.")

    async def forward(self, run: RunHandle, stream_id: str | None, arrived: float) -> None:
        """Send one run's events, one per frame; a slow peer slows this run only (bounded queue behind it)."""
        first = True
        try:
            async for batch in run.events(self.ctx.settings.heartbeat_seconds):
                if batch is not None:  # (None is a heartbeat: liveness here is WebSocket ping/pong)
                    await self.send_events(batch, stream_id, run.positions)
                    if first:
                        metrics.labelled(metrics.TIME_TO_FIRST_EVENT, WS_LABEL).observe(time.perf_counter() - arrived)
                        first = False
        except FollowerCut as cut:
            # The socket reads slower than the run writes (its other streams share that socket): it is closed, and
            # the client attaches its streams again from their last event ids.
            log.info("follower cut behind its run after position %d stream=%s", cut.position, (stream_id or "")[:64])
            metrics.FOLLOWERS_CUT.inc()
            await self.socket.close(CLOSE_POLICY, "fell behind the run: attach again from the last event id")

    def abandon(self) -> None:
        """The peer went away: forwarding stops, and each run sees its consumer gone (the backend is cancelled)."""
        for task in self.forwarders.values():
            task.cancel()


async def _run_queued(conn: Connection, queued: list[str]) -> None:
    """Base mode's runner: the queued frames' runs, one after the other (a function of its own, not a closure that
    every idle socket would hold)."""
    try:
        while queued:
            text = queued.pop(0)
            arrived = time.perf_counter()
            run = await conn.start_run(text.encode(), None)  # admission is safe to cancel (the engine releases it)
            if run is not None:
                await conn.forward(run, None, arrived)
    except Exception:
        log.exception("websocket run failed")
        await close_quietly(conn.socket, CLOSE_INTERNAL, "internal error")
    finally:
        conn.forwarders.pop("base", None)


async def _serve_base(conn: Connection) -> None:
    """The socket's own task reads frames. A frame starts its run in a task of its own (the runner); frames that
    arrive during a run wait, at most MAX_QUEUED_FRAMES of them, and run after it in order. An idle socket holds
    nothing but its own task waiting for a frame (not a reader task beside a loop waiting on a queue)."""
    socket = conn.socket
    queued: list[str] = []  # frames waiting for the active run to end, in order
    runner: asyncio.Task[None] | None = None
    try:
        while True:
            text = await receive_text(socket)  # an idle socket waits here
            if text is None:
                break
            if not is_json(text):
                await socket.close(CLOSE_INVALID, "frames must be JSON")
                break
            if len(queued) >= MAX_QUEUED_FRAMES:
                await socket.close(CLOSE_POLICY, "too many frames queued behind the active run")
                break
            queued.append(text)
            if runner is None or runner.done():
                runner = asyncio.create_task(_run_queued(conn, queued))
                conn.forwarders["base"] = runner  # the peer leaving (abandon) cancels it, admission included
    finally:
        queued.clear()
        conn.abandon()  # the peer is gone: the active run sees its consumer gone
        if runner is not None:
            await asyncio.gather(runner, return_exceptions=True)


def _forget_stream(conn: Connection, stream_id: str, _task: asyncio.Task[None]) -> None:
    conn.forwarders.pop(stream_id, None)


async def _run_stream(conn: Connection, stream_id: str, frame: MuxFrame) -> None:
    """One multiplexed stream: its run (or the run it attaches to), forwarded under its id."""
    arrived = time.perf_counter()
    if frame.op == "attach":
        run = await conn.attach(frame)
    elif frame.op == "connect":
        run = await conn.join(frame)
    else:
        run = await conn.start_run(bytes(frame.input), stream_id, frame.reattach_grace_seconds, frame.agent)
    if run is None:
        return
    conn.runs[stream_id] = run
    try:
        await conn.forward(run, stream_id, arrived)
    finally:
        conn.runs.pop(stream_id, None)


async def _watch_threads(conn: Connection, stream_id: str, frame: MuxFrame) -> None:
    """The caller's thread list, live: `{"id":S,"op":"threads.subscribed"}` once it is watched, then for each change
    `{"id":S,"op":"threads.changed","thread":<summary>}` or `{..., "threadId", "deleted":true}`, whichever replica
    made it, until the socket closes or a `cancel` of the stream id."""
    caller = caller_of(conn.principal)
    threads = conn.ctx.engine.threads
    changed: asyncio.Queue[tuple[str, bool]] = asyncio.Queue(maxsize=MAX_LIST_CHANGES)

    def on_change(key: str, deleted: bool) -> None:
        with contextlib.suppress(asyncio.QueueFull):  # a watcher that falls that far behind reads the list again
            changed.put_nowait((key, deleted))

    unwatch = threads.watch(caller, frame.user_id or None, on_change)
    try:
        await threads.watched()  # `threads.subscribed` promises every change from then on
        await conn.send_frames([encode_frame({"id": stream_id, "op": "threads.subscribed"})])
        while True:
            key, deleted = await changed.get()
            if deleted:
                body: dict[str, Any] = {"threadId": threads.client_id(caller, key), "deleted": True}
            else:
                view = await threads.view_of(caller, key)
                if view is None:  # not there (yet: a change told before its admission landed; or no more: its erase tells)
                    continue
                body = {"thread": view}
            await conn.send_frames([encode_frame({"id": stream_id, "op": "threads.changed", **body})])
    except GatewayError as error:
        await conn.send_error(error, stream_id)
    finally:
        unwatch()


async def _serve_mux(conn: Connection) -> None:
    socket = conn.socket

    try:
        while True:
            text = await receive_text(socket)
            if text is None:
                return
            try:
                check_depth(text, "frame")
                frame = mux_decoder.decode(text)
            except GatewayError as error:
                await conn.send_error(error, None)
                continue
            except msgspec.ValidationError as exc:
                await conn.send_error(error_from_msgspec(exc), None)
                continue
            except msgspec.DecodeError:
                await socket.close(CLOSE_INVALID, "frames must be JSON")
                return
            if (frame.op == "run" and len(frame.input)) or frame.op in ("attach", "connect", "threads.subscribe"):
                if frame.id in conn.forwarders:
                    await conn.send_error(GatewayError(ErrorCode.INVALID_INPUT, "id", "This stream id is in use."), frame.id)
                elif len(conn.forwarders) >= MAX_MUX_RUNS:
                    await conn.send_error(GatewayError(ErrorCode.TOO_MANY_RUNS_ON_SOCKET, detail=f"At most {MAX_MUX_RUNS}."), frame.id)
                else:
                    serve = _watch_threads if frame.op == "threads.subscribe" else _run_stream
                    task = asyncio.create_task(serve(conn, frame.id, frame))
                    conn.forwarders[frame.id] = task
                    task.add_done_callback(functools.partial(_forget_stream, conn, frame.id))
            elif frame.op == "cancel":
                run = conn.runs.get(frame.id)
                if run is not None:
                    metrics.labelled(metrics.CANCELS, "socket").inc()
                    run.cancel()
                elif frame.id in conn.forwarders:  # a subscription to the thread list: it ends
                    conn.forwarders[frame.id].cancel()
                else:  # never started, or already ended: say so rather than leave the client waiting
                    await conn.send_error(GatewayError(ErrorCode.EXECUTION_NOT_FOUND, "id", "No run on this stream id."), frame.id)
            else:
                await conn.send_error(
                    GatewayError(
                        ErrorCode.INVALID_INPUT, "op", "Use op 'run' (with input), 'attach', 'connect', 'threads.subscribe' or 'cancel'."
                    ),
                    frame.id,
                )
    finally:
        conn.abandon()


def serve_socket(scope: Scope, receive: Receive, send: Send) -> Coroutine[Any, Any, None]:
    """`/ws` (transports/fast_path.py): the handler's own coroutine, no frame of its own."""
    return serve_with(scope, receive, send, scope["litestar_app"].state.services)


async def serve_with(scope: Scope, receive: Receive, send: Send, services: TransportServices) -> None:
    """The handshake on Litestar's WebSocket (authentication, the subprotocol; an unexpected failure closes with
    1011), then the open socket on the lean one, with the request's headers dropped from the scope: an idle socket
    read them for the last time here."""
    ctx = services
    socket: WebSocket[Any, Any, Any] = WebSocket(scope, receive, send)
    offered: list[str] = list(socket.scope.get("subprotocols") or [])
    try:
        principal = await _authenticated(socket, services, offered)
        agent = socket.query_params.get("agent") or ""
        if agent:
            services.engine.agents.get(agent)
        chosen = next((protocol for protocol in offered if protocol in (MUX_PROTOCOL, BASE_PROTOCOL)), None)
        await socket.accept(subprotocols=chosen)
    except GatewayError as error:
        await _refuse_upgrade(socket, error, negotiate(None, header(socket, "accept-language")))
        return
    except Exception:
        log.exception("websocket handshake failed")
        await close_quietly(socket, CLOSE_INTERNAL, "internal error")
        return
    conn = Connection(OpenSocket(receive, send), scope, services, mux=chosen == MUX_PROTOCOL, principal=principal, agent=agent)
    del socket
    forget_request(scope)
    ctx.sockets.add(conn)
    metrics.labelled(metrics.CONNECTIONS_OPEN, "websocket").inc()
    try:
        await (_serve_mux(conn) if conn.mux else _serve_base(conn))
    except Exception:
        log.exception("websocket handler failed")
        await close_quietly(conn.socket, CLOSE_INTERNAL, "internal error")
    finally:
        ctx.sockets.discard(conn)
        metrics.labelled(metrics.CONNECTIONS_OPEN, "websocket").dec()
        conn.abandon()
