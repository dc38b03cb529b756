"""HTTP faces of the engine: SSE runs (POST / and /invocations), health and ping, the cancel extension."""
