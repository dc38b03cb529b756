"""AG-UI gateway: AG-UI 1.0 runs over SSE in front of pluggable agent backends."""

__version__ = "0.1.0"
PROTOCOL_VERSION = "1.0"
EXTENSION_SCHEMA_VERSION = 1
