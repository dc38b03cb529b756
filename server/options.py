"""The command line's checked values: each converter refuses a bad value in one sentence that names the flag,
its environment variable, the value and what is allowed (never a traceback, never a silent clamp)."""

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


def _refuse(flag: str, value: str, allowed: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"{value!r} is not {allowed} (flag {flag}, variable {env_name(flag)})")


def integer(flag: str, low: int, high: int | None = None) -> Callable[[str], int]:
    allowed = f"an integer from {low} to {high}" if high is not None else f"an integer of at least {low}"

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise _refuse(flag, text, allowed) from None
        if value < low or (high is not None and value > high):
            raise _refuse(flag, text, allowed)
        return value

    return convert


def seconds(flag: str, *, low: float, inclusive: bool = True) -> Callable[[str], float]:
    allowed = f"a number of seconds {'>=' if inclusive else '>'} {low:g}"

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise _refuse(flag, text, allowed) from None
        if value < low or (not inclusive and value == low) or value != value:
            raise _refuse(flag, text, allowed)
        return value

    return convert


def duration(flag: str) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            return parse_duration(text)
        except ValueError:
            raise _refuse(flag, text, "a duration such as 900, 15m, 12h or 7d") from None

    return convert


def rate(flag: str) -> Callable[[str], tuple[float, float]]:
    def convert(text: str) -> tuple[float, float]:
        try:
            return parse_rate(text)
        except ValueError:
            raise _refuse(flag, text, "a positive rate such as 20/s, 600/m or 1000/h") from None

    return convert


def algorithms(flag: str) -> Callable[[str], tuple[str, ...]]:
    def convert(text: str) -> tuple[str, ...]:
        found = tuple(a.strip() for a in text.split(",") if a.strip())
        if not found or any(a.lower() == "none" or a.upper().startswith("HS") for a in found):
            raise _refuse(flag, text, "a list of asymmetric algorithms such as RS256,ES256 ('none' and HS* are refused)")
        return found

    return convert


def network(flag: str) -> Callable[[str], str]:
    def convert(text: str) -> str:
        try:
            return str(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError:
            raise _refuse(flag, text, "an IP address or CIDR such as 10.0.0.5 or 172.16.0.0/12") from None

    return convert


class Parser(argparse.ArgumentParser):
    """argparse that reports a mistake as one ConfigError instead of usage text and exit."""

    def error(self, message: str) -> Any:
        raise ConfigError(message)


def durability(flag: str) -> Callable[[str], int]:
    """`async` -> 0; `replicated` -> 1; `replicated:N` -> N: how many replicas must have each state write."""
    allowed = "'async', 'replicated' or 'replicated:<replicas>' (1 to 16)"

    def convert(text: str) -> int:
        mode, _, count = text.partition(":")
        if mode == "async" and not count:
            return 0
        if mode == "replicated" and (not count or (count.isdigit() and 1 <= int(count) <= 16)):
            return int(count or 1)
        raise _refuse(flag, text, allowed)

    return convert
