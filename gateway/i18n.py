"""Localized error messages (the catalogue is data: gateway/messages.json) and the language negotiation rule."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from gateway.errors import ErrorCode, GatewayError

_CATALOGUE: dict[str, Any] = json.loads((Path(__file__).with_name("messages.json")).read_text(encoding="utf-8"))
LANGUAGES: tuple[str, ...] = tuple(_CATALOGUE["languages"])
# Per code and language: a sentence, or {"field": a template naming {field}, "plain": the sentence without one}.
_MESSAGES: dict[str, dict[str, str | dict[str, str]]] = _CATALOGUE["messages"]


def _primary(tag: str) -> str:
    return tag.strip().lower().replace("_", "-").split("-", 1)[0]


_CACHED_UP_TO = 256  # the cache holds at most 512 such pairs (about 0.2 MB, whatever clients send)


def negotiate(preferred: str | None, accept_language: str | None) -> str:
    """preferredLanguage first, then Accept-Language by q-value, then English."""
    if len(preferred or "") + len(accept_language or "") <= _CACHED_UP_TO:
        return _negotiate_cached(preferred, accept_language)
    return _negotiate(preferred, accept_language)


@functools.lru_cache(maxsize=512)  # clients send a few distinct headers: each is parsed once
def _negotiate_cached(preferred: str | None, accept_language: str | None) -> str:
    return _negotiate(preferred, accept_language)


def _negotiate(preferred: str | None, accept_language: str | None) -> str:
    if preferred and _primary(preferred) in LANGUAGES:
        return _primary(preferred)
    if accept_language:
        ranked: list[tuple[float, int, str]] = []
        for index, item in enumerate(accept_language.split(",")[:32]):
            tag, _, params = item.partition(";")
            q = 1.0
            for param in params.split(";"):
                key, _, value = param.strip().partition("=")
                if key == "q":
                    try:
                        q = float(value)
                    except ValueError:
                        q = 0.0
            if q > 0 and _primary(tag) in LANGUAGES:
                ranked.append((-q, index, _primary(tag)))
        if ranked:
            return min(ranked)[2]
    return "en"


def message_for(error: GatewayError, language: str) -> str:
    """The localized sentence for an error, naming its field, with the technical detail appended."""
    table = _MESSAGES[error.code.name]
    entry = table.get(language) or table["en"]
    if isinstance(entry, str):
        text = entry
    elif error.field:
        text = entry["field"].format(field=error.field)
    else:
        text = entry["plain"]
    if error.detail:
        text = f"{text} {error.detail}"
    return text


def known_codes() -> set[str]:
    return set(_MESSAGES) | {code.name for code in ErrorCode}
