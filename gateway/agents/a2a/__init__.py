"""The A2A 1.0 agent backend (shared/spec/A2A_BACKEND.md): a JSON-RPC client, the frame-to-signal mapping, the backend."""

from gateway.agents.a2a.backend import A2ABackend

__all__ = ["A2ABackend"]
