"""The composition root: builds the store, agent, engine and transports from Settings and serves them.
It imports everything; nothing but the entry points imports it."""
