"""A small A2A 1.0 JSON-RPC client over httpx (pooled, timeouts, bounded reads).

Chosen over the a2a-sdk client: the gateway only needs four methods and reads frames as plain JSON
dicts (msgspec), which keeps protobuf conversion off the hot path of every streamed event.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec

from gateway import metrics, tls, tracing
from gateway.jsondepth import too_deep

MAX_FRAME_BYTES = 4 * 1024 * 1024  # one SSE data line from the agent
FRAME_DEPTH = 128  # JSON nesting accepted in an agent's frame


class A2AError(Exception):
    """A JSON-RPC error object from the agent."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "A2A error")))
        self.error = error


class A2AClient:
    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.url = url
        headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout, read=None),  # streams may be silent for long; liveness is the agent's
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            verify=tls.client_context(),
        )

    @staticmethod
    def _request(method: str, params: dict[str, Any]) -> bytes:
        # The runtime's envelope id is a uuid4 (IAC_CODE_A2A_WIRE.md, transport): unique across replicas and restarts.
        return msgspec.json.encode({"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params})

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        started = time.perf_counter()
        try:
            with tracing.span(f"a2a.{method}"):
                headers = tracing.outgoing({"Accept": "application/json"})
                response = await self.http.post(self.url, content=self._request(method, params), headers=headers)
                response.raise_for_status()
        except httpx.HTTPError:
            metrics.labelled(metrics.A2A_ERRORS, method).inc()
            raise
        finally:
            metrics.labelled(metrics.A2A_SECONDS, method).observe(time.perf_counter() - started)
        body = _decode(response.content)
        if "error" in body:
            raise A2AError(body["error"])
        return body.get("result")

    async def stream(self, method: str, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Yield each JSON-RPC response of a streaming call (an `error` object raises A2AError). An error raised
        before the stream began (a2a-sdk: an unknown task, a refused answer) comes as one plain JSON body instead
        of an event stream: it raises the same A2AError, with the agent's code, message and data."""
        request = self._request(method, params)
        started = time.perf_counter()
        try:
            with tracing.span(f"a2a.{method}"):
                headers = tracing.outgoing({"Accept": "text/event-stream"})
                async with self.http.stream("POST", self.url, content=request, headers=headers) as response:
                    metrics.labelled(metrics.A2A_SECONDS, method).observe(time.perf_counter() - started)
                    if _is_json(response):
                        reply = _decode(await _bounded_body(response))
                        if isinstance(reply, dict) and "error" in reply:
                            raise A2AError(reply["error"] if isinstance(reply["error"], dict) else {"message": str(reply["error"])})
                        response.raise_for_status()
                        if isinstance(reply, dict) and isinstance(reply.get("result"), dict):
                            yield reply["result"]  # a one-frame answer, as plain JSON
                        return
                    response.raise_for_status()
                    async for body in _frames(response):
                        yield body
        except httpx.HTTPError:
            metrics.labelled(metrics.A2A_ERRORS, method).inc()
            raise

    async def extension(self, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        """Call an optional runtime extension beside the agent URL; None when the agent does not offer it."""
        url = httpx.URL(self.url).join(path)
        response = await self.http.request(method, url, **kwargs)
        if response.status_code == 404 and not _is_json(response):
            return None  # a plain 404 from the agent's router: the extension is not offered
        return response

    async def aclose(self) -> None:
        await self.http.aclose()


async def _frames(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The `result` of each `data:` line of an SSE reply (an `error` object raises A2AError)."""
    buffer = b""
    async for chunk in response.aiter_bytes():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            line = line.rstrip(b"\r")
            if line.startswith(b"data:"):
                body = _decode(line[5:].strip())
                if "error" in body:
                    raise A2AError(body["error"])
                yield body.get("result") or {}
        if len(buffer) > MAX_FRAME_BYTES:
            raise A2AError({"message": "frame too large"})


async def _bounded_body(response: httpx.Response) -> bytes:
    """A plain JSON reply to a streaming call, read up to MAX_FRAME_BYTES."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_FRAME_BYTES:
            raise MalformedFrame(f"a reply larger than {MAX_FRAME_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _decode(raw: bytes) -> Any:
    """A JSON-RPC message from the agent; nesting past FRAME_DEPTH is a protocol error, never a recursion failure."""
    if too_deep(raw, FRAME_DEPTH):
        raise MalformedFrame(f"JSON nested deeper than {FRAME_DEPTH} levels")
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise MalformedFrame("a frame that is not JSON") from None


class MalformedFrame(Exception):
    """The agent sent something that is not a JSON-RPC message we can read (not JSON, or nested too deeply)."""


def _is_json(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith("application/json")
