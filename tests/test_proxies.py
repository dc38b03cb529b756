"""Trusted proxies: client addresses behind a listed proxy come from X-Forwarded-For and feed the rate limit;
anyone else's X-Forwarded-For is ignored."""

from __future__ import annotations

import http.client
import json

from tests.support import run_body


def post_from(port: int, source: str, forwarded_for: str | None) -> int:
    """One run through a raw connection from `source` (a loopback address), optionally as a proxy would send it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    headers = {"content-type": "application/json"}
    if forwarded_for:
        headers["x-forwarded-for"] = forwarded_for
    body = run_body("hi")
    connection.request("POST", "/", body=json.dumps(body), headers=headers)
    status = connection.getresponse().status
    connection.close()
    return status


def test_clients_behind_a_trusted_proxy_get_their_own_buckets(start_gateway):
    server = start_gateway("--trusted-proxies", "127.0.0.2/32", "--rate-limit", "2/m")
    # Through the proxy (127.0.0.2): three real clients, two requests each, all within their own burst of 2.
    for client in ("198.51.100.1", "198.51.100.2", "198.51.100.3"):
        assert [post_from(server.port, "127.0.0.2", client) for _ in range(2)] == [200, 200]
        assert post_from(server.port, "127.0.0.2", client) == 429, "the third request of one client is over its rate"
    # Not a trusted proxy: its X-Forwarded-For is ignored, so every "client" it names shares 127.0.0.3's bucket.
    statuses = [post_from(server.port, "127.0.0.3", f"203.0.113.{n}") for n in range(3)]
    assert statuses == [200, 200, 429], statuses
