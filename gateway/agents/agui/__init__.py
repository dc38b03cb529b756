"""Any AG-UI agent behind the gateway: an AG-UI server over HTTP, or an AG-UI event source in this process."""

from gateway.agents.agui.backend import AguiHttpBackend, AguiInProcessBackend

__all__ = ["AguiHttpBackend", "AguiInProcessBackend"]
