"""Bounds on what one thread's state keeps, defined once: the Python rules use them and the Redis store
hands them to every Lua script at registration."""

MAX_RUN_RECORDS = 256  # run ids remembered per thread for idempotency (lowest fence forgotten first)
MAX_HISTORY = 16  # finished executions remembered per thread (for already_terminal, repeated answers)
MAX_ANSWERED_IDS = 64  # ids of interrupts answered, expired or cancelled, kept per execution
QUEUE_TICKET_SECONDS = 5.0  # a queued run's place lasts this long unless its replica renews it (its waiter looks every 0.5 s)
