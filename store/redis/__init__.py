"""The Redis store: the store itself (store.py), its clients (client.py), the scripts' wire (scripts.py and the
short way to a connection, wire.py), the cancel channel (cancels.py) and the Sentinel watch (sentinel.py)."""

from store.redis.client import connect
from store.redis.scripts import thread_key
from store.redis.store import RedisStore

__all__ = ["RedisStore", "connect", "thread_key"]
