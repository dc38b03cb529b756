"""AWS Signature Version 4, verified as AWS verifies it (the AgentCore contract's second way in, SIGV4.md): a request
signed in its `Authorization` header or pre-signed in its query, checked against the keys of the operator's file.

What is checked: the algorithm, the credential's key (known), date (the request's), region and service (the
gateway's), the time (`X-Amz-Date` within five minutes of the gateway's clock; a pre-signed URL from its date to
its `X-Amz-Expires`, at most seven days), `host` among the signed headers and every signed header present, the
session token of temporary credentials, and the signature over the canonical request (the payload's hash:
`x-amz-content-sha256` when sent, checked against the body, else the body's own; a pre-signed URL's may also be
`UNSIGNED-PAYLOAD`), compared in constant time. Every refusal is ACCESS_DENIED, and none says which check failed.
A request replayed within its window is accepted, as AWS accepts it (SigV4 carries no nonce)."""

from __future__ import annotations

import calendar
import hashlib
import hmac
import os
import stat
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

from gateway.auth.base import Principal
from gateway.errors import ErrorCode, GatewayError

ALGORITHM = "AWS4-HMAC-SHA256"
CLOCK_SKEW_SECONDS = 300  # how far X-Amz-Date may be from the gateway's clock (AWS: 5 minutes)
MAX_EXPIRES_SECONDS = 7 * 24 * 3600  # the longest a pre-signed URL may live (AWS: 7 days)
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
EMPTY_HASH = hashlib.sha256(b"").hexdigest()
_UNRESERVED = "-_.~"  # with letters and digits, what RFC 3986 (and SigV4) leaves unencoded


class CredentialsFileError(ValueError):
    """The credentials file cannot be used (unreadable by others is required, and a valid layout)."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    access_key_id: str
    secret: str
    principal: str  # who the key stands for: the identity its threads are bound to
    session_token: str | None = None  # temporary credentials: every request carries this token

    def __repr__(self) -> str:
        return f"SigningKey({self.access_key_id!r}, principal={self.principal!r}, <secret redacted>)"


def load_keys(path: str) -> dict[str, SigningKey]:
    """`[keys.<access key id>]` tables with `secret`, `principal` and an optional `session_token`, from a file only
    its owner may read or write (0600 or stricter)."""
    try:
        mode = os.stat(path).st_mode
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CredentialsFileError(f"{path}: {type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CredentialsFileError(f"{path} may be read or written by others (mode {stat.S_IMODE(mode):o}): chmod 600 it")
    tables = document.get("keys")
    if not isinstance(tables, dict) or not tables:
        raise CredentialsFileError(f"{path}: no [keys.<access key id>] table")
    keys = {}
    for key_id, table in tables.items():
        if not isinstance(table, dict) or not isinstance(table.get("secret"), str) or not isinstance(table.get("principal"), str):
            raise CredentialsFileError(f"{path}: [keys.{key_id}] needs a `secret` and a `principal` (strings)")
        token = table.get("session_token")
        if token is not None and not isinstance(token, str):
            raise CredentialsFileError(f"{path}: [keys.{key_id}] `session_token` must be a string")
        keys[key_id] = SigningKey(key_id, table["secret"], table["principal"], token)
    return keys


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """What a request shows of itself: method, its path and query as sent (percent-encoded), its headers."""

    method: str
    raw_path: str
    raw_query: str
    headers: list[tuple[str, str]]  # names lower-case, in the order received

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]


def is_signed(authorization: str | None, raw_query: str) -> bool:
    """Whether a request carries a SigV4 signature (its `Authorization` scheme, or a pre-signed query)."""
    if authorization is not None and authorization.split(" ", 1)[0] == ALGORITHM:
        return True
    return "x-amz-algorithm=" in raw_query.lower() or "x-amz-signature=" in raw_query.lower()


def denied() -> GatewayError:
    return GatewayError(ErrorCode.ACCESS_DENIED, detail="The request's AWS Signature Version 4 was not accepted.")


class SigV4Verifier:
    """Checks signed requests against `keys`, for one region and service."""

    def __init__(self, keys: dict[str, SigningKey], region: str, service: str, clock: Callable[[], float] = time.time) -> None:
        self.keys = keys
        self.region = region
        self.service = service
        self.clock = clock

    def verify(self, request: SignedRequest, body: bytes) -> Principal:
        """The principal of a correctly signed request; ACCESS_DENIED for anything else."""
        query = _query_pairs(request.raw_query)
        presigned = any(name == "X-Amz-Signature" for name, _ in query)
        fields = _query_fields(query) if presigned else _header_fields(request)
        if fields is None or fields.get("algorithm") != ALGORITHM:
            raise denied()
        key = self._key(fields)
        amz_date, signed_names = fields["date"], fields["signed"].split(";")
        scope = f"{amz_date[:8]}/{self.region}/{self.service}/aws4_request"
        if fields["scope"] != scope or "host" not in signed_names or signed_names != sorted(set(signed_names)):
            raise denied()
        self._check_time(amz_date, fields.get("expires"), presigned)
        token = fields.get("token")
        if (key.session_token is None) != (token is None) or (token is not None and not _same(token, key.session_token or "")):
            raise denied()
        if presigned:
            query = [(name, value) for name, value in query if name != "X-Amz-Signature"]
        # A pre-signed URL may have been signed knowing nothing of the payload (S3's habit); botocore and the AWS SDK
        # for JavaScript sign the body's hash (the empty one for a GET).
        payloads = [_payload_hash(request, body)] + ([UNSIGNED_PAYLOAD] if presigned else [])
        head = [request.method, _canonical_path(request.raw_path), _canonical_query(query), *_canonical_headers(request, signed_names)]
        signing_key = _signing_key(key.secret, amz_date[:8], self.region, self.service)
        for payload in payloads:
            canonical = "\n".join([*head, payload])
            to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
            if _same(hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest(), fields["signature"]):
                digest = hashlib.sha256(key.access_key_id.encode()).hexdigest()[:32]
                return Principal(key="sigv4:" + digest, subject=key.principal, owner="sigv4:" + key.principal)
        raise denied()

    def _key(self, fields: dict[str, str]) -> SigningKey:
        key_id, _, scope = fields.get("credential", "").partition("/")
        key = self.keys.get(key_id)
        if key is None:
            raise denied()
        fields["scope"] = scope
        return key

    def _check_time(self, amz_date: str, expires: str | None, presigned: bool) -> None:
        try:
            signed_at = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            raise denied() from None
        now = self.clock()
        if not presigned:
            if abs(now - signed_at) > CLOCK_SKEW_SECONDS:
                raise denied()
            return
        if expires is None or not expires.isdigit() or not 1 <= int(expires) <= MAX_EXPIRES_SECONDS:
            raise denied()
        if now < signed_at - CLOCK_SKEW_SECONDS or now > signed_at + int(expires):
            raise denied()


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _header_fields(request: SignedRequest) -> dict[str, str] | None:
    """The `Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...` header's parts."""
    values = request.header("authorization")
    dates = request.header("x-amz-date")
    if len(values) != 1 or len(dates) != 1:
        return None
    algorithm, _, rest = values[0].strip().partition(" ")
    parts: dict[str, str] = {}
    for item in rest.split(","):
        name, eq, value = item.strip().partition("=")
        if not eq or name in parts:
            return None
        parts[name] = value
    if set(parts) != {"Credential", "SignedHeaders", "Signature"}:
        return None
    tokens = request.header("x-amz-security-token")
    if len(tokens) > 1:
        return None
    fields = {"algorithm": algorithm, "credential": parts["Credential"], "signed": parts["SignedHeaders"], "signature": parts["Signature"]}
    fields["date"] = dates[0].strip()
    if tokens:
        fields["token"] = tokens[0]
    return fields


_QUERY_FIELDS = {
    "X-Amz-Algorithm": "algorithm",
    "X-Amz-Credential": "credential",
    "X-Amz-Date": "date",
    "X-Amz-Expires": "expires",
    "X-Amz-SignedHeaders": "signed",
    "X-Amz-Signature": "signature",
    "X-Amz-Security-Token": "token",
}


def _query_fields(query: list[tuple[str, str]]) -> dict[str, str] | None:
    fields: dict[str, str] = {}
    for name, value in query:
        field = _QUERY_FIELDS.get(name)
        if field is not None:
            if field in fields:
                return None
            fields[field] = value
    required = {"algorithm", "credential", "date", "expires", "signed", "signature"}
    return fields if required <= set(fields) else None


def _query_pairs(raw_query: str) -> list[tuple[str, str]]:
    pairs = []
    for item in raw_query.split("&") if raw_query else []:
        name, _, value = item.partition("=")
        pairs.append((unquote(name.replace("+", " ")), unquote(value.replace("+", " "))))
    return pairs


def _encode(text: str) -> str:
    return quote(text, safe=_UNRESERVED)


def _canonical_query(pairs: Iterable[tuple[str, str]]) -> str:
    return "&".join(f"{name}={value}" for name, value in sorted((_encode(n), _encode(v)) for n, v in pairs))


def _canonical_path(raw_path: str) -> str:
    """The path as sent, its dot segments resolved and its empty segments dropped (RFC 3986 §5.2.4, as AWS
    services normalise it), then encoded once more (every service but S3 does so)."""
    if not raw_path:
        return "/"
    kept: list[str] = []
    for segment in raw_path.split("/"):
        if segment == "..":
            if kept:
                kept.pop()
        elif segment and segment != ".":
            kept.append(segment)
    path = ("/" if raw_path.startswith("/") else "") + "/".join(kept) + ("/" if raw_path.endswith("/") and kept else "")
    return quote(path, safe="/" + _UNRESERVED)


def _canonical_headers(request: SignedRequest, names: list[str]) -> list[str]:
    """`name:value` for each signed header (its values joined by commas, spaces trimmed and collapsed), then the
    list of their names; a signed header the request lacks is a refusal."""
    lines = []
    for name in names:
        values = request.header(name)
        if not values:
            raise denied()
        lines.append(f"{name}:" + ",".join(" ".join(value.split()) for value in values))
    return ["\n".join(lines) + "\n", ";".join(names)]


def _payload_hash(request: SignedRequest, body: bytes) -> str:
    """`x-amz-content-sha256` when sent (the body must match it, unless UNSIGNED-PAYLOAD), else the body's hash."""
    actual = hashlib.sha256(body).hexdigest() if body else EMPTY_HASH
    sent = request.header("x-amz-content-sha256")
    if not sent:
        return actual
    if len(sent) > 1 or (sent[0] != UNSIGNED_PAYLOAD and not _same(sent[0].lower(), actual)):
        raise denied()
    return sent[0]
