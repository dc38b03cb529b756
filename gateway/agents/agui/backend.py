"""Any AG-UI agent as the gateway's backend: an AG-UI server over HTTP (`agui+http(s)://`), or an AG-UI event
source in this process (an object with `run(input) -> AsyncIterator[event]`, as ag-ui-langgraph's
LangGraphAgent). Both are sent the run's RunAgentInput and read through one EventReader.

Upstream failures (docs/agents.md): unreachable, no response head within --agent-response-seconds, silent
IDLE_SECONDS within its stream, or a 5xx before the stream is AGENT_UNAVAILABLE; a 4xx
is INVALID_INPUT with the upstream's words; an event past its EventLimits (9 MiB, or room for --max-state-bytes), not
JSON, of an unknown type, out of order, or a stream that ends without its terminal event is AGENT_PROTOCOL_ERROR; an upstream RUN_ERROR keeps its
own code and message. A cancel, or a client gone with no grace window, closes the upstream request."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import aiohttp
import msgspec

from gateway import tls, tracing
from gateway.agents import signals as s
from gateway.agents.agui.events import EventReader, UpstreamViolation
from gateway.agents.base import AgentBackend, AgentRequest
from gateway.jsondepth import too_deep
from gateway.logs import REQUEST_ID

log = logging.getLogger("agui.agents.agui")
MAX_EVENT_BYTES = 9 * 1024 * 1024  # one upstream SSE record: a snapshot at the default --max-state-bytes, and its frame
EVENT_DEPTH = 128  # JSON nesting accepted in an upstream event
# JSON values in one upstream event, counted before it is decoded as its commas and brackets (those in strings too):
# decoding makes an object of each, on the loop, and 8 MiB of `[],` would be 2.7 million of them (half a second). A
# conversation of 8 MB, its prose's commas included, counts about a quarter of this.
MAX_EVENT_VALUES = 500_000


class EventLimits(NamedTuple):
    """What one upstream event may be: its bytes, and its JSON values (counted before it is decoded)."""

    bytes: int = MAX_EVENT_BYTES
    values: int = MAX_EVENT_VALUES

    @classmethod
    def for_state(cls, max_state_bytes: int) -> EventLimits:
        """Room for a snapshot of `max_state_bytes` (--max-state-bytes) and its frame; never below the defaults."""
        size = max(MAX_EVENT_BYTES, max_state_bytes + 1024 * 1024)
        return cls(size, max(MAX_EVENT_VALUES, MAX_EVENT_VALUES * size // MAX_EVENT_BYTES))


DEFAULT_LIMITS = EventLimits()
CONNECT_SECONDS = 10.0  # to open the upstream connection
IDLE_SECONDS = 300.0  # of silence in the upstream's stream (an AG-UI server sends no heartbeat of its own)
MAX_ERROR_BYTES = 64 * 1024  # of an upstream's error body, read for its message
DRAIN_SECONDS = 5.0  # after a run's terminal event, for the rest of its response (the connection is kept if it ends)
DRAIN_BYTES = 64 * 1024


def run_input(request: AgentRequest) -> dict[str, Any]:
    """The RunAgentInput the upstream is sent: the plain request whole, or, with the iacCode extension, the user's
    message alone (never the extension, which may carry secrets). Thread ids are the gateway's, scoped to the
    caller, so two principals' threads never meet upstream."""
    if request.plain:
        messages: list[Any] = list(request.messages)
        state, tools, context, forwarded = request.state, list(request.tools), list(request.context), request.forwarded_props or {}
    else:
        text = request.user_text or ""
        messages = [{"id": request.message_id or f"{request.run_id}-user", "role": "user", "content": text}] if text else []
        state, tools, context, forwarded = {}, [], [], {}
    body: dict[str, Any] = {
        "threadId": request.thread_id,
        "runId": request.run_id,
        "state": {} if state is None else state,
        "messages": messages,
        "tools": tools,
        "context": context,
        "forwardedProps": forwarded,
    }
    if request.parent_run_id:
        body["parentRunId"] = request.parent_run_id
    if request.protocol_version:
        body["protocolVersion"] = request.protocol_version
    if request.resume:
        body["resume"] = [
            {
                "interruptId": answer.interrupt_id,
                "status": answer.status,
                **({"payload": answer.payload} if answer.status == "resolved" else {}),
            }
            for answer in request.resume
        ]
    return body


async def read_events(request: AgentRequest, reads: AsyncIterator[list[Any]], reader: EventReader | None = None) -> AsyncIterator[s.Ready]:
    """The upstream's events as signals, to its terminal one; what breaks AG-UI ends the run. Each list of events
    (what one network read brought) becomes one list of signals: the gateway takes it in one step. `reader`: the
    caller's, to know whether the terminal event was read (`reader.ended`)."""
    reader = reader or EventReader(request.thread_id, request.run_id)
    ready: list[s.Signal] = []
    try:
        async for events in reads:
            for event in events:
                ready += reader.read(event)
                if reader.ended:
                    break
            if ready:
                yield ready
                ready = []
            if reader.ended:
                return
    except UpstreamViolation as exc:
        log.warning("run %s: the upstream agent broke AG-UI: %s", request.run_id, exc)
        # The signals of the read's earlier events are shown, as they would have been had they come alone.
        ready.append(s.Failed(message=f"The agent broke AG-UI: {exc}.", code="AGENT_PROTOCOL_ERROR"))
        yield ready
        return
    yield s.Failed(message="The agent's stream ended before its terminal event.", code="AGENT_PROTOCOL_ERROR")


class AguiHttpBackend(AgentBackend):
    """An AG-UI server: POST the RunAgentInput, read its SSE reply."""

    name = "agui"
    plain_workspace = True  # the upstream is sent no workspace
    upstream_interrupts = True
    client_tools = True

    def __init__(self, url: str, token: str | None = None, *, response_seconds: float = 60.0, limits: EventLimits = DEFAULT_LIMITS) -> None:
        self.url = url
        self.limits = limits
        self.headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.response_seconds = response_seconds
        self.proxy = env_proxy(url)
        self.session: aiohttp.ClientSession | None = None
        self._draining: set[asyncio.Task[None]] = set()  # responses read to their end after their run (`_let_go`)

    def _http(self) -> aiohttp.ClientSession:
        """The connection pool, made on the loop that runs the runs (a session belongs to one loop). Unbounded: the
        gateway's own admission (--max-concurrent-runs) bounds the upstream requests, and a bound here would make
        runs past it wait for a connection in silence. Events may be IDLE_SECONDS apart; the response head is
        bounded apart, by `response_seconds`. The proxy is read from the environment once (`env_proxy`): aiohttp's
        own `trust_env` would also read ~/.netrc in a thread for every request."""
        if self.session is None or self.session.closed:
            self.session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ssl=tls.client_context()),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_SECONDS, sock_read=IDLE_SECONDS),
            )
        return self.session

    def run(self, request: AgentRequest) -> AsyncIterator[s.Ready]:
        return self._run(request)

    async def _run(self, request: AgentRequest) -> AsyncIterator[s.Ready]:
        headers = tracing.outgoing(dict(self.headers))
        request_id = REQUEST_ID.get()
        if request_id:
            headers["X-Request-ID"] = request_id
        body = msgspec.json.encode(run_input(request))
        reader = EventReader(request.thread_id, request.run_id)
        response: aiohttp.ClientResponse | None = None
        try:
            async with asyncio.timeout(self.response_seconds):  # the response head (--agent-response-seconds)
                response = await self._http().post(self.url, data=body, headers=headers, allow_redirects=False, proxy=self.proxy)
            failure = await _refusal(response)
            if failure is not None:
                yield failure
                return
            async for ready in read_events(request, _sse_reads(response, self.limits), reader):
                yield ready
        # aiohttp's timeouts are TimeoutErrors too: its own come first, as the failures of the connection they are.
        except aiohttp.SocketTimeoutError:
            log.info("run %s: the upstream agent was silent for %.0f s", request.run_id, IDLE_SECONDS)
            yield s.Failed(message=f"The agent sent nothing for {IDLE_SECONDS:g} s.", code="AGENT_UNAVAILABLE")
        except aiohttp.ClientError as exc:
            log.info("run %s: the upstream agent failed: %s", request.run_id, type(exc).__name__)
            yield s.Failed(message=f"The agent could not be reached ({type(exc).__name__}).", code="AGENT_UNAVAILABLE")
        except TimeoutError:
            log.info("run %s: the upstream agent sent no response within %.1f s", request.run_id, self.response_seconds)
            yield s.Failed(message=f"The agent did not answer within {self.response_seconds:g} s.", code="AGENT_UNAVAILABLE")
        finally:
            if response is not None:
                self._let_go(response, reader.ended)

    def _let_go(self, response: aiohttp.ClientResponse, ended: bool) -> None:
        """The response done with. After its terminal event the run ends at once, while the end of the body (the
        chunked encoding's last chunk, or whatever the upstream sends after its terminal event) may still be on its
        way: it is read in the background, so that the connection goes back to the pool rather than being closed
        (a connection a run: its setup cost the gateway and the agent more than the run's own events). Otherwise
        (a cancel, a broken stream) the connection is closed, as aiohttp closes one whose body was not read whole."""
        if not ended or response.content.at_eof():
            response.release()
            return
        task = asyncio.get_running_loop().create_task(_drain(response))
        self._draining.add(task)
        task.add_done_callback(self._draining.discard)

    async def aclose(self) -> None:
        for task in list(self._draining):
            task.cancel()
        if self.session is not None:
            await self.session.close()


async def _drain(response: aiohttp.ClientResponse) -> None:
    """Read what follows a terminal event, then let go of the response: its connection is kept where the body ended
    within DRAIN_SECONDS and DRAIN_BYTES, and closed otherwise (an upstream that goes on sending after its end)."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            left = DRAIN_BYTES
            while left > 0 and not response.content.at_eof():
                left -= len(await response.content.readany())
    except (TimeoutError, aiohttp.ClientError):
        pass
    finally:
        response.release()


def env_proxy(url: str) -> str | None:
    """The proxy HTTP_PROXY or HTTPS_PROXY (or their lower-case spellings) names for `url`, unless NO_PROXY exempts its
    host: what httpx's default reads, without its netrc."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


async def _refusal(response: aiohttp.ClientResponse) -> s.Failed | None:
    """A reply that is no AG-UI stream: a 4xx is the upstream refusing the input, a 5xx (or a redirect) is the
    upstream unavailable, a 2xx of another media type is not AG-UI."""
    if response.status >= 300:
        raw = b""
        async for chunk in response.content.iter_any():
            raw += chunk
            if len(raw) > MAX_ERROR_BYTES:
                break
        said = _error_text(raw[:MAX_ERROR_BYTES])
        if 400 <= response.status < 500:
            return s.Failed(message=f"The agent refused the input ({response.status}): {said}", code="INVALID_INPUT")
        return s.Failed(message=f"The agent answered {response.status}: {said}", code="AGENT_UNAVAILABLE")
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "text/event-stream":
        return s.Failed(message=f"The agent answered {media or 'no media type'}, not an event stream.", code="AGENT_PROTOCOL_ERROR")
    return None


def _error_text(raw: bytes) -> str:
    """An error body's message: a JSON `message` or `detail` (FastAPI, Starlette, ours), else its first text."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip()[:300] or "no message"
    if isinstance(body, dict):
        error = body.get("error")
        for value in (body.get("message"), body.get("detail"), error.get("message") if isinstance(error, dict) else error):
            if isinstance(value, str) and value:
                return value[:300]
    return json.dumps(body)[:300]


async def _sse_reads(response: aiohttp.ClientResponse, limits: EventLimits = DEFAULT_LIMITS) -> AsyncIterator[list[Any]]:
    """Per network read, the data of each SSE record it completed (its `data:` lines joined) decoded as JSON;
    comments and other fields are skipped. A record that breaks AG-UI raises once the read's earlier ones are out.
    Lines may end in CRLF, LF or CR (the SSE grammar), a CRLF split between two reads included."""
    # The records not yet complete, their line ends made LF: a bytearray grows in place, so a large record arriving
    # in many small reads is copied once, not once per read.
    buffer = bytearray()
    carry = b""  # a CR that ended the last read: the LF that may follow it begins the next
    async for chunk in response.content.iter_any():
        text = carry + chunk
        carry = b"\r" if text.endswith(b"\r") else b""
        if b"\r" in text:
            text = text[: len(text) - len(carry)].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        searched = max(0, len(buffer) - 1)  # a large record arriving in many reads is searched once, not per read
        buffer += text
        if buffer.find(b"\n\n", searched) < 0:
            if len(buffer) > limits.bytes:
                raise UpstreamViolation(f"an event larger than {limits.bytes} bytes")
            continue
        *records, buffer = buffer.split(b"\n\n")  # one pass: a read of many records copies each once
        events: list[Any] = []
        try:
            for record in records:
                data = _record_data(record)
                if data is not None:
                    events.append(decode_event(data, limits))
            if len(buffer) > limits.bytes:
                raise UpstreamViolation(f"an event larger than {limits.bytes} bytes")
        except UpstreamViolation:
            if events:
                yield events
            raise
        if events:
            yield events
    data = _record_data(buffer)  # a last record with no blank line after it
    if data is not None:
        yield [decode_event(data, limits)]


def _record_data(record: bytes | bytearray) -> bytes | bytearray | None:
    """An SSE record's `data:` lines joined (LF line ends), or None when it has none (a comment, a heartbeat)."""
    if record.startswith(b"data:") and b"\n" not in record:  # one data line: what AG-UI servers send
        return record[6:] if record[5:6] == b" " else record[5:]
    data = [line[5:].removeprefix(b" ") for line in record.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(data) if data else None


_decode = msgspec.json.Decoder().decode


def decode_event(raw: bytes | bytearray, limits: EventLimits = DEFAULT_LIMITS) -> Any:
    if len(raw) > limits.bytes:
        raise UpstreamViolation(f"an event larger than {limits.bytes} bytes")
    if len(raw) > limits.values and raw.count(b",") + raw.count(b"[") + raw.count(b"{") > limits.values:
        raise UpstreamViolation(f"an event of more than {limits.values} JSON values")
    if too_deep(raw, EVENT_DEPTH):
        raise UpstreamViolation(f"an event nested deeper than {EVENT_DEPTH} levels")
    try:
        return _decode(raw)
    except msgspec.DecodeError:
        raise UpstreamViolation("an event that is not JSON") from None


class AguiInProcessBackend(AgentBackend):
    """An AG-UI event source in this process: `source.run(input)` yields `ag_ui.core` events (pydantic models),
    plain dicts, or SSE-encoded strings; `input` is an `ag_ui.core.RunAgentInput`. A source with `clone()` is
    cloned for each run."""

    name = "agui-in-process"
    plain_workspace = True
    upstream_interrupts = True
    client_tools = True

    def __init__(self, source: Any, limits: EventLimits = DEFAULT_LIMITS) -> None:
        self.source = source
        self.limits = limits

    def run(self, request: AgentRequest) -> AsyncIterator[s.Ready]:
        return self._run(request)

    async def _run(self, request: AgentRequest) -> AsyncIterator[s.Ready]:
        try:
            async for ready in read_events(request, self._events(request)):
                yield ready
        except Exception as exc:  # the agent's own failure: its run ends with its words, never a 500
            log.warning("run %s: the in-process agent failed", request.run_id, exc_info=True)
            yield s.Failed(message=f"The agent failed: {type(exc).__name__}: {str(exc)[:300]}", code="AGENT_ERROR", as_sent=True)

    async def _events(self, request: AgentRequest) -> AsyncIterator[list[Any]]:
        from ag_ui.core import RunAgentInput  # the source's own package: it brings ag-ui-protocol with it

        # A fresh copy per run where the source offers one: adapters keep per-run state on the object (ag-ui-langgraph's
        # own endpoint clones its agent for each request the same way).
        clone = getattr(self.source, "clone", None)
        source = clone() if callable(clone) else self.source
        stream = source.run(RunAgentInput.model_validate(run_input(request)))
        try:
            async for event in stream:  # one event a step: the source may wait between any two
                yield [_as_dict(event, self.limits)]
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()


def _as_dict(event: Any, limits: EventLimits = DEFAULT_LIMITS) -> Any:
    if isinstance(event, dict):
        return event
    if isinstance(event, (str, bytes)):
        raw = (event.encode() if isinstance(event, str) else event).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        data = _record_data(raw)
        return decode_event(raw if data is None else data, limits)
    dump = getattr(event, "model_dump", None)
    if dump is None:
        raise UpstreamViolation(f"an event of type {type(event).__name__}, not an AG-UI event")
    return dump(mode="json", by_alias=True, exclude_none=True)
