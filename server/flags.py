"""The command line, built from the flags `Settings` declares (gateway/settings.py): the parser, `--help`, the
AGUI_GATEWAY_* variables, the checks across flags and the reference table (docs/reference.md)."""

from __future__ import annotations

import argparse
import os
import typing
from dataclasses import dataclass
from typing import Any

import msgspec

from gateway import __version__
from gateway.auth.sigv4 import CredentialsFileError, load_keys
from gateway.setting_values import Refused, duration, duration_text
from gateway.settings import Flag, Settings, default_allowed_roots
from server.options import ConfigError, Parser, env_name


@dataclass(frozen=True)
class Option:
    """One flag as the parser sees it: a field of `Settings` with its `Flag`."""

    field: str
    flag: Flag
    default: Any  # as Settings holds it; None: unset (or made by the field's factory: `computed`)
    computed: bool
    choices: tuple[str, ...] | None

    @property
    def name(self) -> str:
        return self.flag.name or "--" + self.field.replace("_", "-")

    @property
    def dest(self) -> str:
        """The parser's name for it."""
        return self.name.lstrip("-").replace("-", "_")

    @property
    def shown(self) -> str:
        """The default as `--help` and the reference table show it."""
        value = self.default
        if self.flag.shown is not None:
            return self.flag.shown
        if value is None or self.computed or value == ():
            return "unset"
        if value == "":
            return "empty"
        if isinstance(value, tuple):
            return ",".join(str(item) for item in value)
        if isinstance(value, float):
            return duration_text(value) if self.flag.convert is duration else f"{value:g}"
        return str(value)

    def parse(self, text: str) -> Any:
        """The value of `text`; a refusal names this flag, its variable, the value and what is allowed."""
        assert self.flag.convert is not None
        try:
            return self.flag.convert(text)
        except Refused as refused:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {refused.allowed} (flag {self.name}, variable {env_name(self.name)})"
            ) from None


def _options() -> tuple[Option, ...]:
    hints = typing.get_type_hints(Settings, include_extras=True)
    options = []
    for info in msgspec.structs.fields(Settings):
        hint = hints[info.name]
        flag = next(meta for meta in hint.__metadata__ if isinstance(meta, Flag))
        kind = typing.get_args(hint)[0]
        choices = typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else None
        computed = info.default_factory is not msgspec.NODEFAULT
        default = None if computed else info.default
        options.append(Option(info.name, flag, default, computed, choices))
    return tuple(options)


FLAGS: tuple[Option, ...] = _options()  # in Settings' order

FALLBACK_VARIABLES = {"--auth-token": "IAC_CODE_AGUI_AUTH_TOKEN"}  # read when the flag's own variable is unset


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="agui-gateway",
        description="AG-UI gateway: AG-UI 1.0 runs over SSE and WebSocket in front of a pluggable agent backend. "
        "Every flag can also be set with its environment variable, shown in brackets.",
    )
    parser.add_argument("--version", action="version", version=f"agui-gateway {__version__}")
    for flag in FLAGS:
        extra: dict[str, Any] = {"type": flag.parse} if flag.flag.convert else {}
        if flag.choices:
            extra["choices"] = list(flag.choices)
        if flag.flag.many is not None:  # the variable's list is read in settings_from_args: append never sees it
            extra["action"], default = "append", None
        else:
            fallback = FALLBACK_VARIABLES.get(flag.name)
            default = os.environ.get(env_name(flag.name), os.environ.get(fallback, flag.default) if fallback else flag.default)
        parser.add_argument(flag.name, default=default, help=f"{flag.flag.help} [env {env_name(flag.name)}; default {flag.shown}]", **extra)
    return parser


def _listed(flag: Option, given: list[Any] | None) -> tuple[Any, ...]:
    """A repeatable flag's values: from the command line, else its variable's list (each converted)."""
    if given:
        return tuple(given)
    raw = os.environ.get(env_name(flag.name))
    items = [item.strip() for item in raw.split(flag.flag.many or ",") if item.strip()] if raw else []
    if not flag.flag.convert:
        return tuple(items)
    try:
        return tuple(flag.parse(item) for item in items)
    except argparse.ArgumentTypeError as refused:  # argparse reports the command line's; the variable's are ours
        raise ConfigError(str(refused)) from None


# The first path segments of the gateway's own routes, which --copilotkit-path may not take.
RESERVED_SEGMENTS = frozenset(
    {"invocations", "ws", "threads", "extensions", "health", "ping", "ready", "ui", "openapi", "metrics", ".well-known", "agents"}
)


def settings_from_args(argv: list[str] | None = None) -> Settings:
    """Raises ConfigError (a ValueError) naming the flag, its variable, the value and what is allowed."""
    args = vars(build_parser().parse_args(argv))
    values: dict[str, Any] = {}
    for flag in FLAGS:
        value = args[flag.dest]
        if flag.flag.many is not None:
            value = _listed(flag, value)
        if flag.computed and value in (None, "", ()):
            continue  # the field's own factory makes it
        if value == "" and flag.default is None:
            value = None  # an empty variable: unset
        values[flag.field] = flag.flag.finish(value) if flag.flag.finish and value is not None else value
    values["allowed_cwd"], values["default_cwd"] = _workspaces(values.get("allowed_cwd", ()), values["default_cwd"])
    if values["oauth_jwks_url"] and not (values["oauth_issuer"] or values["oauth_discovery_url"]):
        raise ConfigError("--oauth-jwks-url needs --oauth-issuer (or --oauth-discovery-url)")
    path = values["copilotkit_path"]
    if path:
        values["copilotkit_path"] = path = "/" + "/".join(part for part in path.split("/") if part)
        if path == "/" or path.split("/")[1] in RESERVED_SEGMENTS:
            raise ConfigError(f"--copilotkit-path {path!r} would hide the gateway's own routes: name a path of its own")
    if values["agents_file"] and (values["agent"] != "demo" or values["agent_token"]):
        raise ConfigError("--agents declares every agent: leave --agent and --agent-token unset (token_env names each agent's)")
    if values["sigv4_credentials"]:
        if not values["sigv4_region"]:
            raise ConfigError("--sigv4-credentials needs --sigv4-region")
        try:
            load_keys(values["sigv4_credentials"])
        except CredentialsFileError as refused:
            raise ConfigError(f"--sigv4-credentials: {refused}") from None
    return Settings(**values)


def _workspaces(roots: tuple[str, ...], default_cwd: str | None) -> tuple[tuple[str, ...], str | None]:
    normal = tuple(os.path.normpath(root) for root in (roots or default_allowed_roots()) if root)
    default = os.path.normpath(default_cwd) if default_cwd else None
    for root in normal + ((default,) if default else ()):
        if not root.startswith("/"):
            raise ConfigError(f"workspace paths must be absolute: {root!r} (flags --allowed-cwd, --default-cwd)")
    return normal, default


def reference_table() -> str:
    """The flags table of docs/reference.md (a test fails when the document drifts from it)."""
    rows = ["| Flag | Variable | Default | Meaning |", "|---|---|---|---|"]
    for flag in FLAGS:
        meaning = flag.flag.help.replace("|", "\\|")
        rows.append(f"| `{flag.name}` | `{env_name(flag.name)}` | {flag.shown} | {meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m server.flags: print the reference table
    print(reference_table(), end="")
