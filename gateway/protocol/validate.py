"""Checks on a decoded RunAgentInput that types alone cannot express: tools, workspace, images, the user message."""

from __future__ import annotations

import base64
import binascii
import functools
import os
import posixpath
import re

import msgspec

from gateway.errors import ErrorCode, GatewayError
from gateway.jsondepth import MAX_JSON_DEPTH, too_deep
from gateway.protocol.input import IacCode, ImagePart, RunAgentInput, TextPart, ToolMessage, UserMessage

MAX_BODY_BYTES = 12 * 1024 * 1024
MAX_IMAGE_BYTES = 8 * 1024 * 1024
MAX_IMAGES_TOTAL_BYTES = 10 * 1024 * 1024
IMAGE_SIGNATURES = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}

_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_FIELD = re.compile(r"field `(?P<name>[^`]+)`")


def plain_invocation_id(thread_id: str) -> str:
    """A plain AG-UI run's invocation identity: its thread's (the right to follow it is the right to the thread)."""
    return f"thread:{thread_id}"[:256]


def invalid(field: str, detail: str | None = None) -> GatewayError:
    return GatewayError(ErrorCode.INVALID_INPUT, field, detail)


def check_depth(raw: bytes | str, field: str = "body") -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH, before any decoder recurses into it."""
    if too_deep(raw):
        raise invalid(field, f"The JSON nests deeper than {MAX_JSON_DEPTH} levels.")


def error_from_msgspec(exc: msgspec.MsgspecError) -> GatewayError:
    """Turn a msgspec decode error into INVALID_INPUT naming the JSON path of the offending field."""
    text = str(exc)
    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        return invalid("body", "The body is not valid JSON.")
    match = _AT.search(text)
    path = match.group("path").lstrip(".") if match else ""
    named = _FIELD.search(text)
    if named and ("missing required field" in text or "unknown field" in text):
        path = f"{path}.{named.group('name')}" if path else named.group("name")
    detail = _AT.sub("", text)
    return invalid(path or "body", detail if detail.endswith(".") else detail + ".")


class Workspace(msgspec.Struct, frozen=True):
    """Where and for whom a run works, after normalisation."""

    extension: IacCode
    cwd: str


def resolve_workspace(run: RunAgentInput, allowed_roots: tuple[str, ...], default_cwd: str | None) -> Workspace:
    ext = run.forwarded_props.iacCode
    if ext is msgspec.UNSET:
        if default_cwd is None:
            raise invalid(
                "forwardedProps.iacCode",
                "The iacCode extension is required: this gateway has no default workspace for plain AG-UI requests "
                "(its operator can set one with --default-cwd or AGUI_GATEWAY_DEFAULT_CWD).",
            )
        # Plain AG-UI mode: the operator's default workspace (trusted as configured, so not checked against the
        # allowed roots, which bound what clients may ask for); the invocation identity is derived from the thread.
        plain = IacCode(schema_version=1, ros_invocation_id=plain_invocation_id(run.thread_id), cwd=default_cwd)
        return Workspace(extension=plain, cwd=posixpath.normpath(default_cwd))
    cwd = ext.cwd
    if "\x00" in cwd or not cwd.startswith("/"):
        raise invalid("forwardedProps.iacCode.cwd", "The workspace must be an absolute path.")
    cwd = posixpath.normpath(cwd)
    if cwd.startswith("//"):
        cwd = "/" + cwd.lstrip("/")
    if not _within(cwd, allowed_roots):
        raise invalid("forwardedProps.iacCode.cwd", "The workspace is outside the allowed roots.")
    real = real_path(cwd)  # symlinks resolved: a link inside a root that points out of it is refused
    if not _within(real, _real_roots(allowed_roots)):
        raise invalid("forwardedProps.iacCode.cwd", "The workspace is outside the allowed roots.")
    return Workspace(extension=ext, cwd=real)


_O_PATH = getattr(os, "O_PATH", None)  # Linux's: a descriptor that only names a file, opened without read rights


def real_path(path: str) -> str:
    """`os.path.realpath(path)`, asked of the kernel where the path exists: one open, one readlink of the descriptor
    and one close, not a Python `lstat` per component (the largest step of a short run's admission, bench/NOTES.md).
    A path that does not exist, or that the kernel cannot name here (no /proc, a directory deleted meanwhile),
    takes Python's walk, as on a system without O_PATH."""
    if _O_PATH is None:
        return os.path.realpath(path)
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except OSError:
        return os.path.realpath(path)
    try:
        named = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        named = ""
    finally:
        os.close(fd)
    return named if named.startswith("/") and not named.endswith(" (deleted)") else os.path.realpath(path)


def _within(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


@functools.lru_cache(maxsize=8)
def _real_roots(roots: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(os.path.realpath(root) for root in roots)


MAX_TOOLS = 128
MAX_TOOLS_BYTES = 256 * 1024
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_tools(run: RunAgentInput) -> None:
    """With the iacCode extension, `tools` must be empty (the seed contract). A plain request's client tools are
    checked one by one: a name of `[A-Za-z0-9_-]{1,64}`, a string description, JSON Schema `parameters` as an
    object; at most MAX_TOOLS of them, MAX_TOOLS_BYTES in all, and no name twice."""
    if not run.tools:
        return
    if run.forwarded_props.iacCode is not msgspec.UNSET:
        raise invalid("tools", "Client-defined tools are not supported with the iacCode extension; send an empty list.")
    if len(run.tools) > MAX_TOOLS:
        raise invalid("tools", f"At most {MAX_TOOLS} tools.")
    if len(msgspec.json.encode(run.tools)) > MAX_TOOLS_BYTES:
        raise invalid("tools", f"The tool definitions exceed {MAX_TOOLS_BYTES // 1024} KiB in all.")
    names: set[str] = set()
    for index, tool in enumerate(run.tools):
        field = f"tools[{index}]"
        if not isinstance(tool, dict):
            raise invalid(field, "A tool is an object with name, description and parameters.")
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise invalid(f"{field}.name", "A tool name is 1 to 64 of A-Z, a-z, 0-9, _ and -.")
        if name in names:
            raise invalid(f"{field}.name", "Two tools have this name.")
        names.add(name)
        if not isinstance(tool.get("description", ""), str):
            raise invalid(f"{field}.description", "A tool description is a string.")
        if not isinstance(tool.get("parameters", {}), dict):
            raise invalid(f"{field}.parameters", "A tool's parameters are a JSON Schema object.")


def continues_with_tool_results(run: RunAgentInput) -> bool:
    """A plain run whose newest message is a `tool` result (the client ran a tool the last run called): valid
    with no new user message."""
    return run.forwarded_props.iacCode is msgspec.UNSET and bool(run.messages) and isinstance(run.messages[-1], ToolMessage)


def check_images(run: RunAgentInput) -> int:
    """Validate every inline image (type, strict base64, sizes); return how many there are."""
    total = 0
    count = 0
    for m_index, message in enumerate(run.messages):
        if not isinstance(message, UserMessage) or isinstance(message.content, str):
            continue
        for p_index, part in enumerate(message.content):
            if not isinstance(part, ImagePart):
                continue
            field = f"messages[{m_index}].content[{p_index}].source"
            mime = part.source.mime_type.lower()
            if mime not in IMAGE_SIGNATURES:
                raise invalid(f"{field}.mimeType", "Only png, jpeg, gif and webp images are accepted.")
            value = part.source.value
            if len(value) // 4 * 3 > MAX_IMAGE_BYTES + 3:
                raise GatewayError(ErrorCode.INVALID_INPUT, f"{field}.value", "The image exceeds 8 MiB.", http_status=413)
            try:
                data = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise invalid(f"{field}.value", "The image is not valid base64.") from None
            if len(data) > MAX_IMAGE_BYTES:
                raise GatewayError(ErrorCode.INVALID_INPUT, f"{field}.value", "The image exceeds 8 MiB.", http_status=413)
            if not data.startswith(IMAGE_SIGNATURES[mime]) or (mime == "image/webp" and data[8:12] != b"WEBP"):
                raise invalid(f"{field}.value", "The image bytes do not match its mimeType.")
            total += len(data)
            count += 1
            if total > MAX_IMAGES_TOTAL_BYTES:
                raise GatewayError(ErrorCode.INVALID_INPUT, f"{field}.value", "All images together exceed 10 MiB.", http_status=413)
    return count


def last_user_message(run: RunAgentInput) -> UserMessage | None:
    return next((m for m in reversed(run.messages) if isinstance(m, UserMessage)), None)


def inline_images(message: UserMessage | None) -> tuple[tuple[str, str], ...]:
    if message is None or isinstance(message.content, str):
        return ()
    return tuple((p.source.mime_type, p.source.value) for p in message.content if isinstance(p, ImagePart))


def last_user_text(run: RunAgentInput) -> str | None:
    """The text of the last user message, or None if there is no user message."""
    for message in reversed(run.messages):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                return message.content
            return "".join(part.text for part in message.content if isinstance(part, TextPart))
    return None
