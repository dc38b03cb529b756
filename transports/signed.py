"""A request as SigV4 signs it, read from its ASGI scope: the method, its path and query as sent, its headers."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gateway.auth.sigv4 import SignedRequest, is_signed


def signed(scope: Any, authorization: str | None) -> bool:
    """Whether the request carries a SigV4 signature (its Authorization scheme, or a pre-signed query)."""
    return is_signed(authorization, scope.get("query_string", b"").decode("latin-1"))


def signed_request(scope: Any) -> SignedRequest:
    raw_path = scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else quote(scope["path"])
    method = scope.get("method", "GET") if scope["type"] == "http" else "GET"  # a WebSocket's upgrade is a GET
    headers = [(name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in scope["headers"]]
    return SignedRequest(method, path, scope.get("query_string", b"").decode("latin-1"), headers)
