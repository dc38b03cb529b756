"""`/ui/`: the browser page (plain static files in transports/ui/, no build step), served without auth:
the page itself holds no data; it authenticates its own calls (token, WebSocket tickets)."""

from __future__ import annotations

import os

from litestar.datastructures import CacheControlHeader
from litestar.static_files import create_static_files_router

UI_DIRECTORY = os.path.join(os.path.dirname(__file__), "ui")

ui_router = create_static_files_router(
    path="/ui",
    directories=[UI_DIRECTORY],
    html_mode=True,
    name="ui",
    cache_control=CacheControlHeader(no_cache=True),
)
