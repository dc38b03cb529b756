"""What the composition root hands every transport handler, by Litestar dependency injection (`services`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litestar.di import NamedDependency

from gateway.access import Access
from gateway.auth import Authenticator
from gateway.engine import RunEngine
from gateway.settings import Settings
from transports.busy import BusyStatus


@dataclass
class TransportServices:
    settings: Settings
    engine: RunEngine
    access: Access
    auth: Authenticator
    status: BusyStatus
    sockets: set[Any] = field(default_factory=set)  # open WebSocket connections, closed with 1001 on drain


# How a handler asks for them: `services: Services`, an explicit Litestar dependency named `services`.
Services = NamedDependency[TransportServices]
