"""The gateway's agents by id (AGENTS_AND_COPILOTKIT.md §1): declared in a TOML file (`--agents`), or the one agent
`--agent` declares, `default`. A file with any fault refuses to load with one line naming the file and the fault."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from gateway.agents.base import AgentBackend
from gateway.errors import ErrorCode, GatewayError

DEFAULT_AGENT = "default"  # the id of the agent `--agent` declares (and CopilotKit's name for an app's agent)
AGENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_AGENTS = 64  # the agent id is a metrics label: the file bounds its cardinality


class AgentSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One `[agents.<id>]` table; the options left out take the gateway's flags."""

    backend: str
    description: str = ""
    token_env: str | None = None  # the environment variable holding the agent's bearer token (never the token itself)
    default: bool = False
    response_seconds: float | None = None  # an AG-UI upstream's response head (--agent-response-seconds)
    follow_idle_seconds: float | None = None  # an A2A task followed with no news (--a2a-follow-idle-seconds)


# (the setting's name for errors, spec, token) -> the backend; a ValueError names the setting
Load = Callable[[str, AgentSpec, str | None], AgentBackend]


class Agents:
    """The agents this gateway serves, by id; exactly one is the default (`POST /`, `/invocations`, `/ws`)."""

    def __init__(self, backends: dict[str, AgentBackend], default: str, descriptions: dict[str, str] | None = None) -> None:
        if default not in backends:
            raise ValueError(f"the default agent {default!r} is not declared")
        self._backends = dict(backends)
        self.default_id = default
        self._descriptions = descriptions or {}

    @classmethod
    def one(cls, backend: AgentBackend) -> Agents:
        """The one agent `--agent` declares, `default`."""
        return cls({DEFAULT_AGENT: backend}, DEFAULT_AGENT)

    @property
    def default(self) -> AgentBackend:
        return self._backends[self.default_id]

    def get(self, agent_id: str) -> AgentBackend:
        """The agent with this id, else AGENT_NOT_FOUND (field `agentId`)."""
        backend = self._backends.get(agent_id)
        if backend is None:
            raise GatewayError(ErrorCode.AGENT_NOT_FOUND, "agentId", f"The agents here: {', '.join(sorted(self._backends))}.")
        return backend

    def resolve(self, agent_id: str) -> str:
        """`""` names the default agent; any other id must exist."""
        if not agent_id:
            return self.default_id
        self.get(agent_id)
        return agent_id

    def recorded(self, agent_id: str) -> str:
        """The id a thread records: empty for the default agent, so a thread started on `POST /` stays the default's."""
        return "" if agent_id == self.default_id else agent_id

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self._backends)

    def description(self, agent_id: str) -> str:
        return self._descriptions.get(agent_id) or f"The gateway's {self._backends[agent_id].name} agent"

    def __iter__(self) -> Iterator[tuple[str, AgentBackend]]:
        """The agents, the default first, then by id."""
        yield self.default_id, self.default
        for agent_id in sorted(self._backends):
            if agent_id != self.default_id:
                yield agent_id, self._backends[agent_id]

    async def aclose(self) -> None:
        for backend in self._backends.values():
            await backend.aclose()


def read_agents_file(path: str) -> dict[str, AgentSpec]:
    """The file's agents, checked; ValueError names the file and the fault."""

    def fault(text: str) -> ValueError:
        return ValueError(f"--agents {path}: {text}")

    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as exc:
        raise fault(f"cannot be read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise fault(f"is not TOML ({exc})") from None
    extra = sorted(set(document) - {"agents"})
    if extra:
        raise fault(f"{extra[0]!r} is not an agents table: declare each agent as [agents.<id>]")
    tables = document.get("agents")
    if not isinstance(tables, dict) or not tables:
        raise fault("declares no agent (add an [agents.<id>] table)")
    agents: dict[str, AgentSpec] = {}
    for agent_id, table in tables.items():
        if not AGENT_ID.fullmatch(agent_id):
            raise fault(f"agents.{agent_id}: an agent id is 1-64 of A-Z a-z 0-9 _ -")
        try:
            agents[agent_id] = msgspec.convert(table, AgentSpec)
        except msgspec.ValidationError as exc:
            reason = str(exc).replace("Object missing required", "missing the").replace("Object contains unknown", "unknown")
            reason = reason.replace("`object`", "a table").replace("`$.", "`")
            raise fault(f"agents.{agent_id}: {reason}") from None
    if len(agents) > MAX_AGENTS:
        raise fault(f"declares {len(agents)} agents, more than {MAX_AGENTS}")
    for agent_id, spec in agents.items():
        if spec.token_env is not None and not os.environ.get(spec.token_env):
            raise fault(f"agents.{agent_id}.token_env: the environment variable {spec.token_env} is not set")
        for name in ("response_seconds", "follow_idle_seconds"):
            value = getattr(spec, name)
            if value is not None and not 0 < value <= 86400:
                raise fault(f"agents.{agent_id}.{name}: between 0 and 86400 seconds")
    defaults = [agent_id for agent_id, spec in agents.items() if spec.default]
    if len(defaults) > 1:
        raise fault(f"more than one default agent ({', '.join(defaults)})")
    if not defaults and len(agents) > 1:
        raise fault("no default agent: set default = true on one")
    return agents


def load_agents(path: str, load: Load) -> Agents:
    """The agents the file declares, each backend made by `load`, told where the backend is named (its table)."""
    specs = read_agents_file(path)
    backends: dict[str, AgentBackend] = {}
    for agent_id, spec in specs.items():
        token = os.environ.get(spec.token_env) if spec.token_env else None
        backends[agent_id] = load(f"--agents {path}: agents.{agent_id}.backend {spec.backend!r}", spec, token)
    default = next((agent_id for agent_id, spec in specs.items() if spec.default), next(iter(specs)))
    return Agents(backends, default, {agent_id: spec.description for agent_id, spec in specs.items()})


def options_of(spec: AgentSpec, defaults: dict[str, Any]) -> dict[str, Any]:
    """`load_agent`'s keyword options for this agent: its own where the file sets them, else the flags'."""
    options = dict(defaults)
    if spec.response_seconds is not None:
        options["response_seconds"] = spec.response_seconds
    if spec.follow_idle_seconds is not None:
        options["follow_idle"] = spec.follow_idle_seconds
    return options
