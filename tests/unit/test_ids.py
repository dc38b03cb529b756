"""Random identifiers: the length asked for, never repeated, and no two threads handed the same bytes."""

from __future__ import annotations

import threading

from gateway.ids import random_hex


def test_ids_have_the_length_asked_for_and_never_repeat_across_refills():
    ids = [random_hex(16) for _ in range(5000)]  # about 20 refills of the 4 KiB pool
    assert all(len(value) == 32 and int(value, 16) >= 0 for value in ids)
    assert len(set(ids)) == len(ids)
    assert len(random_hex(8)) == 16 and len(random_hex(5000)) == 10000, "a request larger than the pool is served whole"


def test_threads_draw_from_pools_of_their_own():
    seen: list[list[str]] = [[] for _ in range(4)]

    def draw(into: list[str]) -> None:
        into.extend(random_hex(8) for _ in range(2000))

    threads = [threading.Thread(target=draw, args=(into,)) for into in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [value for into in seen for value in into]
    assert len(set(every)) == len(every) == 8000


def test_a_forked_child_never_hands_out_its_parents_unread_bytes():
    import os

    random_hex(8)  # the pool holds unread bytes now
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's side
        os.write(write, random_hex(8).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    theirs = os.read(read, 64).decode()
    os.close(read)
    assert theirs != random_hex(8), "the child drew from a pool of its own"
