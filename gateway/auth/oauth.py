"""OAuth 2.0 resource server: validates JWT access tokens locally against the issuer's JWKS (gateway/auth/jwks.py).

Algorithms are pinned (`none` and HMAC are refused at start); an audience or a client id must be configured
(`--oauth-audience '*'` is the only, explicit, way to accept any); claims must have their registered types
(a wrong type is a 401, never a 500); error messages speak the contract's words, never a library's.

Audience and client, by RFC 9068 (JWT access tokens) and OpenID Connect Core 3.1.3.7:
- with `--oauth-audience`, `aud` must name one of the audiences (RFC 9068 section 4);
- with `--oauth-client-id` alone, an `aud` that is present must name one of the client ids (OIDC: the audience
  of a token issued to a client is that client); a token with no `aud` at all is judged by its client alone
  (issuers such as Cognito put only `client_id` in their access tokens);
- `client_id` and `azp` both name the client the token was issued to: when both are present they must agree,
  and with `--oauth-client-id` that client must be one of the configured ones.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt

from gateway import tls
from gateway.auth.base import Authenticator, Principal
from gateway.auth.jwks import KeySet, KeysUnavailable
from gateway.errors import ErrorCode, GatewayError

log = logging.getLogger("agui.auth")
LEEWAY_SECONDS = 30
ANY_AUDIENCE = "*"
METADATA_PATH = "/.well-known/oauth-protected-resource"
_NUMERIC_CLAIMS = ("exp", "nbf", "iat")


def metadata_url(resource: str) -> str:
    """RFC 9728 §3.1: the well-known segment goes between the host and the resource's path."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{parts.path.rstrip('/')}"


def _refused(detail: str) -> GatewayError:
    return GatewayError(ErrorCode.UNAUTHORIZED, detail=detail)


def _check_types(claims: dict[str, Any]) -> None:
    for name in _NUMERIC_CLAIMS:
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise _refused(f"The {name} claim must be a number.")
    for name in ("sub", "client_id", "azp", "iss"):
        if name in claims and not isinstance(claims[name], str):
            raise _refused(f"The {name} claim must be a string.")
    scope = claims.get("scope", claims.get("scp"))
    if scope is not None and not isinstance(scope, str) and not (isinstance(scope, list) and all(isinstance(s, str) for s in scope)):
        raise _refused("The scope claim must be a string or a list of strings.")


def check_oauth_settings(settings: Any) -> None:
    """Refuse to start with OAuth settings that would accept other services' tokens or forge metadata."""
    if not settings.oauth_audience and not settings.oauth_client_id:
        raise ValueError(
            "OAuth needs --oauth-audience or --oauth-client-id (tokens for other services of the same issuer "
            "would be accepted otherwise); --oauth-audience '*' accepts any audience, deliberately and unsafely"
        )
    if not settings.public_url:
        raise ValueError("OAuth needs --public-url: the resource identifier and the metadata URL are never taken from a request's Host")


class OAuthValidator(Authenticator):
    required = True

    def __init__(self, settings: Any) -> None:
        check_oauth_settings(settings)
        self.discovery_url: str | None = settings.oauth_discovery_url
        self.jwks_url: str | None = settings.oauth_jwks_url
        self.issuer: str | None = settings.oauth_issuer
        self.audiences = [a for a in settings.oauth_audience if a != ANY_AUDIENCE]
        self.any_audience = ANY_AUDIENCE in settings.oauth_audience
        self.client_ids = set(settings.oauth_client_id)
        self.scopes = set(settings.oauth_scope)
        self.algorithms = list(settings.oauth_algorithms)
        self.resource: str = settings.public_url
        self._http = httpx.AsyncClient(timeout=5.0, follow_redirects=False, verify=tls.client_context())
        self.keys = KeySet(self._http, self._jwks_location)

    async def _discover(self) -> None:
        if self.jwks_url and (self.issuer or not self.discovery_url):
            return
        assert self.discovery_url is not None
        response = await self._http.get(self.discovery_url)
        response.raise_for_status()
        document = response.json()
        self.issuer = self.issuer or str(document["issuer"])
        self.jwks_url = self.jwks_url or str(document["jwks_uri"])

    async def _jwks_location(self) -> str:
        await self._discover()
        assert self.jwks_url is not None
        return self.jwks_url

    async def authenticate(self, token: str | None) -> Principal:
        if not token:
            raise GatewayError(ErrorCode.UNAUTHORIZED)
        try:
            return await self._validate(token)
        except GatewayError:
            raise
        except Exception:
            log.debug("token refused", exc_info=True)
            raise _refused("The token could not be validated.") from None

    async def _validate(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _refused("The token is malformed.") from None
        if header.get("alg") not in self.algorithms:
            raise _refused("The token's algorithm is not allowed.")
        try:
            key = await self.keys.key(str(header.get("kid", "")))
            if self.issuer is None:
                await self._discover()
        except KeysUnavailable:
            raise _refused("The token's signing key is unknown or unavailable.") from None
        except httpx.HTTPError:
            raise _refused("The token's issuer is unavailable.") from None
        claims = self._decode(token, key)
        _check_types(claims)
        self._check_client_audience(claims)
        return self._principal(claims)

    def _check_client_audience(self, claims: dict[str, Any]) -> None:
        """With client ids and no audience configured, the token's audience (when it has one) is the client."""
        if self.audiences or self.any_audience or "aud" not in claims:
            return
        audience = claims["aud"]
        named = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else None
        if named is None or not all(isinstance(a, str) for a in named):
            raise _refused("The aud claim must be a string or a list of strings.")
        if not self.client_ids.intersection(named):
            raise _refused("The token is meant for another audience.")

    def _decode(self, token: str, key: jwt.PyJWK) -> dict[str, Any]:
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
        except jwt.ExpiredSignatureError:
            raise _refused("The token has expired.") from None
        except jwt.InvalidAudienceError:
            raise _refused("The token is meant for another audience.") from None
        except jwt.InvalidIssuerError:
            raise _refused("The token comes from another issuer.") from None
        except jwt.PyJWTError:
            raise _refused("The token's signature or claims are invalid.") from None
        return claims

    def _principal(self, claims: dict[str, Any]) -> Principal:
        named = {claims[name] for name in ("client_id", "azp") if claims.get(name)}
        if len(named) > 1:
            raise _refused("The token names two different clients.")
        client_id = next(iter(named), None)
        if self.client_ids and client_id not in self.client_ids:
            raise _refused("The token was issued to another client.")
        scope_claim = claims.get("scope", claims.get("scp", ""))
        granted = set(scope_claim.split() if isinstance(scope_claim, str) else scope_claim)
        if not self.scopes <= granted:
            raise GatewayError(ErrorCode.ACCESS_DENIED, detail=f"Missing scope: {' '.join(sorted(self.scopes - granted))}.")
        subject = claims.get("sub")
        who = f"sub:{subject}" if subject else f"client:{client_id}"
        return Principal(
            key=f"oauth:{self.issuer}:{who}",
            subject=subject,
            client_id=client_id,
            scopes=frozenset(granted),
            owner=f"oauth:{self.issuer}:{who}",
            user_id=subject or client_id,
            expires_at=float(claims["exp"]) + LEEWAY_SECONDS,  # valid as long as the validator accepts it
        )

    async def ensure_discovered(self) -> None:
        if self.issuer is None and self.discovery_url:
            await self._discover()

    def metadata_url(self) -> str | None:
        return metadata_url(self.resource)

    async def resource_metadata(self) -> dict[str, Any] | None:
        try:
            await self.ensure_discovered()
        except Exception:  # noqa: BLE001 - the document is still useful without the issuer
            pass
        return self.metadata()

    def metadata(self) -> dict[str, Any]:
        """RFC 9728 protected resource metadata."""
        document: dict[str, Any] = {"resource": self.resource, "bearer_methods_supported": ["header"]}
        if self.issuer:
            document["authorization_servers"] = [self.issuer]
        if self.scopes:
            document["scopes_supported"] = sorted(self.scopes)
        return document

    async def aclose(self) -> None:
        await self._http.aclose()
