"""The canonical request digest used for (threadId, runId) idempotency: secrets are left out."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

_SECRET_EXTENSION_FIELDS = ("llmApiKey",)
_SECRET_CLOUD_FIELDS = ("accessKeyId", "accessKeySecret", "securityToken")
_canonical = msgspec.json.Encoder(order="sorted")


def without_secrets(body: dict[str, Any]) -> dict[str, Any]:
    """A copy of the decoded body with every request secret removed (shallow copies along the path)."""
    props = body.get("forwardedProps")
    if not isinstance(props, dict) or not isinstance(props.get("iacCode"), dict):
        return body
    ext = {k: v for k, v in props["iacCode"].items() if k not in _SECRET_EXTENSION_FIELDS}
    cloud = ext.get("alibabaCloud")
    if isinstance(cloud, dict):
        ext["alibabaCloud"] = {k: v for k, v in cloud.items() if k not in _SECRET_CLOUD_FIELDS}
    return {**body, "forwardedProps": {**props, "iacCode": ext}}


def request_digest(body: bytes) -> str:
    """sha256 of the canonical (sorted-key) JSON of the request without its secrets."""
    decoded = msgspec.json.decode(body)
    return hashlib.sha256(_canonical.encode(without_secrets(decoded))).hexdigest()


def answer_digest(status: str, payload: Any) -> str:
    return hashlib.sha256(_canonical.encode({"status": status, "payload": payload})).hexdigest()
