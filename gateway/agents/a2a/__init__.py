"""The A2A 1.0 agent backend, speaking the iac-code runtime's wire (shared/spec/IAC_CODE_A2A_WIRE.md)."""

from gateway.agents.a2a.backend import A2ABackend

__all__ = ["A2ABackend"]
