"""The file store's earlier layout, one JSON file per thread in `<state-dir>/threads/`: imported into the journal
at start, then removed. A file that cannot be read stays where it is, and its thread keeps answering as corrupt
until the file is older than the retention period (by its modification time, as the earlier layout purged)."""

from __future__ import annotations

import hashlib
import logging
import os
import re

import msgspec

from store.base import StoreUnavailable
from store.journal import Journal, state_record
from store.records import ThreadState

log = logging.getLogger("agui.store")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


_decode = msgspec.json.Decoder(ThreadState).decode
_encode = msgspec.json.Encoder().encode


def thread_file_name(thread_id: str) -> str:
    """The name the earlier layout gave a thread's file: readable prefix plus a hash."""
    readable = _UNSAFE.sub("_", thread_id)[:40]
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"t-{readable}-{digest}.json"


class LegacyCorrupt:
    """Names of earlier thread files that could not be imported: their threads answer as corrupt."""

    def __init__(self, directory: str, names: set[str]) -> None:
        self.directory = directory
        self.names = names

    def purge(self, cutoff: float) -> int:
        """Remove the files not modified since `cutoff` (their threads are then unknown, as expired ones are)."""
        removed = 0
        for name in sorted(self.names):
            path = os.path.join(self.directory, name)
            try:
                if os.stat(path).st_mtime >= cutoff:
                    continue
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("thread file %s could not be purged (%s)", path, exc.strerror)
                continue
            self.names.discard(name)
            removed += 1
        if removed and not self.names:
            try:
                os.rmdir(self.directory)
            except OSError:
                pass
        return removed

    def check(self, thread_id: str) -> None:
        if self.names and thread_file_name(thread_id) in self.names:
            raise StoreUnavailable("thread state file is corrupt")


def import_thread_files(directory: str, journal: Journal) -> LegacyCorrupt:
    """Append every readable thread file to the journal in one durable batch, then remove the files (a crash
    between the two imports them again at the next start: the same states, nothing lost)."""
    if not os.path.isdir(directory):
        return LegacyCorrupt(directory, set())
    writes, imported, corrupt, leftovers = [], [], set(), []
    for entry in os.scandir(directory):
        if entry.name.endswith(".tmp"):
            leftovers.append(entry.path)  # an unfinished replacement: the file it was for still holds the state
            continue
        try:
            with open(entry.path, "rb") as handle:
                data = handle.read()
            state = _decode(data)
        except (OSError, msgspec.MsgspecError) as exc:
            log.error("thread file %s cannot be imported (%s); it stays, and its thread answers as corrupt", entry.path, exc)
            corrupt.add(entry.name)
            continue
        if thread_file_name(state.thread_id) != entry.name:
            log.error("thread file %s names another thread; it stays, and its thread answers as corrupt", entry.path)
            corrupt.add(entry.name)
            continue
        writes.append((state.thread_id, state_record(_encode(state)), state.updated_at))  # one line, whatever the file's layout
        imported.append(entry.path)
    if writes:
        journal.append(writes)
        log.info("imported %d thread files into %s", len(writes), journal.path)
    for path in imported + leftovers:
        os.unlink(path)
    if not corrupt:
        try:
            os.rmdir(directory)
        except OSError:
            pass
    return LegacyCorrupt(directory, corrupt)
