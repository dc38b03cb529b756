"""How a setting's text (a flag, an environment variable) becomes its value: each converter refuses a bad value by
saying what is allowed (`Refused`), and server/flags.py makes that one sentence naming the flag, its variable and
the value (never a traceback, never a silent clamp)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|m|h)\s*$")


def parse_rate(text: str) -> tuple[float, float]:
    """`20/s`, `600/m`, `1000/h` -> (requests per second, burst = the count)."""
    match = _RATE.match(text)
    if not match:
        raise ValueError(f"not a rate: {text!r} (use e.g. 20/s, 600/m)")
    count = float(match.group(1))
    if count <= 0:
        raise ValueError("a rate must be positive")
    return count / _UNITS[match.group(2)], count


def parse_duration(text: str) -> float:
    """`90`, `90s`, `15m`, `12h`, `7d` -> seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 900, 15m, 12h, 7d)")
    return float(match.group(1)) * _UNITS[match.group(2)]


class Refused(ValueError):
    """A value a converter does not take; `allowed` says what it takes."""

    def __init__(self, allowed: str) -> None:
        super().__init__(allowed)
        self.allowed = allowed


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    allowed = f"an integer from {low} to {high}" if high is not None else f"an integer of at least {low}"

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise Refused(allowed) from None
        if value < low or (high is not None and value > high):
            raise Refused(allowed)
        return value

    return convert


def seconds(*, low: float, inclusive: bool = True) -> Callable[[str], float]:
    allowed = f"a number of seconds {'>=' if inclusive else '>'} {low:g}"

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise Refused(allowed) from None
        if value < low or (not inclusive and value == low) or value != value:
            raise Refused(allowed)
        return value

    return convert


def duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError:
        raise Refused("a duration such as 900, 15m, 12h or 7d") from None


def rate(text: str) -> tuple[float, float]:
    try:
        return parse_rate(text)
    except ValueError:
        raise Refused("a positive rate such as 20/s, 600/m or 1000/h") from None


def algorithms(text: str) -> tuple[str, ...]:
    found = tuple(a.strip() for a in text.split(",") if a.strip())
    if not found or any(a.lower() == "none" or a.upper().startswith("HS") for a in found):
        raise Refused("a list of asymmetric algorithms such as RS256,ES256 ('none' and HS* are refused)")
    return found


def network(text: str) -> str:
    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        raise Refused("an IP address or CIDR such as 10.0.0.5 or 172.16.0.0/12") from None


def durability(text: str) -> int:
    """`async` -> 0; `replicated` -> 1; `replicated:N` -> N: how many replicas must have each state write."""
    mode, _, count = text.partition(":")
    if mode == "async" and not count:
        return 0
    if mode == "replicated" and (not count or (count.isdigit() and 1 <= int(count) <= 16)):
        return int(count or 1)
    raise Refused("'async', 'replicated' or 'replicated:<replicas>' (1 to 16)")


def duration_text(seconds: float) -> str:
    """A duration as a user would write it: `15m` for 900, `7d` for 604800, `90` for 90."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}"
