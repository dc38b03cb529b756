"""`agui-gateway`: the flags (server/flags.py) into Settings, then serve with uvicorn."""

from __future__ import annotations

import logging
import sys
from typing import Any

from server.flags import build_parser, settings_from_args


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from gateway.collector import tune_collector
    from gateway.fds import raise_fd_limit
    from gateway.log_output import setup_logging
    from gateway.tracing import setup_tracing
    from server.annex import LibraryChanged
    from server.app import create_app
    from server.serve import GatewayServer, uvicorn_options
    from store import StoreUnavailable
    from transports.cors import Cors
    from transports.fallback import Refusals
    from transports.fast_path import Outermost

    try:
        settings = settings_from_args(argv)
    except ValueError as exc:
        print(f"agui-gateway: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level, settings.log_format)
    setup_tracing()
    try:
        app = create_app(settings)
    except (ValueError, StoreUnavailable) as exc:  # a bad store, or a state directory another gateway holds
        print(f"agui-gateway: {exc}", file=sys.stderr)
        return 2
    soft, hard = raise_fd_limit()  # once the configuration is known good: each connection holds a descriptor
    tune_collector()
    logging.getLogger("agui.serve").info("file descriptors: soft limit %d, hard limit %d", soft, hard)
    # The annex answers the run routes before Litestar's own call (transports/fast_path.py); the public path lets
    # Litestar route them, behind the refusals no handler may see.
    annex = app.state.annex
    served: Any = Outermost(app) if annex.litestar else Refusals(app)
    if settings.cors_origins:
        served = Cors(served, settings.cors_origins)
    try:
        options = uvicorn_options(settings, annex)
    except LibraryChanged as exc:
        print(f"agui-gateway: {exc}", file=sys.stderr)
        return 2
    config = uvicorn.Config(served, host=settings.host, port=settings.port, log_config=None, access_log=False, **options)
    GatewayServer(config, app.state.services, annex).run()
    return 0


__all__ = ["build_parser", "main", "settings_from_args"]
