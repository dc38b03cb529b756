"""The authenticator seam: a bearer token in, a Principal out (or UNAUTHORIZED / ACCESS_DENIED)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from gateway.errors import ErrorCode, GatewayError


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller. `key` identifies it for rate limits (never the token itself)."""

    key: str
    subject: str | None = None
    client_id: str | None = None
    scopes: frozenset[str] = field(default_factory=frozenset)


ANONYMOUS = Principal(key="anonymous")


def token_key(token: str) -> str:
    return "tok:" + hashlib.sha256(token.encode()).hexdigest()[:32]


class Authenticator:
    """Checks a bearer token. The default accepts everyone (no auth configured)."""

    required = False

    async def authenticate(self, token: str | None) -> Principal:
        return ANONYMOUS

    def challenge(self, resource_metadata_url: str | None, error: str | None = None) -> str:
        parts = []
        if resource_metadata_url:
            parts.append(f'resource_metadata="{resource_metadata_url}"')
        if error:
            parts.append(f'error="{error}"')
        return "Bearer " + ", ".join(parts) if parts else "Bearer"

    async def aclose(self) -> None:
        return None


class AnyOf(Authenticator):
    """Accept a token that any of the configured authenticators accepts (static token, OAuth)."""

    required = True

    def __init__(self, members: list[Authenticator]) -> None:
        self.members = members

    async def authenticate(self, token: str | None) -> Principal:
        if not token:
            raise GatewayError(ErrorCode.UNAUTHORIZED)
        last: GatewayError | None = None
        for member in self.members:
            try:
                return await member.authenticate(token)
            except GatewayError as error:
                if error.code is ErrorCode.ACCESS_DENIED:
                    raise
                last = error
        raise last or GatewayError(ErrorCode.UNAUTHORIZED)

    async def aclose(self) -> None:
        for member in self.members:
            await member.aclose()


def build_authenticator(settings) -> Authenticator:
    from gateway.auth.oauth import OAuthValidator
    from gateway.auth.static import StaticToken

    members: list[Authenticator] = []
    if settings.auth_token:
        members.append(StaticToken(settings.auth_token))
    if settings.oauth_discovery_url or settings.oauth_jwks_url:
        members.append(OAuthValidator(settings))
    return AnyOf(members) if members else Authenticator()
