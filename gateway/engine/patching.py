"""RFC 6902 JSON Patch applied under a budget: each operation is charged for the bytes it adds, copies, removes or
compares before it runs, so a patch that would grow a document past its bound, or cost more work than its bound,
is refused before that work is done (21 `copy` operations from the root would otherwise double a document 21
times, on the event loop).

The five operations that change a document are applied here with RFC 6901 pointers (`jsonpointer`); `test` is
`jsonpatch`'s, for its JSON equality. What is inserted is always a fresh copy (made from the encoding the charge
measured), so a document never shares a value with the patch that is sent on to clients.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer
import msgspec

OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")
_encode = msgspec.json.encode
_decode = msgspec.json.decode


class PatchRefused(Exception):
    """The patch does not apply, or would pass a bound; the clause says which (the document is left as it was)."""


class _Budget:
    """The document's size as an upper bound (what is added counts with its key, what is removed without), and the
    bytes of work charged so far. The size may pass `limit` by `slack`, the bound's own error, before it is refused."""

    __slots__ = ("limit", "size", "slack", "work", "work_limit")

    def __init__(self, size: int, limit: int, slack: int, work_limit: int) -> None:
        self.size, self.limit, self.slack, self.work, self.work_limit = size, limit, slack, 0, work_limit

    def measure(self, value: Any) -> bytes:
        """`value`'s encoding, its bytes charged as work before anything is done with them."""
        encoded = _encode(value)
        self.work += len(encoded)
        if self.work > self.work_limit:
            raise PatchRefused(f"it costs more than the gateway's bound of {self.work_limit} bytes of work to apply")
        return encoded

    def grow(self, added: int, removed: int = 0) -> None:
        self.size += added - removed
        if self.size > self.limit + self.slack:
            raise PatchRefused(f"it would make the document larger than the gateway's bound of {self.limit} bytes")


def apply(document: Any, patch: list[Any], limit: int, work_limit: int, slack: int = 0) -> Any:
    """A copy of `document` with `patch` applied; `document` itself is never changed. Raises PatchRefused. The size is
    an upper bound that overshoots by up to a key per removal: `slack` (the patch's own size covers it) keeps it
    from refusing a result within `limit`, which the caller checks exactly."""
    encoded = _encode(document)
    budget = _Budget(len(encoded), limit, slack, work_limit)
    result = _decode(encoded)
    for index, operation in enumerate(patch):
        if not isinstance(operation, dict) or operation.get("op") not in OPERATIONS or not isinstance(operation.get("path"), str):
            raise PatchRefused(f"operation {index} is not one of RFC 6902's ({', '.join(OPERATIONS)}) with its path")
        try:
            result = _apply_one(result, operation, budget)
        except PatchRefused:
            raise
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, KeyError, IndexError, ValueError) as exc:
            raise PatchRefused(f"operation {index} does not apply: {str(exc)[:200]}") from None
    return result


def _pointer(operation: dict[str, Any], name: str) -> jsonpointer.JsonPointer:
    path = operation.get(name)
    if not isinstance(path, str):
        raise ValueError(f"{operation['op']} without its {name}")
    return jsonpointer.JsonPointer(path)


def _apply_one(document: Any, operation: dict[str, Any], budget: _Budget) -> Any:
    kind = operation["op"]
    if kind == "test":
        if "value" not in operation:
            raise ValueError("test without its value")
        budget.measure(operation["value"])  # equality costs at most the smaller side
        return jsonpatch.JsonPatch([operation]).apply(document, in_place=True)
    target = _pointer(operation, "path")
    if kind == "remove":
        value = target.resolve(document)
        budget.grow(0, len(budget.measure(value)))
        return _remove(document, target)
    if kind == "move":
        source = _pointer(operation, "from")
        if source.path == target.path:
            source.resolve(document)
            return document
        if target.path.startswith(source.path + "/"):
            raise ValueError("a value cannot move into one of its own children")
        value = source.resolve(document)  # moved as it is: nothing copied, the size unchanged but for its key
        document = _remove(document, source)
        return _add(document, target, value, None, budget)
    if kind == "copy":
        encoded = budget.measure(_pointer(operation, "from").resolve(document))
    else:
        if "value" not in operation:
            raise ValueError(f"{kind} without its value")
        encoded = budget.measure(operation["value"])
    if kind == "replace":
        old = target.resolve(document)
        budget.grow(len(encoded), len(budget.measure(old)))
        if not target.parts:
            return _decode(encoded)
        parent, part = target.to_last(document)
        parent[part] = _decode(encoded)
        return document
    return _add(document, target, _decode(encoded), len(encoded), budget)


def _add(document: Any, target: jsonpointer.JsonPointer, value: Any, size: int | None, budget: _Budget) -> Any:
    """RFC 6902 `add`: insert into an array, set an object's member (replacing one that exists), or replace the root.
    `size` is the value's encoded size, charged to the budget (None: a moved value, already counted)."""
    if not target.parts:
        if size is not None:
            budget.grow(size, len(budget.measure(document)))
        return value
    parent, part = target.to_last(document)
    if isinstance(parent, list):
        if part == "-":
            part = len(parent)
        if not isinstance(part, int) or not 0 <= part <= len(parent):
            raise IndexError(f"cannot insert at {target.path!r}: outside the array")
        if size is not None:
            budget.grow(size + 1)  # and its comma
        parent.insert(part, value)
    elif isinstance(parent, dict):
        key_size = len(_encode(part)) + 2  # its key, colon and comma
        if size is not None:
            removed = len(budget.measure(parent[part])) if part in parent else 0
            budget.grow(size + key_size, removed)
        else:
            budget.grow(key_size)  # a moved value's new key
        parent[part] = value
    else:
        raise TypeError(f"cannot add at {target.path!r}: its parent is neither an object nor an array")
    return document


def _remove(document: Any, target: jsonpointer.JsonPointer) -> Any:
    if not target.parts:
        raise ValueError("the document's root cannot be removed")
    parent, part = target.to_last(document)
    if isinstance(parent, list):
        if not isinstance(part, int) or not 0 <= part < len(parent):
            raise IndexError(f"nothing to remove at {target.path!r}")
        del parent[part]
    elif isinstance(parent, dict):
        del parent[part]  # KeyError when it is missing
    else:
        raise TypeError(f"cannot remove at {target.path!r}: its parent is neither an object nor an array")
    return document
