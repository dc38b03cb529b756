"""A static bearer token (`--auth-token`, `IAC_CODE_AGUI_AUTH_TOKEN`), compared in constant time."""

from __future__ import annotations

import hmac

from gateway.auth.base import Authenticator, Principal, token_key
from gateway.errors import ErrorCode, GatewayError

STATIC_OWNER = "static-token"  # every holder of the static token is one principal


class StaticToken(Authenticator):
    required = True

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def authenticate(self, token: str | None) -> Principal:
        if not token or not hmac.compare_digest(token.encode(), self._token):
            raise GatewayError(ErrorCode.UNAUTHORIZED)
        return Principal(key=token_key(token), owner=STATIC_OWNER)
