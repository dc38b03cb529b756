"""Agent backends behind one seam: `demo` (embedded, scripted); others plug in through `load_agent`."""

from __future__ import annotations

import importlib

from gateway.agents.base import AgentBackend, AgentRequest, ResumeAnswer


def load_agent(spec: str, token: str | None = None) -> AgentBackend:
    """`demo`, `a2a+http(s)://host:port/path` for an A2A 1.0 agent, or `module:factory` for a Python plug-in."""
    if spec.startswith(("a2a+http://", "a2a+https://")):
        from gateway.agents.a2a import A2ABackend

        return A2ABackend(spec[len("a2a+") :], token)
    if spec == "demo":
        from gateway.agents.demo import DemoAgent

        return DemoAgent()
    if ":" in spec and "://" not in spec:
        module_name, _, attr = spec.partition(":")
        factory = getattr(importlib.import_module(module_name), attr)
        backend = factory()
        if not isinstance(backend, AgentBackend):
            raise ValueError(f"{spec} did not return an AgentBackend")
        return backend
    raise ValueError(f"unknown agent {spec!r}: use 'demo', 'a2a+http://host:port/' or 'package.module:factory'")


__all__ = ["AgentBackend", "AgentRequest", "ResumeAnswer", "load_agent"]
