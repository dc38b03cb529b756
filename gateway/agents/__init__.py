"""Agent backends behind one seam: `demo` (embedded, scripted); others plug in through `load_agent`."""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING

from gateway.agents.base import AgentBackend, AgentRequest, ResumeAnswer

if TYPE_CHECKING:
    from gateway.agents.agui.backend import EventLimits


def load_agent(
    spec: str,
    token: str | None = None,
    *,
    follow_idle: float = 300.0,
    response_seconds: float = 60.0,
    max_state_bytes: int | None = None,
    where: str = "",
) -> AgentBackend:
    """`demo`, `agui+http(s)://host:port/path` for an AG-UI server, `a2a+http(s)://host:port/path` for an A2A 1.0
    agent, or `module:attr` for a Python plug-in: a factory of an AgentBackend, or an AG-UI agent object
    (`run(input)` yielding AG-UI events) run in this process.
    `follow_idle`: seconds of silence after which an A2A task followed with SubscribeToTask is given up;
    `response_seconds`: how long an AG-UI upstream may take to answer with its response head;
    `max_state_bytes`: the state bound (--max-state-bytes) an AG-UI agent's events make room for; `where`: what a
    ValueError names as the setting (default: the `--agent` flag)."""
    where = where or f"--agent {spec!r}"
    if spec.startswith(("agui+http://", "agui+https://")):
        from gateway.agents.agui import AguiHttpBackend

        return AguiHttpBackend(spec[len("agui+") :], token, response_seconds=response_seconds, limits=_limits(max_state_bytes))
    if spec.startswith(("a2a+http://", "a2a+https://")):
        from gateway.agents.a2a import A2ABackend

        return A2ABackend(spec[len("a2a+") :], token, follow_idle=follow_idle)
    if spec == "demo":
        from gateway.agents.demo import DemoAgent

        return DemoAgent()
    if ":" in spec and "://" not in spec:
        return _plug_in(spec, max_state_bytes, where)
    raise ValueError(
        f"{where}{' (AGUI_GATEWAY_AGENT)' if where.startswith('--agent ') else ''} is not an agent: use 'demo', 'agui+http(s)://host:port/path', "
        "'a2a+http(s)://host:port/path' or 'package.module:attr'"
    )


def _plug_in(spec: str, max_state_bytes: int | None, where: str) -> AgentBackend:
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        raise ValueError(f"{where}: the module {module_name!r} cannot be imported ({exc})") from None
    except AttributeError:
        raise ValueError(f"{where}: the module {module_name!r} has no {attr!r}") from None
    if _is_event_source(factory):
        return _in_process(factory, max_state_bytes)
    backend = factory()
    if isinstance(backend, AgentBackend):
        return backend
    if _is_event_source(backend):
        return _in_process(backend, max_state_bytes)
    raise ValueError(f"{where}: the factory returned {type(backend).__name__}, neither an AgentBackend nor an AG-UI agent")


def _is_event_source(candidate: object) -> bool:
    """An AG-UI agent object (ag-ui-langgraph's LangGraphAgent and the like): not a class or a function, with `run`."""
    return not isinstance(candidate, type) and not inspect.isroutine(candidate) and callable(getattr(candidate, "run", None))


def _in_process(source: object, max_state_bytes: int | None) -> AgentBackend:
    from gateway.agents.agui import AguiInProcessBackend

    return AguiInProcessBackend(source, _limits(max_state_bytes))


def _limits(max_state_bytes: int | None) -> EventLimits:
    from gateway.agents.agui.backend import DEFAULT_LIMITS, EventLimits

    return DEFAULT_LIMITS if max_state_bytes is None else EventLimits.for_state(max_state_bytes)


__all__ = ["AgentBackend", "AgentRequest", "ResumeAnswer", "load_agent"]
