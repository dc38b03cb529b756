"""The issuer's signing keys, fetched so that no caller can turn the fetching against us.

- Single flight: every request that misses a key shares one fetch; there is never more than one fetch
  in flight nor a queue of fetches.
- Throttle: after a successful fetch the next starts no sooner than MIN_FETCH_INTERVAL seconds later; a
  miss during the pause waits for that scheduled fetch (so a newly rotated key is usable within about
  MIN_FETCH_INTERVAL plus one fetch), never for a series of them.
- Backoff: after a failed fetch (error status, bad JSON, timeout) the next waits FAILURE_BACKOFF seconds,
  doubling up to MAX_FAILURE_BACKOFF; misses during that time fail at once, so an issuer that is down is
  neither hammered nor waited for.
- Negative cache: a key id the issuer did not publish is refused at once for UNKNOWN_KID_RETRY seconds
  (at most MAX_UNKNOWN_KIDS remembered), so a flood of random key ids costs one shared fetch.
- Freshness: keys are refreshed in the background when older than the issuer's Cache-Control max-age
  (clamped to [MIN_TTL, MAX_TTL]; DEFAULT_TTL without one), and used while the issuer is unreachable
  for at most MAX_STALENESS seconds. Waiting for a fetch is bounded by WAIT_SECONDS: slow issuers fail
  closed, quickly.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import jwt

log = logging.getLogger("agui.auth")

MIN_FETCH_INTERVAL = 0.25
FAILURE_BACKOFF = 1.0
MAX_FAILURE_BACKOFF = 30.0
UNKNOWN_KID_RETRY = 30.0
MAX_UNKNOWN_KIDS = 10_000
DEFAULT_TTL = 600.0
MIN_TTL = 60.0
MAX_TTL = 3600.0
MAX_STALENESS = 86_400.0
WAIT_SECONDS = 2.0
FETCH_TIMEOUT = 3.0
_MAX_AGE = re.compile(r"max-age=(\d+)")


class KeysUnavailable(Exception):
    """No key could be had for this key id: unknown to the issuer, or the issuer unreachable."""


class KeySet:
    def __init__(
        self, http: httpx.AsyncClient, jwks_url: Callable[[], Awaitable[str]], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._http = http
        self._jwks_url = jwks_url
        self._clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._ttl = DEFAULT_TTL
        self._next_fetch = 0.0
        self._backoff = 0.0  # > 0 while fetches fail: the wait before the next one
        self._inflight: asyncio.Task[None] | None = None
        self._unknown: OrderedDict[str, float] = OrderedDict()
        self.fetches = 0  # how many fetches were started (reported by tests and benchmarks)

    async def key(self, kid: str) -> jwt.PyJWK:
        now = self._clock()
        if kid in self._keys:
            age = now - (self._fetched_at or now)
            if age > self._ttl:
                self._start_fetch()  # refresh in the background; the cached key serves meanwhile
            if age <= MAX_STALENESS:
                return self._keys[kid]
        elif now - self._unknown.get(kid, -1e18) < UNKNOWN_KID_RETRY:
            raise KeysUnavailable("unknown key id")
        if self._backoff and now < self._next_fetch:
            raise KeysUnavailable("the issuer is failing; the signing keys are unavailable")
        await self._wait_for_fetch()
        if kid in self._keys:
            return self._keys[kid]
        self._remember_unknown(kid, now)
        raise KeysUnavailable("unknown key id")

    async def _wait_for_fetch(self) -> None:
        task = self._start_fetch()
        try:
            await asyncio.wait_for(asyncio.shield(task), WAIT_SECONDS)
        except (TimeoutError, httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise KeysUnavailable("the signing keys are unavailable") from exc

    def _start_fetch(self) -> asyncio.Task[None]:
        """The one fetch in flight, or a new one (starting after the throttle pause)."""
        if self._inflight is None or self._inflight.done():
            delay = max(0.0, self._next_fetch - self._clock())
            self._inflight = asyncio.get_running_loop().create_task(self._fetch(delay))
            self._inflight.add_done_callback(_consume_failure)
        return self._inflight

    async def _fetch(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        self.fetches += 1
        try:
            response = await self._http.get(await self._jwks_url(), timeout=FETCH_TIMEOUT)
            response.raise_for_status()
            document = response.json()
            self._keys = _parse_keys(document)
            self._fetched_at = self._clock()
            self._ttl = _ttl(response.headers.get("cache-control"))
            self._unknown = OrderedDict((k, t) for k, t in self._unknown.items() if k not in self._keys)
        except Exception as exc:
            self._backoff = min(MAX_FAILURE_BACKOFF, self._backoff * 2 or FAILURE_BACKOFF)
            self._next_fetch = self._clock() + self._backoff
            log.warning("JWKS fetch failed (%s); next attempt in %.1f s", type(exc).__name__, self._backoff)
            raise
        self._backoff = 0.0
        self._next_fetch = self._clock() + MIN_FETCH_INTERVAL

    def _remember_unknown(self, kid: str, now: float) -> None:
        self._unknown[kid] = now
        self._unknown.move_to_end(kid)
        while len(self._unknown) > MAX_UNKNOWN_KIDS:
            self._unknown.popitem(last=False)


def _consume_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved here, so a fetch nobody waited for logs no "never retrieved" warning


def _ttl(cache_control: str | None) -> float:
    match = _MAX_AGE.search(cache_control or "")
    return min(MAX_TTL, max(MIN_TTL, float(match.group(1)))) if match else DEFAULT_TTL


def _parse_keys(document: Any) -> dict[str, jwt.PyJWK]:
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWKS document")
    keys: dict[str, jwt.PyJWK] = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or not isinstance(entry.get("kid"), str):
            continue
        try:
            keys[entry["kid"]] = jwt.PyJWK(entry)
        except jwt.PyJWTError:
            log.warning("skipping an unusable JWKS key %s", entry.get("kid"))
    return keys
