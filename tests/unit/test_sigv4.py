"""The SigV4 verifier against botocore's signer, on a fixed clock: paths and queries that need encoding, repeated
and spaced header values, the time window's edges, and a pre-signed URL's expiry."""

from __future__ import annotations

import calendar
import datetime
from unittest import mock
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gateway.auth.sigv4 import SignedRequest, SigningKey, SigV4Verifier
from gateway.errors import ErrorCode, GatewayError

SIGNED_AT = datetime.datetime(2026, 12, 6, 12, 0, 0)
NOW = float(calendar.timegm(SIGNED_AT.timetuple()))
KEYS = {"AKID": SigningKey("AKID", "secret", "svc")}


def verifier(now: float = NOW) -> SigV4Verifier:
    return SigV4Verifier(KEYS, "us-west-2", "bedrock-agentcore", clock=lambda: now)


def as_received(request: AWSRequest, extra: dict[str, str] | None = None) -> SignedRequest:
    """The signed request as the gateway's server receives it: the path and query as sent, the headers lower-case."""
    parts = urlsplit(request.url)
    headers = [(name.lower(), value) for name, value in request.headers.items()]
    headers.append(("host", parts.netloc))
    headers += [(name, value) for name, value in (extra or {}).items()]
    return SignedRequest(request.method, parts.path, parts.query, headers)


def sign(method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None, query: int | None = None) -> AWSRequest:
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {})
    auth = SigV4QueryAuth(Credentials("AKID", "secret"), "bedrock-agentcore", "us-west-2", expires=query) if query else None
    with mock.patch("botocore.auth.get_current_datetime", return_value=SIGNED_AT):
        (auth or SigV4Auth(Credentials("AKID", "secret"), "bedrock-agentcore", "us-west-2")).add_auth(request)
    return request


def test_paths_and_queries_that_need_encoding():
    request = sign("GET", "http://gw:8080/threads/a%20b%2Fc/runs?limit=5&cursor=a%2Bb%3D&archived=any")
    assert verifier().verify(as_received(request), b"").owner == "sigv4:svc"


def test_repeated_and_spaced_header_values_and_a_body():
    body = b'{"threadId":"t"}'
    request = sign("POST", "http://gw/", body, {"x-note": "  two   spaces  ", "content-type": "application/json"})
    assert verifier().verify(as_received(request), body).subject == "svc"
    with pytest.raises(GatewayError) as refused:
        verifier().verify(as_received(request), body + b" ")
    assert refused.value.code is ErrorCode.ACCESS_DENIED


@pytest.mark.parametrize(("seconds", "accepted"), [(-299, True), (299, True), (-301, False), (301, False)])
def test_the_five_minute_window(seconds, accepted):
    received = as_received(sign("GET", "http://gw/threads"))
    if accepted:
        verifier(NOW + seconds).verify(received, b"")
    else:
        with pytest.raises(GatewayError):
            verifier(NOW + seconds).verify(received, b"")


def test_a_presigned_url_lives_until_it_expires():
    received = as_received(sign("GET", "http://gw/ws", query=60))
    verifier(NOW + 60).verify(received, b"")
    with pytest.raises(GatewayError):
        verifier(NOW + 61).verify(received, b"")


def test_a_header_added_to_the_signed_list_after_signing_is_refused():
    request = sign("GET", "http://gw/threads")
    authorization = request.headers["Authorization"].replace("SignedHeaders=", "SignedHeaders=accept;")
    received = as_received(request)
    received = SignedRequest(received.method, received.raw_path, received.raw_query, [*received.headers, ("accept", "*/*")])
    received.headers[[name for name, _ in received.headers].index("authorization")] = ("authorization", authorization)
    with pytest.raises(GatewayError):
        verifier().verify(received, b"")
