"""The authenticator seam: a bearer token in, a Principal out (or UNAUTHORIZED / ACCESS_DENIED); a SigV4-signed
request is checked by the verifier it carries (`sigv4`), which reads the whole request."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from gateway.errors import ErrorCode, GatewayError


class Principal(msgspec.Struct, frozen=True):
    """The caller. `key` identifies it for rate limits (never the token itself). `owner` is the identity
    threads are bound to: None without authentication; one value for every holder of the static token;
    the issuer and subject (or client id, when the token has no subject) of an OAuth token. `user_id` is
    the user the token asserts (a client-sent userId must match it); `expires_at` (Unix seconds) is when
    the credential stops being valid."""

    key: str
    subject: str | None = None
    client_id: str | None = None
    scopes: frozenset[str] = msgspec.field(default_factory=frozenset)
    owner: str | None = None
    user_id: str | None = None
    expires_at: float | None = None

    def to_json(self) -> str:
        """What a WebSocket ticket remembers of its principal (never a token)."""
        return json.dumps({f: getattr(self, f) for f in ("key", "subject", "client_id", "owner", "user_id", "expires_at")})

    @classmethod
    def from_json(cls, text: str) -> Principal:
        return cls(**json.loads(text))


ANONYMOUS = Principal(key="anonymous")


def token_key(token: str) -> str:
    return "tok:" + hashlib.sha256(token.encode()).hexdigest()[:32]


class Authenticator:
    """Checks a bearer token. The default accepts everyone (no auth configured)."""

    required = False
    sigv4: Any = None  # the SigV4 verifier (gateway/auth/sigv4.py), when SigV4 is configured
    takes_bearer = False  # a bearer token can be accepted (a static token or OAuth is configured)

    async def authenticate(self, token: str | None) -> Principal:
        return ANONYMOUS

    def metadata_url(self) -> str | None:
        """Where the RFC 9728 protected resource metadata is served; None when no OAuth is configured."""
        return None

    async def resource_metadata(self) -> dict[str, Any] | None:
        """The RFC 9728 document served at `metadata_url()`, or None."""
        return None

    def challenge(self, error: GatewayError, had_token: bool) -> str:
        """`WWW-Authenticate` for a refused credential (RFC 6750 §3), pointing to the metadata when there is one."""
        parts = []
        if metadata := self.metadata_url():
            parts.append(f'resource_metadata="{metadata}"')
        reason = "insufficient_scope" if error.code is ErrorCode.ACCESS_DENIED else ("invalid_token" if had_token else None)
        if reason:
            parts.append(f'error="{reason}"')
        return "Bearer " + ", ".join(parts) if parts else "Bearer"

    async def aclose(self) -> None:
        return None


class AnyOf(Authenticator):
    """Accept a token that any of the configured authenticators accepts (static token, OAuth)."""

    required = True

    def __init__(self, members: list[Authenticator], sigv4: Any = None) -> None:
        self.members = members
        self.sigv4 = sigv4
        self.takes_bearer = bool(members)

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

    def metadata_url(self) -> str | None:
        return next((url for member in self.members if (url := member.metadata_url())), None)

    async def resource_metadata(self) -> dict[str, Any] | None:
        for member in self.members:
            if (document := await member.resource_metadata()) is not None:
                return document
        return None

    async def aclose(self) -> None:
        for member in self.members:
            await member.aclose()
