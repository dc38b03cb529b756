"""OAuth 2.0 resource server: validates JWT access tokens locally against the issuer's JWKS.

Keys come from `--oauth-jwks-url` or the `jwks_uri` of `--oauth-discovery-url`; they are cached for
JWKS_TTL seconds and fetched again when a token names an unknown key id (at most once per
UNKNOWN_KID_RETRY seconds for the same id, and never more often than every MIN_REFRESH_INTERVAL seconds). Algorithms are pinned; `none` is never accepted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx
import jwt

from gateway.auth.base import Authenticator, Principal
from gateway.errors import ErrorCode, GatewayError

log = logging.getLogger("agui.auth")
JWKS_TTL = 600.0
UNKNOWN_KID_RETRY = 30.0
MIN_REFRESH_INTERVAL = 0.5
LEEWAY_SECONDS = 30


class OAuthValidator(Authenticator):
    required = True

    def __init__(self, settings) -> None:
        self.discovery_url: str | None = settings.oauth_discovery_url
        self.jwks_url: str | None = settings.oauth_jwks_url
        self.issuer: str | None = settings.oauth_issuer
        self.audiences = list(settings.oauth_audience)
        self.client_ids = set(settings.oauth_client_id)
        self.scopes = set(settings.oauth_scope)
        self.algorithms = list(settings.oauth_algorithms)
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = 0.0
        self._missing: dict[str, float] = {}  # unknown kid -> when we last looked for it
        self._lock = asyncio.Lock()
        self._http = httpx.AsyncClient(timeout=5.0, follow_redirects=False)

    async def _discover(self) -> None:
        if self.jwks_url and (self.issuer or not self.discovery_url):
            return
        response = await self._http.get(self.discovery_url)  # type: ignore[arg-type]
        response.raise_for_status()
        document = response.json()
        self.issuer = self.issuer or document["issuer"]
        self.jwks_url = self.jwks_url or document["jwks_uri"]

    async def _refresh(self) -> None:
        async with self._lock:
            # Tokens with ever new unknown key ids cannot make us fetch more often than this.
            wait = MIN_REFRESH_INTERVAL - (time.monotonic() - self._fetched_at)
            if wait > 0:
                await asyncio.sleep(wait)
            await self._discover()
            response = await self._http.get(self.jwks_url)  # type: ignore[arg-type]
            response.raise_for_status()
            keys: dict[str, jwt.PyJWK] = {}
            for entry in response.json().get("keys", []):
                if entry.get("use", "sig") != "sig" or "kid" not in entry:
                    continue
                try:
                    keys[entry["kid"]] = jwt.PyJWK(entry)
                except jwt.PyJWTError:
                    log.warning("skipping an unusable JWKS key %s", entry.get("kid"))
            self._keys = keys
            self._fetched_at = time.monotonic()

    async def _key(self, kid: str) -> jwt.PyJWK:
        stale = time.monotonic() - self._fetched_at > JWKS_TTL
        if kid not in self._keys or stale:
            recently_missing = time.monotonic() - self._missing.get(kid, -1e9) < UNKNOWN_KID_RETRY
            if stale or not recently_missing:
                try:
                    await self._refresh()
                except (httpx.HTTPError, KeyError, ValueError) as exc:
                    log.warning("JWKS fetch failed: %s", type(exc).__name__)
                    if kid not in self._keys:
                        raise GatewayError(ErrorCode.UNAUTHORIZED, detail="The signing keys are unavailable.") from None
        if kid not in self._keys:
            self._missing[kid] = time.monotonic()
            raise GatewayError(ErrorCode.UNAUTHORIZED, detail="Unknown signing key.")
        return self._keys[kid]

    async def authenticate(self, token: str | None) -> Principal:
        if not token:
            raise GatewayError(ErrorCode.UNAUTHORIZED)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise GatewayError(ErrorCode.UNAUTHORIZED, detail="Malformed token.") from None
        if header.get("alg") not in self.algorithms:
            raise GatewayError(ErrorCode.UNAUTHORIZED, detail="Token algorithm not allowed.")
        key = await self._key(str(header.get("kid", "")))
        if self.issuer is None:
            await self._discover()
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=self.algorithms,
                audience=self.audiences or None,
                issuer=self.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss"], "verify_aud": bool(self.audiences)},
            )
        except jwt.PyJWTError as exc:
            raise GatewayError(ErrorCode.UNAUTHORIZED, detail=f"Token rejected ({type(exc).__name__}).") from None
        client_id = claims.get("client_id") or claims.get("azp")
        if self.client_ids and client_id not in self.client_ids:
            raise GatewayError(ErrorCode.UNAUTHORIZED, detail="Token issued to another client.")
        scope_claim = claims.get("scope", claims.get("scp", ""))
        granted = set(scope_claim.split() if isinstance(scope_claim, str) else scope_claim or [])
        if not self.scopes <= granted:
            raise GatewayError(ErrorCode.ACCESS_DENIED, detail=f"Missing scope: {' '.join(sorted(self.scopes - granted))}.")
        subject = claims.get("sub")
        return Principal(key=f"sub:{self.issuer}:{subject or client_id}", subject=subject, client_id=client_id, scopes=frozenset(granted))

    async def ensure_discovered(self) -> None:
        if self.issuer is None and self.discovery_url:
            await self._discover()

    def metadata(self, resource: str) -> dict[str, Any]:
        """RFC 9728 protected resource metadata."""
        document: dict[str, Any] = {"resource": resource, "bearer_methods_supported": ["header"]}
        if self.issuer:
            document["authorization_servers"] = [self.issuer]
        if self.scopes:
            document["scopes_supported"] = sorted(self.scopes)
        document["resource_signing_alg_values_supported"] = self.algorithms
        return document

    async def aclose(self) -> None:
        await self._http.aclose()
