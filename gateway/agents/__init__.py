"""Agent backends behind one seam: `demo` (embedded, scripted); others plug in through `load_agent`."""

from __future__ import annotations

import importlib

from gateway.agents.base import AgentBackend, AgentRequest, ResumeAnswer


def load_agent(spec: str) -> AgentBackend:
    """`demo`, or `module:factory` for a Python plug-in whose factory returns an AgentBackend."""
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
    raise ValueError(f"unknown agent {spec!r}: use 'demo' or 'package.module:factory'")


__all__ = ["AgentBackend", "AgentRequest", "ResumeAnswer", "load_agent"]
