"""The command line's checked values: each converter refuses a bad value by saying what is allowed, and the flag
(server/flags.py) makes that one sentence naming itself, its environment variable and the value (never a
traceback, never a silent clamp)."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable
from typing import Any

from gateway.settings import parse_duration, parse_rate

ENV_PREFIX = "AGUI_GATEWAY_"


class ConfigError(ValueError):
    """A configuration value the gateway cannot start with; the message is the whole explanation."""


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


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


class Parser(argparse.ArgumentParser):
    """argparse that reports a mistake as one ConfigError instead of usage text and exit."""

    def error(self, message: str) -> Any:
        raise ConfigError(message)


def durability(text: str) -> int:
    """`async` -> 0; `replicated` -> 1; `replicated:N` -> N: how many replicas must have each state write."""
    mode, _, count = text.partition(":")
    if mode == "async" and not count:
        return 0
    if mode == "replicated" and (not count or (count.isdigit() and 1 <= int(count) <= 16)):
        return int(count or 1)
    raise Refused("'async', 'replicated' or 'replicated:<replicas>' (1 to 16)")
