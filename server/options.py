"""The command line's own parts: the error that stops a start, the environment variable of a flag, and argparse
made to report a mistake as that error."""

from __future__ import annotations

import argparse
from typing import Any

ENV_PREFIX = "AGUI_GATEWAY_"


class ConfigError(ValueError):
    """A configuration value the gateway cannot start with; the message is the whole explanation."""


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


class Parser(argparse.ArgumentParser):
    """argparse that reports a mistake as one ConfigError instead of usage text and exit."""

    def error(self, message: str) -> Any:
        raise ConfigError(message)
