"""The trust store of outbound HTTPS (the A2A agent, the OAuth issuer), loaded once per process and shared.

httpx loads the CA bundle anew for every client it builds; a context is safe to share between
clients, and it honours SSL_CERT_FILE and SSL_CERT_DIR as httpx's own default does."""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def client_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()
