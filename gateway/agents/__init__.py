"""Agent backends behind one seam: `demo` (embedded, scripted); others plug in through `load_agent`."""

from __future__ import annotations

import importlib

from gateway.agents.base import AgentBackend, AgentRequest, ResumeAnswer


def load_agent(spec: str, token: str | None = None, *, follow_idle: float = 300.0) -> AgentBackend:
    """`demo`, `a2a+http(s)://host:port/path` for an A2A 1.0 agent, or `module:factory` for a Python plug-in.
    `follow_idle`: seconds of silence after which an A2A task followed with SubscribeToTask is given up."""
    if spec.startswith(("a2a+http://", "a2a+https://")):
        from gateway.agents.a2a import A2ABackend

        return A2ABackend(spec[len("a2a+") :], token, follow_idle=follow_idle)
    if spec == "demo":
        from gateway.agents.demo import DemoAgent

        return DemoAgent()
    if ":" in spec and "://" not in spec:
        return _plug_in(spec)
    raise ValueError(
        f"--agent {spec!r} (AGUI_GATEWAY_AGENT) is not an agent: use 'demo', 'a2a+http(s)://host:port/path' or 'package.module:factory'"
    )


def _plug_in(spec: str) -> AgentBackend:
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        raise ValueError(f"--agent {spec!r}: the module {module_name!r} cannot be imported ({exc})") from None
    except AttributeError:
        raise ValueError(f"--agent {spec!r}: the module {module_name!r} has no {attr!r}") from None
    backend = factory()
    if not isinstance(backend, AgentBackend):
        raise ValueError(f"--agent {spec!r}: the factory returned {type(backend).__name__}, not an AgentBackend")
    return backend


__all__ = ["AgentBackend", "AgentRequest", "ResumeAnswer", "load_agent"]
