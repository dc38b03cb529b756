"""The event logs' earlier layout, one file per run (`<digest>.log`): copied into the active segment at start,
then removed. A file that cannot be read is left out, with a warning."""

from __future__ import annotations

import logging
import os

import msgspec

from store.eventlog.segments import Segments, decode_meta, is_segment

log = logging.getLogger("agui.store")


def import_run_files(segments: Segments) -> None:
    for name in os.listdir(segments.directory):
        path = os.path.join(segments.directory, name)
        if name.endswith(".tmp"):
            os.unlink(path)
        elif name.endswith(".log") and not is_segment(name) and len(name) == 44:
            _import_run_file(segments, name[:40], path)
            os.unlink(path)


def _import_run_file(segments: Segments, digest: str, path: str) -> None:
    with open(path, "rb") as handle:
        lines = [line for line in handle.readlines() if line.endswith(b"\n")]
    metas = [line for line in lines if line.startswith((b"M ", b"E "))]
    if not metas:
        return
    try:
        meta = decode_meta(metas[-1][2:-1])
        events = [(int(line.split(b" ", 1)[0]), line.split(b" ", 1)[1][:-1]) for line in lines if line not in metas]
    except (msgspec.MsgspecError, ValueError):
        log.warning("event log %s of the earlier layout is unreadable; not imported", path)
        return
    events = [event for event in events if event[0] >= meta.first]
    segments.write(digest, meta, events, meta.first, None)  # its meta line carries the end, if it ended
